"""A Session keeps a model's KV cache between calls; the caller owns the conversation and passes it every time.

`reply(messages, params)` renders the whole conversation with the chat template, encodes it, keeps the longest
prefix of token ids that the KV cache already holds, rewinds the cache to it and prefills only the new tail: the
time to the first token depends on the length of the new message, not of the conversation. `complete(prompt,
params)` does the same for plain text (no template). Both stream `Step`s from the one token loop
(`petit.generation.loop.generate_tokens`), their text filled in by `petit.generation.detokenize.TextStream`.
"""
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from petit.chat.template import render_template
from petit.generation.detokenize import TextStream
from petit.generation.loop import Step, generate_tokens
from petit.generation.sample import Sampler

# end-of-turn markers of the common template families, matched as token ids in the generated region
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "</s>")


class ContextFullError(ValueError):
    """The conversation (or the prompt) does not fit the KV cache; nothing was generated. `tokens`: the prompt's
    length as rendered (tools included), `n_ctx`: the context's."""

    def __init__(self, tokens: int, n_ctx: int):
        super().__init__(f"the conversation ({tokens} tokens) no longer fits the context ({n_ctx} tokens, "
                         f"{n_ctx - 1} for the prompt at most)")
        self.tokens, self.n_ctx = tokens, n_ctx


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class Params:
    """How to generate one reply; given on every call.

    Attributes:
        sampler: a Sampler (or any logits -> token id callable), used as it is, so a seeded Sampler given on every
            call goes on with its random sequence; a dict of Sampler settings (a new Sampler each call); or None
            for greedy.
        max_tokens: the longest reply.
        stop: texts that end a reply (not shown), besides the end-of-turn tokens.
        drop_old_turns: (reply only) when the conversation outgrows the context, drop the oldest turns (never the
            system prompt) instead of refusing it, until the prompt leaves room for a reply of max_tokens (at most a
            quarter of the context); the reply's Stats say how many.
        tools: (reply only) function descriptions in OpenAI's shape, given to the chat template as `tools`.
        keep_special: show the special tokens the reply contains (a tool call's markers, such as Mistral's
            `[TOOL_CALLS]`, are special tokens that the parser needs to see); the end token is never shown.
        n_keep: (with drop_old_turns) never drop the turns that start within the first n_keep tokens of the prompt
            (the attention sinks at its start: the system prompt is always kept; this keeps e.g. the first question
            too), whole turns only.
        ctx_shift: (with drop_old_turns) when old turns are dropped, shift the kept turns down inside the KV cache
            (petit.generation.ctx_shift) instead of prefilling them again, where the model allows it exactly; the
            reply's Stats say how many tokens were shifted, or why not.
    """
    sampler: Sampler | Callable | dict | None = None
    max_tokens: int = 256
    stop: Sequence[str] = ()
    drop_old_turns: bool = False
    tools: list | None = None
    keep_special: bool = False
    ctx_shift: bool = False
    n_keep: int = 0

    def make_sampler(self):
        if self.sampler is None:
            return Sampler(temperature=0.0)
        return Sampler(**self.sampler) if isinstance(self.sampler, dict) else self.sampler


