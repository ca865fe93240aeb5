"""Validation of the request fields that shape a reply beyond sampling: `logprobs` / `top_logprobs`, `logit_bias`,
`response_format`, `tools` / `tool_choice` / `parallel_tool_calls`, `speculative`, `lora`. Each bad value is a 400
naming the field, in OpenAI's words where OpenAI's are known."""
import json
import math
import re

from petit.server.errors import ApiError, invalid_type, invalid_value

MAX_TOP_LOGPROBS = 20           # chat: top_logprobs in 0..20
MAX_COMPLETION_LOGPROBS = 5     # completions: logprobs in 0..5
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _missing(name: str) -> ApiError:
    return ApiError(400, f"Missing required parameter: '{name}'.", param=name, code="missing_required_parameter")


def _int_range(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_type(name, "an integer", value)
    if value < low:
        raise ApiError(400, f"Invalid '{name}': integer below minimum value. Expected a value >= {low}, but got "
                            f"{value} instead.", param=name, code="integer_below_min_value")
    if value > high:
        raise ApiError(400, f"Invalid '{name}': integer above maximum value. Expected a value <= {high}, but got "
                            f"{value} instead.", param=name, code="integer_above_max_value")
    return value


def chat_logprobs(body: dict) -> tuple[bool, int]:
    """(logprobs, top_logprobs) of a chat request: a boolean, and 0..20 alternatives, which need logprobs."""
    logprobs, top = body.get("logprobs"), body.get("top_logprobs")
    if logprobs is not None and not isinstance(logprobs, bool):
        raise invalid_type("logprobs", "a boolean", logprobs)
    if top is None:
        return bool(logprobs), 0
    top = _int_range("top_logprobs", top, 0, MAX_TOP_LOGPROBS)
    if not logprobs:
        raise invalid_value("top_logprobs", "'logprobs' must be set to true when 'top_logprobs' is given.")
    return True, top


def completion_logprobs(body: dict) -> int | None:
    """A completion request's `logprobs`: None (off), or how many alternatives to give per token (0..5)."""
    value = body.get("logprobs")
    if value is None:
        return None
    return _int_range("logprobs", value, 0, MAX_COMPLETION_LOGPROBS)


def logit_bias(body: dict) -> dict | None:
    """{token id: bias}: the keys are token ids as strings (JSON object keys), the values numbers in -100..100."""
    bias = body.get("logit_bias")
    if bias is None:
        return None
    if not isinstance(bias, dict):
        raise invalid_type("logit_bias", "an object", bias)
    out = {}
    for key, value in bias.items():
        if not key.isascii() or not key.isdigit():
            raise ApiError(400, f"Invalid key in 'logit_bias': {key}. You should only be submitting non-negative "
                                "integers.", param="logit_bias", code="invalid_value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid_type(f"logit_bias.{key}", "a number", value)
        if not -100 <= value <= 100:
            raise ApiError(400, f"Invalid value for 'logit_bias': the bias of token {key} is {value}; it must be "
                                "between -100 and 100.", param="logit_bias", code="invalid_value")
        out[int(key)] = value
    return out or None


def response_format(body: dict) -> dict | None:
    """None for plain text, else {"type": "json_object"} or {"type": "json_schema", "name", "schema", "strict"}."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise invalid_type("response_format", "an object", fmt)
    kind = fmt.get("type")
    if kind is None:
        raise _missing("response_format.type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise invalid_value("response_format.type", f"expected one of 'text', 'json_object', 'json_schema', got "
                                                     f"{kind!r}.")
    spec = fmt.get("json_schema")
    if spec is None:
        raise _missing("response_format.json_schema")
    if not isinstance(spec, dict):
        raise invalid_type("response_format.json_schema", "an object", spec)
    name = spec.get("name")
    if name is None:
        raise _missing("response_format.json_schema.name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise invalid_value("response_format.json_schema.name", "expected a name of at most 64 letters, digits, "
                                                                  f"underscores and dashes, got {name!r}.")
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise invalid_type("response_format.json_schema.schema", "an object", schema)
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise invalid_type("response_format.json_schema.strict", "a boolean", strict)
    return {"type": "json_schema", "name": name, "schema": schema, "strict": bool(strict)}


def tools(body: dict) -> tuple[list | None, object, bool]:
    """(tools, tool_choice, parallel_tool_calls). tools: [{"type": "function", "function": {"name", ...}}];
    tool_choice: "none", "auto" (the default with tools), "required", or the name of the one function to call."""
    given, choice, parallel = body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise invalid_type("parallel_tool_calls", "a boolean", parallel)
    parallel = True if parallel is None else parallel
    if given is not None and not isinstance(given, list):
        raise invalid_type("tools", "an array", given)
    names = []
    for i, tool in enumerate(given or []):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise invalid_type(where, "an object", tool)
        if tool.get("type", "function") != "function":
            raise invalid_value(f"{where}.type", f"only 'function' tools are supported, got {tool.get('type')!r}.")
        fn = tool.get("function")
        if fn is None:
            raise _missing(f"{where}.function")
        if not isinstance(fn, dict):
            raise invalid_type(f"{where}.function", "an object", fn)
        name = fn.get("name")
        if name is None:
            raise _missing(f"{where}.function.name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise invalid_value(f"{where}.function.name", "expected a name of at most 64 letters, digits, "
                                                           f"underscores and dashes, got {name!r}.")
        if name in names:
            raise invalid_value(f"{where}.function.name", f"the name {name!r} is given to two tools.")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise invalid_type(f"{where}.function.parameters", "an object", params)
        names.append(name)
    if choice is None:
        return (given or None), ("auto" if given else "none"), parallel
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise invalid_value("tool_choice", f"expected 'none', 'auto', 'required' or an object naming a "
                                                f"function, got {choice!r}.")
    elif isinstance(choice, dict):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str):
            raise invalid_value("tool_choice", "expected {\"type\": \"function\", \"function\": {\"name\": ...}}.")
        if name not in names:
            raise invalid_value("tool_choice", f"the function {name!r} is not among 'tools'.")
        choice = name
    else:
        raise invalid_type("tool_choice", "a string or an object", choice)
    if not given:                        # "auto" / "none" without tools (some clients send them always): no tools
        if choice not in ("none", "auto"):
            raise invalid_value("tool_choice", "'tool_choice' is only allowed when 'tools' are specified.")
        return None, "none", parallel
    return given, choice, parallel


def template_message(msg: dict) -> dict:
    """A message as chat templates expect it: an assistant's tool call arguments as an object, not the JSON text
    OpenAI sends (transformers' convention; a template writes them out with tojson)."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return msg
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
            try:
                call = {**call, "function": {**fn, "arguments": json.loads(fn["arguments"])}}
            except ValueError:
                pass
        out.append(call)
    return {**msg, "tool_calls": out}


SPECULATIVE_DRAFTS = ("lookup", "model", "none")
SPECULATIVE_FIELDS = ("draft", "draft_max", "draft_min")
MAX_DRAFT = 64


def speculative(body: dict) -> dict | None:
    """Petit's `speculative` extension: {"draft": "lookup" | "model" | "none", "draft_max": N, "draft_min": N},
    every field optional (the server's launch settings fill the rest; petit.server.engine checks them against it)."""
    value = body.get("speculative")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_type("speculative", "an object", value)
    unknown = [k for k in value if k not in SPECULATIVE_FIELDS]
    if unknown:
        raise invalid_value("speculative", f"unknown field {unknown[0]!r} (the fields are "
                                           f"{', '.join(SPECULATIVE_FIELDS)}).")
    out = {}
    draft = value.get("draft")
    if draft is not None:
        if not isinstance(draft, str):
            raise invalid_type("speculative.draft", "a string", draft)
        if draft not in SPECULATIVE_DRAFTS:
            raise invalid_value("speculative.draft", f"expected one of 'lookup', 'model', 'none', got {draft!r}.")
        out["draft"] = draft
    for name in ("draft_max", "draft_min"):
        if value.get(name) is not None:
            out[name] = _int_range(f"speculative.{name}", value[name], 1, MAX_DRAFT)
    if out.get("draft_min", 1) > out.get("draft_max", MAX_DRAFT):
        raise invalid_value("speculative.draft_min", f"draft_min ({out['draft_min']}) is above draft_max "
                                                     f"({out['draft_max']}).")
    return out


def lora(body: dict) -> list | None:
    """llama.cpp's per-request `lora` field: [{"id": N, "scale": S}, ...], the server's adapters by their index
    (GET /lora-adapters lists them) and the scale each runs at; adapters not listed do not run. None when absent
    (the server's default). petit.server.engine checks the ids against the server."""
    value = body.get("lora")
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid_type("lora", "an array of {\"id\", \"scale\"} objects", value)
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise invalid_type(f"lora[{i}]", "an object", entry)
        unknown = [k for k in entry if k not in ("id", "scale")]
        if unknown:
            raise invalid_value(f"lora[{i}]", f"unknown field {unknown[0]!r} (the fields are id, scale).")
        if "id" not in entry:
            raise _missing(f"lora[{i}].id")
        scale = entry.get("scale", 1.0)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
            raise invalid_type(f"lora[{i}].scale", "a finite number", scale)
        out.append({"id": _int_range(f"lora[{i}].id", entry["id"], 0, 1 << 30), "scale": float(scale)})
    return out
