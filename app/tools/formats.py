"""The model's side of tool use, for the generation worker (no Qt): how a local model is offered the tools (its chat
template's own tool format, or the tools described in the system prompt when the template has none, as the server
does), the grammar that makes it call one (tool_choice "required"), and its reply read back into OpenAI
`tool_calls`. A remote backend is offered the tools in the request and returns `tool_calls` itself.

The conversation's messages keep OpenAI's shape: an assistant message with `tool_calls`, then one `tool` message
per call with its `tool_call_id` and the result's text.
"""
import json

from petit.generation.grammar import GrammarTokenizer, lark_grammar
from petit.generation.logits import Shaped
from petit.server.tools import call_id, describe, detect, forced_call_grammar, parse

MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def model_message(m: dict) -> dict:
    """A chat message as the model is given it: its role and content, and its tool calls or call id when it has
    them (an assistant message that only calls tools has content None, as OpenAI writes it)."""
    out = {k: m[k] for k in MESSAGE_KEYS if k in m and m[k] is not None}
    if out.get("tool_calls") and not out.get("content"):
        out["content"] = None
    return out


def prepare_local(session, messages: list, params, options: dict) -> tuple[list, str]:
    """Offer options["tools"] to a local model: sets `params` (the template's tools, the markers kept, and with
    options["tool_choice"] == "required" a grammar that makes the reply one call) and returns the messages to
    render (with the tools described in the system prompt when the template takes none) and the tool format."""
    tools = options["tools"]
    fmt, described = detect(session.template)
    params.keep_special = True
    if described:
        messages = describe(messages, tools)
    else:
        params.tools = tools
    if options.get("tool_choice") == "required":
        marker = session.tokenizer.token_to_id("[TOOL_CALLS]") if fmt == "mistral" else None
        grammar = lark_grammar(forced_call_grammar(fmt, [closed(t) for t in tools], "required", False,
                                                                marker))
        matcher = GrammarTokenizer.get(session.tokenizer, session.chat_stop_ids).matcher(grammar)
        params.sampler = Shaped(params.sampler, matcher=matcher)
    return messages, fmt


def closed(tool: dict) -> dict:
    """The tool with its arguments held to the properties it declares (an MCP tool's schema seldom says
    additionalProperties, and a forced call should not wander into arguments the tool does not take)."""
    fn = tool["function"]
    params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
    if params.get("type") == "object" and "additionalProperties" not in params:
        params["additionalProperties"] = False
    return {**tool, "function": {**fn, "parameters": params}}


def read_calls(fmt: str, text: str) -> tuple[str, list]:
    """(content, tool_calls) of a local model's whole reply: the calls in OpenAI's shape, the content without them
    ("" when the reply is only calls)."""
    content, calls = parse(fmt, text)
    return content or "", [{"id": call_id(fmt), "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}} for c in calls]


def call_arguments(call: dict) -> dict:
    """A tool call's arguments as a dict; raises ValueError naming the call when they are not a JSON object."""
    fn = call.get("function") or {}
    text = fn.get("arguments") or "{}"
    try:
        args = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise ValueError(f"the model called {fn.get('name')!r} with arguments that are not a JSON object: {text!r}")
    return args
