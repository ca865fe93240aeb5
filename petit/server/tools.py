"""Tool calling: which format a model's template uses, the grammar that makes a model call a tool, and the parser
that turns its output into OpenAI `tool_calls`.

Formats, chosen from the chat template's text:
- "hermes" (Qwen, Hermes, SmolLM3, ...): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one
  block per call. A template that does not mention `tools` at all gets the tools described in its system prompt, in
  this format, and its replies are read the same way.
- "llama3": the whole reply is `{"name": ..., "parameters": {...}}` (optionally after `<|python_tag|>`).
- "mistral": `[TOOL_CALLS]` then a JSON array of `{"name": ..., "arguments": {...}}`, or (newer templates)
  `[TOOL_CALLS]name[ARGS]{...}` per call.

The parser reads the reply as it streams: text that may begin a call's marker is held back, a call is given out once
it is complete (in a stream, piece by piece as it comes: see ToolParser), and anything that is not a well-formed call
(a broken JSON, a missing name) is given out as ordinary content instead: a model's malformed output is never an
error.
"""
import json
import re
import uuid
from dataclasses import dataclass

from petit.generation.grammar import json_rule


@dataclass
class Content:
    text: str


@dataclass
class Call:
    name: str
    arguments: str        # JSON text, as OpenAI gives it


@dataclass
class CallStart:
    """A streamed call's name, read before its arguments are complete (then CallArgs pieces follow)."""
    name: str


@dataclass
class CallArgs:
    text: str


HEADER = re.compile(r'<tool_call>\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_.-]+)"\s*,\s*"arguments"\s*:\s*(?=\{)')
# a call in the formats that write one object after another (the previous call's closing brace may come first)
LLAMA3_HEADERS = (re.compile(r'\s*\}?\s*(?:<\|python_tag\|>)?\s*[\[,;]?\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_.-]+)"\s*,'
                             r'\s*"(?:parameters|arguments)"\s*:\s*(?=\{)'),)
MISTRAL_HEADERS = (re.compile(r'\s*\}?\s*(?:\[TOOL_CALLS\])?\s*[\[,]?\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_.-]+)"\s*,'
                              r'\s*"arguments"\s*:\s*(?=\{)'),
                   re.compile(r'\s*\[TOOL_CALLS\]\s*([A-Za-z0-9_.-]+)\[ARGS\](?=\{)'))
WAIT = 256          # characters a stream waits for a call to open the usual way before reading it whole at the end


class _Scanner:
    """Finds where a JSON object ends in streamed text: the depth of brackets outside strings."""

    def __init__(self):
        self.depth, self.string, self.escape, self.done = 0, False, False, False

    def feed(self, text: str) -> int:
        """How many characters of text belong to the object (all of them while it is still open)."""
        for i, ch in enumerate(text):
            if self.string:
                if self.escape:
                    self.escape = False
                elif ch == "\\":
                    self.escape = True
                elif ch == '"':
                    self.string = False
            elif ch == '"':
                self.string = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    self.done = True
                    return i + 1
        return len(text)


def call_id(fmt: str = "hermes") -> str:
    """A new tool call id: Mistral's templates accept only 9 letters and digits, others take OpenAI's shape."""
    return uuid.uuid4().hex[:9] if fmt == "mistral" else "call_" + uuid.uuid4().hex[:24]


def detect(template: str | None) -> tuple[str, bool]:
    """(format, described): the template's tool-call format, and whether Petit must describe the tools in the
    system prompt itself (the template ignores `tools`)."""
    text = template or ""
    if "[TOOL_CALLS]" in text:
        return "mistral", False
    if "<tool_call>" in text:
        return "hermes", False
    if "<|python_tag|>" in text or ("tools" in text and '"parameters"' in text and "<|eot_id|>" in text):
        return "llama3", False
    return "hermes", "tools" not in text


SYSTEM_TOOLS = ("# Tools\n\nYou may call one or more functions to assist with the user query. The functions are "
                "described in JSON within <tools></tools> tags:\n<tools>\n{tools}\n</tools>\n\nTo call a function, "
                "reply with a JSON object holding its name and arguments within <tool_call></tool_call> tags:\n"
                "<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>")


def describe(messages: list, tools: list) -> list:
    """The conversation for a template that ignores `tools`: the tools described in the system prompt, and the
    assistant's earlier calls written out as the hermes blocks the model is asked to write."""
    text = SYSTEM_TOOLS.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if m["role"] == "assistant" and calls:
            blocks = [hermes_block(c.get("function", c)) for c in calls if isinstance(c, dict)]
            m = {"role": "assistant", "content": "\n".join(filter(None, [m.get("content") or ""] + blocks))}
        out.append(m)
    if out and out[0]["role"] == "system":
        return [{**out[0], "content": out[0]["content"] + "\n\n" + text}] + out[1:]
    return [{"role": "system", "content": text}] + out


