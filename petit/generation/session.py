"""Chat sessions that reuse the KV cache between turns.

Each turn re-renders the whole conversation with the chat template, encodes it, keeps the longest prefix of token
ids that the KV cache already holds, rewinds the cache to it and prefills only the new tail. The time to the first
token therefore depends on the length of the new message, not of the conversation.
"""
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from petit.chat import render_template
from petit.generate import Step, generate_tokens
from petit.sample import Sampler
from petit.stop import StopStrings
from petit.tokenizer import StreamDecoder

# end-of-turn markers of the common template families, matched as token ids in the generated region
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "</s>")


class ContextFullError(ValueError):
    """The conversation (or the transcript) no longer fits the KV cache; nothing was changed."""


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class TurnStats:
    """What one turn cost. Times in seconds; rates in tokens per second (0 when undefined)."""
    prompt_tokens: int = 0          # the whole rendered conversation
    reused_tokens: int = 0          # taken from the KV cache instead of prefilled
    generated_tokens: int = 0
    time_to_first_token: float = 0.0
    prefill_tokens_per_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    finish_reason: str | None = None
    dropped_turns: int = 0          # the oldest turns forgotten to make room (drop_old_turns)
    context_full: bool = False      # the reply was cut because the context ran out (finish_reason "length")

    def __str__(self) -> str:
        return (f"[{self.prompt_tokens} prompt tokens ({self.reused_tokens} reused), {self.generated_tokens} generated;"
                f" first token {1000 * self.time_to_first_token:.0f} ms, prefill {self.prefill_tokens_per_s:.0f} tok/s,"
                f" decode {self.decode_tokens_per_s:.1f} tok/s]")


