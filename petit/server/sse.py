"""OpenAI response shapes (chat.completion, text_completion and their stream chunks) and Server-Sent Events framing.

Every event is `data: <one line of JSON>\\n\\n` (ASCII-escaped, so no client's line splitting can cut it), every chunk
of a stream carries the same `id` and `created`, and the stream ends with `data: [DONE]\\n\\n`.
"""
import json
import time
import uuid

from petit import __version__

DONE = b"data: [DONE]\n\n"
FINGERPRINT = f"petit-{__version__}"


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode("ascii") + b"\n\n"


class Shapes:
    """The bodies of one response: `kind` "chat" (chat.completion) or "completion" (text_completion)."""

    def __init__(self, kind: str, model: str, include_usage: bool = False):
        self.kind, self.model, self.include_usage = kind, model, include_usage
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": FINGERPRINT}

    def response(self, text: str, finish_reason: str, usage: dict, timings: dict | None = None) -> dict:
        if self.kind == "chat":
            out = self._head("chat.completion")
            out["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                               "finish_reason": finish_reason}]
        else:
            out = self._head("text_completion")
            out["choices"] = [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}]
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

    def _choice(self, text: str | None, finish_reason: str | None, role: bool = False) -> dict:
        if self.kind == "chat":
            delta = {} if text is None else ({"role": "assistant", "content": text} if role else {"content": text})
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"text": text or "", "index": 0, "logprobs": None, "finish_reason": finish_reason}

    def first(self) -> bytes | None:
        """A chat stream opens with the role and empty content; a completion stream has no opening chunk."""
        return event(self._chunk(self._choice("", None, role=True))) if self.kind == "chat" else None

    def delta(self, text: str) -> bytes:
        return event(self._chunk(self._choice(text, None)))

    def finish(self, finish_reason: str) -> bytes:
        """The last choice chunk: an empty delta (chat) or empty text (completion) with the finish reason."""
        return event(self._chunk(self._choice(None, finish_reason)))

    def usage(self, usage: dict) -> bytes:
        out = self._chunk(None)
        out["usage"] = usage
        return event(out)