def hermes_block(fn: dict) -> str:
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return "<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False) + \
        "\n</tool_call>"


# ---- the grammar of a forced call (tool_choice "required" or a named function) ----
def _call_schema(tool: dict, args_key: str) -> dict:
    fn = tool["function"]
    params = fn.get("parameters") or {"type": "object"}
    return {"type": "object", "properties": {"name": {"const": fn["name"]}, args_key: params},
            "required": ["name", args_key], "additionalProperties": False}


def forced_call_grammar(fmt: str, tools: list, choice: str, parallel: bool, marker_id: int | None = None) -> str:
    """A Lark grammar (llguidance's dialect) for one call (or, with `parallel`, one or more) of the tools allowed:
    all of them for "required", else the one named."""
    allowed = tools if choice == "required" else [t for t in tools if t["function"]["name"] == choice]
    args_key = "parameters" if fmt == "llama3" else "arguments"
    schemas = [_call_schema(t, args_key) for t in allowed]
    one = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if fmt == "llama3":
        return f"start: {json_rule(one)}\n"
    if fmt == "mistral":
        marker = f"<[{marker_id}]>" if marker_id is not None else '"[TOOL_CALLS]"'
        array = {"type": "array", "items": one, "minItems": 1, **({} if parallel else {"maxItems": 1})}
        return f"start: {marker} {json_rule(array)}\n"
    more = ' ("\\n" call)*' if parallel else ""
    return f'start: call{more}\ncall: "<tool_call>\\n" {json_rule(one)} "\\n</tool_call>"\n'


