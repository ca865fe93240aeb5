"""Request validation: an OpenAI request body becomes a GenerationRequest, or an ApiError in OpenAI's error shape.

Unknown fields are ignored (clients add their own: `user`, `metadata`, `store`, ...); a null field counts as absent.
The fields that shape a reply beyond sampling (logprobs, logit_bias, response_format, tools) are checked in
features.py. Legacy completion fields Petit does not implement (`echo`, `suffix`, `best_of`) are ignored.
"""
from dataclasses import dataclass, field

from petit.server import features
from petit.server.errors import ApiError, invalid_type, invalid_value

# request field -> Sampler keyword; `repeat_penalty` is llama.cpp's and LM Studio's name for repetition_penalty
SAMPLING_NUMBERS = {"temperature": "temperature", "top_p": "top_p", "min_p": "min_p",
                    "repetition_penalty": "repetition_penalty", "repeat_penalty": "repetition_penalty",
                    "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty"}
SAMPLING_INTS = {"top_k": "top_k", "seed": "seed"}
ROLES = ("system", "developer", "user", "assistant", "tool", "function")

@dataclass
class GenerationRequest:
    kind: str                           # "chat" or "completion"
    messages: list | None = None        # chat: [{"role", "content", ...}], content a string
    prompt: str | None = None           # completion
    stream: bool = False
    include_usage: bool = False
    sampling: dict = field(default_factory=dict)    # Sampler keywords the request sets
    max_tokens: int | None = None       # None: the server's default
    stop: list | None = None            # None: the server's default
    logprobs: bool = False              # report each token's log-probability
    top_logprobs: int = 0               # ... and this many alternatives
    logit_bias: dict | None = None      # {token id: -100..100}
    response_format: dict | None = None  # None (text), {"type": "json_object"} or {"type": "json_schema", ...}
    tools: list | None = None           # chat: OpenAI function tools
    tool_choice: str = "none"           # "none", "auto", "required", or the name of the function to call
    parallel_tool_calls: bool = True
    speculative: dict | None = None     # Petit's extension: {"draft", "draft_max", "draft_min"}, each optional
    lora: list | None = None            # llama.cpp's: [{"id", "scale"}], the server's adapters to run (None: default)


def _number(body, name):
    value = body.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise invalid_type(name, "a number", value)
    return value


def _int(body, name):
    value = body.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise invalid_type(name, "an integer", value)
    return value


def _common(body: dict, kind: str) -> GenerationRequest:
    req = GenerationRequest(kind)
    if "model" in body and body["model"] is not None and not isinstance(body["model"], str):
        raise invalid_type("model", "a string", body["model"])
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise invalid_type("stream", "a boolean", stream)
    req.stream = bool(stream)
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise invalid_type("stream_options", "an object", options)
        usage = options.get("include_usage")
        if usage is not None and not isinstance(usage, bool):
            raise invalid_type("stream_options.include_usage", "a boolean", usage)
        req.include_usage = bool(usage) and req.stream
    n = _int(body, "n")
    if n is not None and n != 1:
        raise invalid_value("n", f"only n=1 is supported (one choice per request), got {n}.")
    for name, key in SAMPLING_NUMBERS.items():
        value = _number(body, name)
        if value is not None:
            req.sampling[key] = value
    for name, key in SAMPLING_INTS.items():
        value = _int(body, name)
        if value is not None:
            req.sampling[key] = value
    for name in ("max_completion_tokens", "max_tokens"):        # the newer name wins when both are given
        value = _int(body, name)
        if value is not None:
            if value < 1:
                raise invalid_value(name, f"expected an integer >= 1, got {value}.")
            req.max_tokens = value
            break
    stop = body.get("stop")
    if isinstance(stop, str):
        req.stop = [stop]
    elif isinstance(stop, list):
        if not all(isinstance(s, str) for s in stop):
            raise invalid_type("stop", "a string or an array of strings", stop)
        req.stop = stop
    elif stop is not None:
        raise invalid_type("stop", "a string or an array of strings", stop)
    req.logit_bias = features.logit_bias(body)
    req.response_format = features.response_format(body)
    req.speculative = features.speculative(body)
    req.lora = features.lora(body)
    return req


def _content(message: dict, i: int) -> str:
    name = f"messages[{i}].content"
    content = message.get("content")
    if content is None:
        if message["role"] == "assistant":          # an assistant turn that only called tools
            return ""
        raise ApiError(400, f"Missing required parameter: '{name}'.", param=name, code="missing_required_parameter")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid_type(name, "a string or an array of content parts", content)
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else None
            raise invalid_value(f"{name}[{j}]", f"only text content parts ({{\"type\": \"text\", \"text\": ...}}) "
                                                 f"are supported, got type {kind!r}.")
        texts.append(part["text"])
    return "\n".join(texts)


def parse_chat(body: dict) -> GenerationRequest:
    """POST /v1/chat/completions. Message content arrays are joined into one string (text parts only); the
    `developer` role is sent to the template as `system`. The last message must come from the user (or be a tool's
    result)."""
    req = _common(body, "chat")
    messages = body.get("messages")
    if messages is None:
        raise ApiError(400, "Missing required parameter: 'messages'.", param="messages",
                       code="missing_required_parameter")
    if not isinstance(messages, list):
        raise invalid_type("messages", "an array", messages)
    if not messages:
        raise invalid_value("messages", "expected a non-empty array.")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise invalid_type(f"messages[{i}]", "an object", m)
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise invalid_value(f"messages[{i}].role", f"expected one of {', '.join(ROLES)}, got {role!r}.")
        msg = {"role": "system" if role == "developer" else role, "content": _content(m, i)}
        for key in ("name", "tool_calls", "tool_call_id"):
            if m.get(key) is not None:
                msg[key] = m[key]
        out.append(features.template_message(msg))
    if out[-1]["role"] not in ("user", "tool"):
        raise invalid_value("messages", f"the last message must have role 'user' (or 'tool', a tool's result), "
                                         f"got {out[-1]['role']!r}.")
    req.messages = out
    req.logprobs, req.top_logprobs = features.chat_logprobs(body)
    req.tools, req.tool_choice, req.parallel_tool_calls = features.tools(body)
    if req.response_format is not None and req.tool_choice != "none":
        raise invalid_value("response_format", "a JSON response format cannot be combined with tools (give "
                                                "tool_choice 'none', or no tools).")
    return req


def parse_completion(body: dict) -> GenerationRequest:
    """POST /v1/completions: `prompt` is a string or an array of one string; no chat template is applied."""
    req = _common(body, "completion")
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "Missing required parameter: 'prompt'.", param="prompt", code="missing_required_parameter")
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise invalid_value("prompt", "expected a string or an array of exactly one string "
                                           "(one prompt per request; token-id prompts are not supported).")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise invalid_type("prompt", "a string or an array of one string", prompt)
    if not prompt:
        raise invalid_value("prompt", "the prompt is empty: give at least one character to continue.")
    req.prompt = prompt
    top = features.completion_logprobs(body)
    req.logprobs, req.top_logprobs = top is not None, top or 0
    return req
