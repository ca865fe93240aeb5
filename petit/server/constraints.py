"""What a request asks of the model's tokens, checked against the model before the request is queued: its
logit_bias's token ids, and the grammar its response_format (or a forced tool call) compiles to. A grammar the engine
cannot compile is a 400 naming the problem, never a failure half-way through a reply."""
from petit.server import tools as tool_formats
from petit.server.schema import ApiError, GenerationRequest


def check_bias(engine, bias: dict | None) -> None:
    if not bias:
        return
    n = engine.model.tokenizer.vocab_size
    for token in bias:
        if token >= n:
            raise ApiError(400, f"Invalid key in 'logit_bias': {token} is not a token id of this model (its "
                                f"vocabulary has {n} tokens, 0 to {n - 1}).", param="logit_bias",
                           code="invalid_value")


def grammar_for(engine, req: GenerationRequest) -> str | None:
    """The compiled grammar the reply must match, or None; raises ApiError: 400 when it does not compile, 501 when
    the grammar engine is not installed."""
    from petit.generation import grammar as g
    try:
        return _grammar_for(engine, req, g)
    except g.GrammarUnavailable as e:
        param = "response_format" if req.response_format is not None else "tool_choice"
        raise ApiError(501, f"This server cannot enforce '{param}': {e}.", param=param,
                       code="grammar_engine_missing", type="server_error") from None


def _grammar_for(engine, req: GenerationRequest, g) -> str | None:
    if req.response_format is not None:
        fmt = req.response_format
        schema = {"type": "object"} if fmt["type"] == "json_object" else fmt["schema"]
        param = "response_format" if fmt["type"] == "json_object" else "response_format.json_schema.schema"
        what = "the JSON object format" if fmt["type"] == "json_object" else f"response_format '{fmt['name']}'"
        try:
            grammar = g.json_schema_grammar(schema)
            _grammar_tokenizer(engine, req.kind).check(grammar)
        except g.GrammarError as e:
            raise ApiError(400, f"Invalid schema for {what}: {e}", param=param, code="invalid_json_schema") from None
        return grammar
    if req.tools and req.tool_choice not in ("none", "auto"):
        checker = _grammar_tokenizer(engine, req.kind)
        for i, tool in enumerate(req.tools):         # each tool's own schema first, so an error can name it
            params = tool["function"].get("parameters")
            if params is None:
                continue
            try:
                checker.check(g.json_schema_grammar(params))
            except g.GrammarError as e:
                raise ApiError(400, f"Invalid schema for the parameters of function '{tool['function']['name']}': "
                                    f"{e}", param=f"tools[{i}].function.parameters",
                               code="invalid_json_schema") from None
        fmt, _ = engine.tool_format
        marker = engine.model.tokenizer.token_to_id("[TOOL_CALLS]") if fmt == "mistral" else None
        lark = tool_formats.forced_call_grammar(fmt, req.tools, req.tool_choice, req.parallel_tool_calls, marker)
        try:
            grammar = g.lark_grammar(lark)
            checker.check(grammar)
        except g.GrammarError as e:
            raise ApiError(400, f"The tools' parameters cannot be enforced: {e}", param="tools",
                           code="invalid_json_schema") from None
        return grammar
    return None


def _grammar_tokenizer(engine, kind: str):
    from petit.generation.grammar import GrammarTokenizer
    return GrammarTokenizer.get(engine.model.tokenizer, engine.end_ids(kind))