# ---- reading a reply ----
def _call(obj, args_keys=("arguments", "parameters")) -> Call | None:
    """A Call from a decoded {"name", "arguments"} object, else None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    for key in args_keys:
        if key in obj:
            args = obj[key]
            if isinstance(args, str):           # some models write the arguments as a JSON string
                try:
                    args = json.loads(args)
                except ValueError:
                    return None
            if not isinstance(args, dict):
                return None
            return Call(obj["name"], json.dumps(args, ensure_ascii=False))
    return Call(obj["name"], "{}") if set(obj) == {"name"} else None


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _held(buf: str, marker: str) -> int:
    """How many characters at the end of buf might begin `marker`."""
    for n in range(min(len(marker) - 1, len(buf)), 0, -1):
        if buf.endswith(marker[:n]):
            return n
    return 0


class ToolParser:
    """Reads a reply's text as it streams (feed), then ends it (finish); each returns the Content and Call events
    the text so far has settled, in order.

    With `incremental` (a stream), a call that opens the usual way (its name first, then its arguments: hermes'
    `<tool_call>{"name": "f", "arguments": {`, llama3's `{"name": "f", "parameters": {`, mistral's
    `[TOOL_CALLS][{"name": "f", "arguments": {` or `[TOOL_CALLS]f[ARGS]{`) is given out as it comes: CallStart with
    its name, then CallArgs pieces until its arguments close (a call that the reply's end cuts stays as far as it
    came; the finish reason says "length"). Otherwise a call is one Call once complete."""

    OPEN, CLOSE = "<tool_call>", "</tool_call>"
    MISTRAL = "[TOOL_CALLS]"

    def __init__(self, fmt: str, incremental: bool = False):
        self.fmt, self.buf, self.inside, self.started = fmt, "", False, False
        self.after_call = False          # hermes: the line break after a call's block is part of the block
        self.incremental, self.args = incremental, None     # args: the _Scanner of a call being streamed
        self.streamed, self.whole = 0, False     # calls streamed in this block; the block is read whole instead

    def feed(self, text: str) -> list:
        self.buf += text
        return getattr(self, f"_{self.fmt}")(False)

    def finish(self) -> list:
        return getattr(self, f"_{self.fmt}")(True)

    def _content(self, text: str) -> list:
        return [Content(text)] if text else []

    def _hermes(self, end: bool) -> list:
        out = []
        while True:
            if self.after_call and self.buf:
                self.buf, self.after_call = self.buf.removeprefix("\n"), False
            if not self.inside:
                at = self.buf.find(self.OPEN)
                if at < 0:
                    keep = 0 if end else _held(self.buf, self.OPEN)
                    out += self._content(self.buf[:len(self.buf) - keep])
                    self.buf = self.buf[len(self.buf) - keep:]
                    return out
                out += self._content(self.buf[:at])
                self.buf, self.inside = self.buf[at:], True
            if self.incremental and self.args is None:
                m = HEADER.match(self.buf)
                if m:
                    out.append(CallStart(m.group(1)))
                    self.buf, self.args = self.buf[m.end():], _Scanner()
                elif self.CLOSE not in self.buf and not end and len(self.buf) < WAIT:
                    return out                    # it may still open the usual way
            if self.args is not None:
                n = 0 if self.args.done else self.args.feed(self.buf)
                if n:
                    out.append(CallArgs(self.buf[:n]))
                    self.buf = self.buf[n:]
                close = self.buf.find(self.CLOSE)
                if not self.args.done or (close < 0 and not end):
                    if end:
                        self.buf, self.inside, self.args = "", False, None
                    return out
                self.buf = "" if close < 0 else self.buf[close + len(self.CLOSE):]
                self.inside, self.args, self.after_call = False, None, True
                continue
            close = self.buf.find(self.CLOSE)
            if close < 0 and not end:
                return out
            block = self.buf if close < 0 else self.buf[:close + len(self.CLOSE)]
            self.buf = "" if close < 0 else self.buf[close + len(self.CLOSE):]
            self.inside = False
            inner = block[len(self.OPEN):]
            inner = inner[:-len(self.CLOSE)] if inner.endswith(self.CLOSE) else inner
            call = _call(_loads(inner.strip()))
            out += [call] if call is not None else self._content(block)
            self.after_call = call is not None
            if close < 0:
                return out

    def _llama3(self, end: bool) -> list:
        if not self.started:
            lead = self.buf.lstrip()
            if not lead and not end:
                return []
            self.started = True
            self.inside = lead.startswith(("{", "[", "<|python_tag|>"))
        if not self.inside:
            out, self.buf = self._content(self.buf), ""
            return out
        if self.incremental and not self.whole:
            out = self._objects(end, LLAMA3_HEADERS)
            if out is not None:
                return out
        if not end:
            return []
        text = self.buf.strip().removeprefix("<|python_tag|>").strip()
        obj = _loads(text)
        items = obj if isinstance(obj, list) and obj else [obj]
        calls = [_call(o, ("parameters", "arguments")) for o in items]
        out, self.buf = (calls if all(calls) else self._content(self.buf)), ""
        return out

    def _mistral(self, end: bool) -> list:
        if not self.inside:
            at = self.buf.find(self.MISTRAL)
            if at < 0:
                keep = 0 if end else _held(self.buf, self.MISTRAL)
                out = self._content(self.buf[:len(self.buf) - keep])
                self.buf = self.buf[len(self.buf) - keep:]
                return out
            out = self._content(self.buf[:at])
            self.buf, self.inside = self.buf[at:], True
        else:
            out = []
        if self.incremental and not self.whole:
            streamed = self._objects(end, MISTRAL_HEADERS)
            if streamed is not None:
                return out + streamed
        if not end:
            return out
        block, self.buf = self.buf, ""
        calls = _mistral_calls(block[len(self.MISTRAL):])
        return out + (calls if calls else self._content(block))


    def _objects(self, end: bool, headers) -> list | None:
        """A stream's calls written one object after another: CallStart when a call's name is read, CallArgs as its
        arguments come. None when the block does not open that way: it is then read whole at the end."""
        out = []
        while True:
            if self.args is None:
                m = next(filter(None, (h.match(self.buf) for h in headers)), None)
                if m is None:
                    if self.streamed == 0 and (end or len(self.buf) >= WAIT):
                        self.whole = True
                        return None
                    if not end:
                        return out                # the next call (or the end) may still come
                    rest, self.buf = self.buf.strip(" \t\r\n}];,"), ""
                    return out + self._content(rest)
                out.append(CallStart(m.group(1)))
                self.buf, self.args = self.buf[m.end():], _Scanner()
                self.streamed += 1
            n = self.args.feed(self.buf)
            if n:
                out.append(CallArgs(self.buf[:n]))
                self.buf = self.buf[n:]
            if not self.args.done:
                if end:
                    self.buf = ""
                return out
            self.args = None


def _mistral_calls(text: str) -> list | None:
    """`[{"name", "arguments"}, ...]`, or `name[ARGS]{...}` blocks (each after its own [TOOL_CALLS]); None when
    malformed."""
    text = text.strip()
    obj = _loads(text)
    if isinstance(obj, list) and obj:
        calls = [_call(o) for o in obj]
        return calls if all(calls) else None
    calls = []
    for part in text.split(ToolParser.MISTRAL):
        m = re.fullmatch(r"\s*([A-Za-z0-9_-]+)\[ARGS\](.*)", part, re.S)
        call = _call({"name": m.group(1), "arguments": _loads(m.group(2).strip())}) if m else None
        if call is None:
            return None
        calls.append(call)
    return calls or None


def parse(fmt: str, text: str) -> tuple[str | None, list]:
    """(content, calls) of a whole reply: the content None when the reply is only calls."""
    p = ToolParser(fmt)
    events = p.feed(text) + p.finish()
    content = "".join(e.text for e in events if isinstance(e, Content))
    calls = [e for e in events if isinstance(e, Call)]
    return (content if content.strip() or not calls else None), calls