@dataclass
class Stats:
    """What one reply cost. Times in seconds; rates in tokens per second (0 when undefined)."""
    prompt_tokens: int = 0          # the whole rendered conversation
    reused_tokens: int = 0          # taken from the KV cache instead of prefilled
    generated_tokens: int = 0
    time_to_first_token: float = 0.0
    prefill_tokens_per_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    finish_reason: str | None = None
    dropped_turns: int = 0          # the oldest turns forgotten to make room (drop_old_turns)
    dropped_messages: int = 0       # ... as messages: the caller drops as many after its system prompt
    dropped_at: int = 0             # ... from this message on (after the system prompt, or the turns n_keep kept)
    context_full: bool = False      # the reply was cut because the context ran out (finish_reason "length")
    drafted_tokens: int = 0         # speculative decoding: tokens drafted, of them accepted by the target, and the
    accepted_tokens: int = 0        # target's forward passes (the prompt's included; 0 without speculation)
    target_passes: int = 0
    shifted_tokens: int = 0         # context shift: kept turns' tokens moved inside the cache instead of prefilled
    shift_refused: str | None = None    # ... or why the model cannot shift exactly (the turns were prefilled again)

    @property
    def tokens_per_pass(self) -> float:
        """Generated tokens per target forward pass (1.0 for plain decoding; 0 without speculation)."""
        return self.generated_tokens / self.target_passes if self.target_passes else 0.0

    def __str__(self) -> str:
        return (f"[{self.prompt_tokens} prompt tokens ({self.reused_tokens} reused), {self.generated_tokens} generated;"
                f" first token {1000 * self.time_to_first_token:.0f} ms, prefill {self.prefill_tokens_per_s:.0f} tok/s,"
                f" decode {self.decode_tokens_per_s:.1f} tok/s{self.speculation_text()}{self.shift_text()}]")

    def shift_text(self) -> str:
        if self.shifted_tokens:
            return f"; context shift: {self.shifted_tokens} tokens of kept turns moved, not prefilled"
        return f"; no context shift ({self.shift_refused}): the kept turns were prefilled" if self.shift_refused else ""

    def speculation_text(self) -> str:
        if not self.target_passes:
            return ""
        return (f"; drafted {self.drafted_tokens}, accepted {self.accepted_tokens},"
                f" {self.tokens_per_pass:.2f} tokens per target pass")


