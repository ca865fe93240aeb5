"""OpenAI response shapes (chat.completion, text_completion and their stream chunks) and Server-Sent Events framing.

Every event is `data: <one line of JSON>\\n\\n` (ASCII-escaped, so no client's line splitting can cut it), every chunk
of a stream carries the same `id` and `created`, and the stream ends with `data: [DONE]\\n\\n`.
"""
import json
import time
import uuid
from typing import NamedTuple

from petit import __version__

DONE = b"data: [DONE]\n\n"
FINGERPRINT = f"petit-{__version__}"


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n\n"


class TokenInfo(NamedTuple):
    """One generated token's log-probability: its text (undecodable bytes as U+FFFD), its bytes, and the top
    alternatives as (text, bytes, logprob)."""
    text: str
    data: bytes
    logprob: float
    top: list


def chat_logprobs(tokens: list) -> dict:
    """A chat choice's `logprobs`: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}."""
    return {"content": [{"token": t.text, "logprob": t.logprob, "bytes": list(t.data),
                         "top_logprobs": [{"token": a, "logprob": lp, "bytes": list(b)} for a, b, lp in t.top]}
                        for t in tokens], "refusal": None}


def completion_logprobs(tokens: list, offset: int = 0) -> dict:
    """A completion choice's legacy `logprobs`: parallel lists, `text_offset` counting characters from the start
    of the completion (`offset`: the text before these tokens)."""
    offsets = []
    for t in tokens:
        offsets.append(offset)
        offset += len(t.text)
    return {"tokens": [t.text for t in tokens], "token_logprobs": [t.logprob for t in tokens],
            "top_logprobs": [{a: lp for a, _, lp in t.top} for t in tokens], "text_offset": offsets}


class Shapes:
    """The bodies of one response: `kind` "chat" (chat.completion) or "completion" (text_completion)."""

    def __init__(self, kind: str, model: str, include_usage: bool = False, logprobs: bool = False):
        self.kind, self.model, self.include_usage, self.logprobs = kind, model, include_usage, logprobs
        self.offset = 0                  # completions: the characters streamed so far (text_offset)
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": FINGERPRINT}

    def _logprobs(self, tokens: list | None):
        if not self.logprobs:
            return None
        tokens = tokens or []
        if self.kind == "chat":
            return chat_logprobs(tokens)
        out = completion_logprobs(tokens, self.offset)
        self.offset += sum(len(t.text) for t in tokens)
        return out

    def response(self, text: str | None, finish_reason: str, usage: dict, timings: dict | None = None,
                 logprobs: list | None = None, tool_calls: list | None = None) -> dict:
        """The whole reply; `tool_calls` ([(id, Call)]) with `text` None when the reply is only calls."""
        if self.kind == "chat":
            out = self._head("chat.completion")
            message = {"role": "assistant", "content": text}
            if tool_calls:
                message["tool_calls"] = [{"id": i, "type": "function",
                                          "function": {"name": c.name, "arguments": c.arguments}}
                                         for i, c in tool_calls]
            out["choices"] = [{"index": 0, "message": message, "logprobs": self._logprobs(logprobs),
                               "finish_reason": finish_reason}]
        else:
            out = self._head("text_completion")
            out["choices"] = [{"text": text, "index": 0, "logprobs": self._logprobs(logprobs),
                               "finish_reason": finish_reason}]
        out["usage"] = usage
        if timings is not None:
            out["timings"] = timings
        return out

    def _chunk(self, choice: dict | None) -> dict:
        out = self._head("chat.completion.chunk" if self.kind == "chat" else "text_completion")
        out["choices"] = [] if choice is None else [choice]
        if self.include_usage:
            out["usage"] = None          # OpenAI: every chunk but the last has "usage": null
        return out

    def _choice(self, text: str | None, finish_reason: str | None, role: bool = False, logprobs=None) -> dict:
        if self.kind == "chat":
            delta = {} if text is None else ({"role": "assistant", "content": text} if role else {"content": text})
            return {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        return {"text": text or "", "index": 0, "logprobs": logprobs, "finish_reason": finish_reason}

    def first(self) -> bytes | None:
        """A chat stream opens with the role and empty content; a completion stream has no opening chunk."""
        return event(self._chunk(self._choice("", None, role=True))) if self.kind == "chat" else None

    def delta(self, text: str, logprobs: list | None = None) -> bytes:
        return event(self._chunk(self._choice(text, None, logprobs=self._logprobs(logprobs))))

    def _tool_delta(self, part: dict) -> bytes:
        return event(self._chunk({"index": 0, "delta": {"tool_calls": [part]}, "logprobs": None,
                                  "finish_reason": None}))

    def tool_call_head(self, index: int, call_id: str, name: str) -> bytes:
        """A streamed call opens with its id, type and name (and empty arguments)..."""
        return self._tool_delta({"index": index, "id": call_id, "type": "function",
                                 "function": {"name": name, "arguments": ""}})

    def tool_call_args(self, index: int, text: str) -> bytes:
        """... then its arguments come in pieces."""
        return self._tool_delta({"index": index, "function": {"arguments": text}})

    def finish(self, finish_reason: str, logprobs: list | None = None) -> bytes:
        """The last choice chunk: an empty delta (chat) or empty text (completion) with the finish reason (and the
        log-probabilities of tokens that completed no text, if any)."""
        return event(self._chunk(self._choice(None, finish_reason, logprobs=self._logprobs(logprobs)
                                              if logprobs else None)))

    def usage(self, usage: dict) -> bytes:
        out = self._chunk(None)
        out["usage"] = usage
        return event(out)
