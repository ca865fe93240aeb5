"""Streaming detokenization: token ids in, complete text out, with the user's stop strings applied.

`StreamDecoder` is the protocol every tokenizer's incremental decoder follows; a tokenizer makes one with
``tokenizer.stream_decoder(skip_special)``. The implementations live beside their tokenizers, because each needs its
tokenizer's insides: the byte-level one (`petit.tokenizer.ByteStreamDecoder`, bytes through an incremental UTF-8
decoder) and the Hugging Face one (`petit.hf.tokenizer.HFStreamDecoder`, windows through the library's decoder).
`TextStream` is the one place that turns a stream of Steps into text: decoder, then stop strings.
"""
from typing import Protocol

from petit.generation.stop import StopStrings


class StreamDecoder(Protocol):
    """``"".join(d.push(t) for t in ids) + d.flush() == tokenizer.decode(ids, skip_special=...)`` for any ids."""

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes ("" while a character is incomplete)."""

    def flush(self) -> str:
        """Return the text held back (a dangling partial character as U+FFFD) and start afresh."""


class TextStream:
    """Fills in each Step's text: the token's decoded text, minus anything that might begin a stop string (held
    back until it is known not to be). A stop string reached ends the stream: its Step's finish_reason becomes
    "stop" and the text from the stop string on is dropped. A stop token's own text is never shown."""

    def __init__(self, tokenizer, stop_strings=(), skip_special: bool = False):
        self.decoder: StreamDecoder = tokenizer.stream_decoder(skip_special)
        self.stopper = StopStrings(stop_strings)

    def fill(self, step) -> bool:
        """Set step.text (and finish_reason on a stop string); True when a stop string was reached."""
        text = self.decoder.flush() if step.finish_reason == "stop" else self.decoder.push(step.token)
        if step.finish_reason == "length":
            text += self.decoder.flush()
        step.text, hit = self.stopper.push(text)
        if hit:
            step.finish_reason = "stop"
        elif step.finish_reason is not None:
            step.text += self.stopper.flush()
        return hit