class Session:
    """A model and its KV cache, keyed by the token ids it holds.

    Args:
        model: a petit Model with a tokenizer.
        template: Jinja chat template for `reply` (default: the one embedded in the model file).
        n_ctx: the KV cache size (default: the model's context).
        kv_type: "int8" or "f32" (default: int8 when the weights are q8_0 / q4_0 and the family's cache can hold
            int8 rows, else f32).
        reuse_cache: False prefills the whole prompt every call (for comparison).
        speculation: a `petit.generation.speculative.Speculation` (a drafter and its draft lengths): greedy replies
            are then decoded speculatively, token for token the same; sampled ones run the plain loop.

    Raises:
        ValueError: the model has no tokenizer.
    """

    def __init__(self, model, *, template: str | None = None, n_ctx: int | None = None, kv_type: str | None = None,
                 reuse_cache: bool = True, speculation=None):
        if model.tokenizer is None:
            raise ValueError("this model has no tokenizer, so it cannot generate text")
        if speculation is not None:
            from petit.generation.speculative import check_rollback
            check_rollback(model, "model")
        self.speculation = speculation
        self.model, self.tokenizer = model, model.tokenizer
        self.template = template or model.metadata.get("chat_template")
        if kv_type is None:         # a family whose cache holds more than keys and values keeps it float32 (dsv4)
            int8 = model.weight_type in ("q8_0", "q4_0") and getattr(model.net, "int8_cache", True)
            kv_type = "int8" if int8 else "f32"
        self.cache = model.new_cache(n_ctx, kv_type)
        self.reuse_cache = reuse_cache
        self._cached: list[int] = []     # the token ids whose keys and values the cache holds, in order
        tok = self.tokenizer
        eos = {tok.eos_id} if tok.eos_id is not None else set()
        self.text_stop_ids = sorted(eos)             # a completion ends at EOS only
        self.chat_stop_ids = sorted({i for i in (tok.token_to_id(t) for t in END_OF_TURN) if i is not None}
                                    | eos | set(model.metadata.get("eos_token_ids", ())))
        self._cancel = threading.Event()

    @property
    def n_ctx(self) -> int:
        return self.cache.n_ctx

    def forget(self) -> None:
        """Prefill the next prompt from its start: the cache's keys and values no longer match what the model computes
        (another run-time adapter), so no prefix of them is reused."""
        self._cached = []

    def cancel(self) -> None:
        """Stop the reply in progress after the current token; safe to call from any thread."""
        self._cancel.set()

    def _special_tokens(self) -> dict:
        """The variables transformers hands a chat template: the model's named special tokens."""
        tok = self.tokenizer
        names = {"bos_token": tok.bos_token or "", "eos_token": tok.eos_token or ""}
        names.update({k: v for k, v in self.model.metadata.get("special_tokens", {}).items() if isinstance(v, str)})
        return names

    def prompt_ids(self, messages, tools=None) -> list[int]:
        """The token ids of `messages` rendered with the chat template (given `tools`, if any), ready for the
        assistant's turn."""
        if not self.template:
            raise ValueError("this model has no chat template; give one (or use `petit run` for plain completion)")
        text = render_template(self.template, messages, add_generation_prompt=True, tools=tools,
                               **self._special_tokens())
        return self.tokenizer.encode(text)

    def reply(self, messages, params: Params | None = None, *, partial: str | None = None) -> Iterator[Step]:
        """Stream the assistant's reply to `messages` (a list of {"role", "content"}, ending with the user's) as
        Steps (text deltas are complete UTF-8). With `partial`, the reply goes on from that text (a reply that was
        cut off): the Steps carry only the new text. `messages` is not changed; when old turns were dropped to fit,
        the Steps' stats say how many messages (after a system prompt) the model no longer saw. A reply stopped early
        (cancel, or the caller closing the iterator) ends with the last Step's text: text still held back then (a
        partial character, the possible start of a stop string) is dropped.

        Raises (before the first Step): TemplateError, ContextFullError (a ValueError), ValueError."""
        params = params or Params()
        messages = list(messages)
        tail = self.tokenizer.encode(partial, add_bos=False) if partial else []
        ids, turns, dropped, at = self._fitted(messages, tail, params)
        yield from self._generate(ids, params, self.chat_stop_ids, turns, dropped, at)

    def complete(self, prompt, params: Params | None = None) -> Iterator[Step]:
        """Stream the continuation of `prompt`: a text (encoded with a BOS when the tokenizer adds one to plain
        text, `tokenizer.adds_bos`) or a list of token ids (used as given). Ends at EOS, a stop string, max_tokens
        or the context's end.

        Raises (before the first Step): ValueError for an empty prompt, ContextFullError when it does not fit."""
        params = params or Params()
        if isinstance(prompt, str):
            tok = self.tokenizer
            ids = tok.encode(prompt, add_bos=tok.adds_bos) if prompt else []
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("nothing to continue: the text is empty")
        self._check_fits(ids)
        yield from self._generate(ids, params, self.text_stop_ids)

    def _fitted(self, messages: list, tail, params: Params) -> tuple[list[int], int, int, int]:
        """The prompt ids of `messages` (then `tail`), the user turns and the messages dropped to fit, forgetting the
        oldest turns of `messages` in place when allowed and needed; raises when they still do not fit."""
        ids = self.prompt_ids(messages, params.tools) + list(tail)
        first = 1 if messages and messages[0]["role"] == "system" else 0
        # room for the reply too, else the first turn after the context fills would be cut after a token or two
        room = max(1, min(params.max_tokens, self.cache.n_ctx // 4))
        if params.drop_old_turns and params.n_keep > 0 and len(ids) + room > self.cache.n_ctx:
            first = self._kept_head(messages, first, params.n_keep, params.tools)
        turns = dropped = 0
        while params.drop_old_turns and len(ids) + room > self.cache.n_ctx and len(messages) - first > 1:
            turns += int(messages[first]["role"] == "user")
            del messages[first]                  # the oldest message after the system prompt
            dropped += 1
            while len(messages) - first > 1 and messages[first]["role"] != "user":
                del messages[first]              # a turn starts with the user
                dropped += 1
            ids = self.prompt_ids(messages, params.tools) + list(tail)
        self._check_fits(ids)
        return ids, turns, dropped, first

    def _kept_head(self, messages: list, first: int, n_keep: int, tools) -> int:
        """The index of the first message that may be dropped: past every turn that starts within the first n_keep
        tokens of the rendered conversation (never the last message)."""
        i = first
        while i < len(messages) - 1:
            if i > 0:
                text = render_template(self.template, messages[:i], add_generation_prompt=False, tools=tools,
                                       **self._special_tokens())
                if len(self.tokenizer.encode(text)) >= n_keep:
                    break
            i += 1                                   # keep message i and the rest of its turn
            while i < len(messages) - 1 and messages[i]["role"] != "user":
                i += 1
        return i

    def _check_fits(self, ids) -> None:
        if len(ids) >= self.cache.n_ctx:
            raise ContextFullError(len(ids), self.cache.n_ctx)

    def _shift(self, ids, keep: int) -> tuple[int, int, str | None]:
        """Context shift: the kept turns moved down in the cache to where the shortened render has them. Returns
        (the cache's tokens now shared with ids, tokens shifted, why not)."""
        from petit.generation import ctx_shift
        refused = ctx_shift.shift_refusal(self.model, self.cache)
        if refused is not None:
            return keep, 0, refused
        found = ctx_shift.find_kept(self._cached[:self.cache.pos], ids, keep)
        if found is None or found[1] == 0:
            return keep, 0, None
        dropped, kept = found[0], min(found[1], len(ids) - 1 - keep)     # the last prompt token is fed anew
        self.cache.rewind(keep + dropped + kept)
        ctx_shift.shift(self.model, self.cache, keep, dropped, kept)
        self._cached = self._cached[:keep] + self._cached[keep + dropped:keep + dropped + kept]
        return keep + kept, kept, None

    def _generate(self, ids, params: Params, stop_ids, dropped_turns: int = 0,
                  dropped_messages: int = 0, dropped_at: int = 0) -> Iterator[Step]:
        """Rewind the cache to the prefix it shares with `ids`, prefill the rest, stream the reply; the cache's
        token record stays consistent also when the caller stops early."""
        keep = min(common_prefix(self._cached, ids), self.cache.pos, len(ids) - 1) if self.reuse_cache else 0
        if hasattr(self.cache, "restorable"):      # a recurrent state goes back only to a snapshot (a turn's end)
            keep = self.cache.restorable(keep)
        shifted, refused = 0, None
        if params.ctx_shift and dropped_messages and self.reuse_cache:
            keep, shifted, refused = self._shift(ids, keep)
        text = TextStream(self.tokenizer, params.stop, skip_special=not params.keep_special)
        sampler = params.make_sampler()
        self.cache.rewind(keep)
        self._cached = self._cached[:keep]
        max_tokens = min(params.max_tokens, self.cache.n_ctx - len(ids))
        generated = []
        stats = Stats(prompt_tokens=len(ids), reused_tokens=keep, dropped_turns=dropped_turns,
                      dropped_messages=dropped_messages, dropped_at=dropped_at, shifted_tokens=shifted,
                      shift_refused=refused)
        t0 = time.perf_counter()
        t_first = t0
        self._cancel.clear()
        start = keep
        steps = None
        try:
            if hasattr(self.cache, "snapshot") and len(ids) - 1 > keep:
                # a recurrent state: the prompt but its last token, then a snapshot there, so the same prompt
                # again (a regenerate, a retried request) and every later turn start from here at least, however
                # the reply re-tokenizes
                self.model.forward(ids[keep:-1], self.cache)
                self.cache.snapshot()
                self._cached = list(ids[:-1])
                start = len(ids) - 1
            if self.speculation is not None:
                from petit.generation.speculative import generate_speculative
                steps = generate_speculative(self.model, ids[start:], self.speculation, max_tokens=max_tokens,
                                             sampler=sampler, stop_ids=stop_ids, cache=self.cache,
                                             context_ids=ids[:start], stats=stats)
            else:
                steps = generate_tokens(self.model, ids[start:], max_tokens=max_tokens, sampler=sampler,
                                        stop_ids=stop_ids, cache=self.cache, context_ids=ids[:start])
            for step in steps:
                if not generated:
                    t_first = time.perf_counter()
                    stats.time_to_first_token = t_first - t0
                    stats.prefill_tokens_per_s = (len(ids) - keep) / max(t_first - t0, 1e-9)
                generated.append(step.token)
                hit = text.fill(step)
                step.stats = stats
                stats.finish_reason = step.finish_reason
                stats.generated_tokens = len(generated)
                yield step
                if hit or self._cancel.is_set():
                    break
        finally:
            # also when the caller stops early (Ctrl-C, cancel): the cache's record says what it holds
            if steps is not None:
                steps.close()                        # (a speculative loop rewinds its unused drafts here)
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"
            stats.generated_tokens = len(generated)
            stats.context_full = stats.finish_reason == "length" and len(ids) + len(generated) >= self.cache.n_ctx
            elapsed = time.perf_counter() - t_first
            stats.decode_tokens_per_s = (len(generated) - 1) / elapsed if len(generated) > 1 and elapsed > 0 else 0.0
            self._cached = (ids + generated)[:self.cache.pos]
            if hasattr(self.cache, "snapshot"):
                self.cache.snapshot()                # the next turn, a regenerate or an edit goes back to here