class ChatSession:
    """A conversation with a model.

    Args:
        model: a petit Model with a tokenizer.
        template: Jinja chat template (default: the one embedded in the model file).
        system: an optional system prompt, sent as the first message.
        sampler: a Sampler (default: greedy).
        max_tokens: the longest reply.
        n_ctx: the KV cache size (default: the model's context).
        reuse_cache: False re-prefills the whole conversation every turn (for comparison).
        stop_strings: texts that end a reply (not shown), besides the end-of-turn tokens.
        drop_old_turns: when the conversation outgrows the context, drop the oldest turns (never the system prompt)
            instead of refusing the message, until the prompt leaves room for a reply of max_tokens (at most a
            quarter of the context); stats.dropped_turns says how many.
        kv_type: "int8" or "f32" (default: int8 when the weights are q8_0 / q4_0, else f32).

    Raises:
        ValueError: the model has no tokenizer or no chat template and none was given.
    """

    def __init__(self, model, template: str | None = None, system: str | None = None, sampler=None,
                 max_tokens: int = 256, n_ctx: int | None = None, reuse_cache: bool = True, stop_strings=(),
                 drop_old_turns: bool = False, kv_type: str | None = None):
        if model.tokenizer is None:
            raise ValueError("this model has no tokenizer, so it cannot chat")
        self.template = template or model.metadata.get("chat_template")
        if not self.template:
            raise ValueError("this model has no chat template; give one (or use `petit run` for plain completion)")
        self.model, self.tokenizer = model, model.tokenizer
        self.sampler = sampler or Sampler(temperature=0.0)
        self.max_tokens = max_tokens
        if kv_type is None:
            kv_type = "int8" if model.weight_type in ("q8_0", "q4_0") else "f32"
        self.cache = model.new_cache(n_ctx, kv_type)
        self.messages = [{"role": "system", "content": system}] if system else []
        self._cached: list[int] = []     # the token ids whose keys and values the cache holds, in order
        self.stop_ids = sorted({i for i in (self.tokenizer.token_to_id(t) for t in END_OF_TURN) if i is not None}
                               | ({self.tokenizer.eos_id} if self.tokenizer.eos_id is not None else set())
                               | set(model.metadata.get("eos_token_ids", ())))
        self.last_prefill = 0            # tokens prefilled for the last turn (the rest came from the cache)
        self.reuse_cache = reuse_cache
        self.stop_strings = list(stop_strings)
        self.drop_old_turns = drop_old_turns
        self.stats = TurnStats()         # of the last turn
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Stop the reply in progress after the current token; safe to call from any thread."""
        self._cancel.set()

    def _special_tokens(self) -> dict:
        """The variables transformers hands a chat template: the model's named special tokens."""
        tok = self.tokenizer
        names = {"bos_token": tok.bos_token or "", "eos_token": tok.eos_token or ""}
        names.update({k: v for k, v in self.model.metadata.get("special_tokens", {}).items() if isinstance(v, str)})
        return names

    def prompt_ids(self, messages) -> list[int]:
        text = render_template(self.template, messages, add_generation_prompt=True, **self._special_tokens())
        return self.tokenizer.encode(text)

    def send(self, text: str) -> Iterator[Step]:
        """Add a user message and stream the reply as Steps (text deltas are complete UTF-8). The assistant message
        is added to the history when the reply ends. A template error leaves the conversation unchanged."""
        messages = self.messages + [{"role": "user", "content": text}]
        ids, dropped = self._fitted(messages)    # raises before anything changes
        self.messages = messages
        keep = min(common_prefix(self._cached, ids), self.cache.pos, len(ids) - 1) if self.reuse_cache else 0

        def done(reply):
            self.messages.append({"role": "assistant", "content": reply})
        yield from self._generate(ids, keep, done, dropped_turns=dropped)

    def resume(self, partial: str) -> Iterator[Step]:
        """Go on with a reply that was cut off: the conversation (ending with the user's message) is followed by
        its assistant turn's opening and `partial`, and the model continues from there. The Steps carry only the
        new text; the reply added to the history is `partial` followed by it."""
        messages = list(self.messages)
        tail = self.tokenizer.encode(partial, add_bos=False)
        ids, dropped = self._fitted(messages, tail)
        self.messages = messages
        keep = min(common_prefix(self._cached, ids), self.cache.pos, len(ids) - 1) if self.reuse_cache else 0

        def done(reply):
            self.messages.append({"role": "assistant", "content": partial + reply})
        yield from self._generate(ids, keep, done, dropped_turns=dropped)

    def _fitted(self, messages: list, tail=()) -> tuple[list[int], int]:
        """The prompt ids of `messages` (then `tail`) and how many turns were dropped, forgetting the oldest turns
        in place when allowed and needed; raises when they still do not fit."""
        ids = self.prompt_ids(messages) + list(tail)
        first = 1 if messages and messages[0]["role"] == "system" else 0
        # room for the reply too, else the first turn after the context fills would be cut after a token or two
        room = max(1, min(self.max_tokens, self.cache.n_ctx // 4))
        dropped = 0
        while self.drop_old_turns and len(ids) + room > self.cache.n_ctx and len(messages) - first > 1:
            dropped += int(messages[first]["role"] == "user")
            del messages[first]                  # the oldest message after the system prompt
            while len(messages) - first > 1 and messages[first]["role"] != "user":
                del messages[first]              # a turn starts with the user
            ids = self.prompt_ids(messages) + list(tail)
        self._check_fits(ids)
        return ids, dropped

    def _check_fits(self, ids) -> None:
        if len(ids) >= self.cache.n_ctx:
            raise ContextFullError(f"the conversation ({len(ids)} tokens) no longer fits the context "
                                   f"({self.cache.n_ctx} tokens, {self.cache.n_ctx - 1} for the prompt at most)")

    def _generate(self, ids, keep: int, on_done, dropped_turns: int = 0) -> Iterator[Step]:
        """Rewind the cache to `keep` tokens, prefill ids[keep:], stream the reply; on_done(reply text) runs at the
        end, also when the caller stops early, with the cache's token record kept consistent."""
        self.cache.rewind(keep)
        self._cached = self._cached[:keep]
        self.last_prefill = len(ids) - keep
        max_tokens = min(self.max_tokens, self.cache.n_ctx - len(ids))
        decoder, reply, generated = StreamDecoder(self.tokenizer, skip_special=True), [], []
        stopper = StopStrings(self.stop_strings)
        stats = self.stats = TurnStats(prompt_tokens=len(ids), reused_tokens=keep, dropped_turns=dropped_turns)
        t0 = time.perf_counter()
        t_first = t0
        self._cancel.clear()
        try:
            for step in generate_tokens(self.model, ids[keep:], max_tokens=max_tokens, sampler=self.sampler,
                                        stop_ids=self.stop_ids, cache=self.cache, context_ids=ids[:keep]):
                if not generated:
                    t_first = time.perf_counter()
                    stats.time_to_first_token = t_first - t0
                    stats.prefill_tokens_per_s = self.last_prefill / max(t_first - t0, 1e-9)
                generated.append(step.token)
                text = decoder.flush() if step.finish_reason == "stop" else decoder.push(step.token)
                if step.finish_reason == "length":
                    text += decoder.flush()
                step.text, hit = stopper.push(text)
                if hit:
                    step.finish_reason = "stop"
                elif step.finish_reason is not None:
                    step.text += stopper.flush()
                reply.append(step.text)
                stats.finish_reason = step.finish_reason
                yield step
                if hit or self._cancel.is_set():
                    break
        finally:
            # also when the caller stops early (Ctrl-C, cancel): the history and the cache stay consistent
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"
                reply.append(stopper.push(decoder.flush())[0] + stopper.flush())
            stats.generated_tokens = len(generated)
            stats.context_full = stats.finish_reason == "length" and len(ids) + len(generated) >= self.cache.n_ctx
            elapsed = time.perf_counter() - t_first
            stats.decode_tokens_per_s = (len(generated) - 1) / elapsed if len(generated) > 1 and elapsed > 0 else 0.0
            self._cached = (ids + generated)[:self.cache.pos]
            self.last_tokens = generated
            on_done("".join(reply))

    def reset(self, system: str | None = None) -> None:
        """Forget the conversation (keeping, or replacing, the system prompt)."""
        old = self.messages[0]["content"] if self.messages and self.messages[0]["role"] == "system" else None
        system = old if system is None else system
        self.messages = [{"role": "system", "content": system}] if system else []


class RawSession(ChatSession):
    """The completion notebook: no template, no roles, no BOS. Each input is appended to one running transcript
    (the model's continuations included) and the model continues it; generation stops only on EOS or the length cap.
    """

    def __init__(self, model, sampler=None, max_tokens: int = 256, n_ctx: int | None = None, stop_strings=(),
                 kv_type: str | None = None):
        super().__init__(model, template="raw", sampler=sampler, max_tokens=max_tokens, n_ctx=n_ctx,
                         stop_strings=stop_strings, kv_type=kv_type)
        self.stop_ids = [self.tokenizer.eos_id] if self.tokenizer.eos_id is not None else []
        self.transcript_ids: list[int] = []

    def send(self, text: str) -> Iterator[Step]:
        # a Hugging Face tokenizer that adds BOS to plain text starts the transcript with it, as transformers would
        first = not self.transcript_ids and getattr(self.tokenizer, "add_bos_token", False)
        ids = self.transcript_ids + self.tokenizer.encode(text, add_bos=bool(first))
        if len(ids) == len(self.transcript_ids):
            raise ValueError("nothing to continue: the text is empty")
        self._check_fits(ids)
        keep = min(common_prefix(self._cached, ids), self.cache.pos, len(ids) - 1)

        def done(reply):
            self.transcript_ids = ids + [t for t in self.last_tokens if t not in self.stop_ids]
        yield from self._generate(ids, keep, done)

    @property
    def transcript(self) -> str:
        return self.tokenizer.decode(self.transcript_ids)

    def reset(self, system: str | None = None) -> None:
        self.cache.rewind(0)
        self._cached, self.transcript_ids = [], []
