"""Speculative decoding: a cheap drafter proposes the next few tokens, the target model checks them all in one
batched forward pass (the multi-token path gives logits at every position) and keeps the longest prefix it agrees
with, plus its own next token. Decode streams the weights once per pass, so each accepted draft is a token for the
price of a little more arithmetic.

Three drafters: `DraftModel` (any Petit model with the target's vocabulary, in a KV cache of its own),
`SelfDraft` (the target's own file at a lower weight type, drafting in the target's KV cache: no prefill, no second
cache) and `LookupDrafter` (prompt lookup: the tokens that followed the latest earlier occurrence of the last n-gram
of the prompt + output so far). `DraftLength` sets how many tokens to draft: it follows the acceptance, and stops
drafting (for a while, then tries again) after a round that kept no draft, and when speculative rounds produce
tokens slower than plain steps did.

Exactness: the target's sampler is applied to every verified row with the context that row would have had in the
plain loop, so with greedy decoding (a `Sampler` with temperature 0, penalties included) the output is token for
token the plain run's. With sampling, the drafts (deterministic: a point mass q) are checked by rejection sampling
(Leviathan et al. 2023): draft d is kept with probability p(d), p the sampler's distribution for that row; on a
rejection the token comes from p with d removed, renormalized (max(0, p - q)); after all are kept, one more from p.
Every token is then distributed as the plain loop's (tests/test_speculative.py checks it by chi-square); the
random sequence differs from the plain run's with the same seed. Any other sampler (a grammar's) runs the plain loop.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from petit.generation.loop import Step, generate_tokens
from petit.generation.sample import Sampler


def check_same_vocabulary(target, draft) -> None:
    """Raise ValueError naming the mismatch when `draft` cannot draft for `target` (different vocabularies)."""
    if draft.vocab_size != target.vocab_size:
        raise ValueError(f"the draft model's vocabulary ({draft.vocab_size} tokens) does not match the target's "
                         f"({target.vocab_size} tokens): a draft model needs the same vocabulary")
    a, b = getattr(target.tokenizer, "vocab", None), getattr(draft.tokenizer, "vocab", None)
    if a is not None and b is not None and list(a) != list(b):
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise ValueError(f"the draft model's vocabulary does not match the target's: token {first} is "
                         f"{b[first] if first < len(b) else None!r} in the draft, "
                         f"{a[first] if first < len(a) else None!r} in the target")


def check_rollback(model, what: str) -> None:
    a = model.net.arch
    if a.state_layers is not None or a.state_shapes is not None:
        raise ValueError(f"speculative decoding needs a KV cache that rolls back to any position; the {what} keeps a "
                         "recurrent state (Mamba / hybrid), which goes back only to snapshots")


class LookupDrafter:
    """Prompt lookup: find the latest earlier occurrence of the context's last `max_ngram` tokens (then shorter
    n-grams, down to `min_ngram`) and draft the tokens that followed it (periodically extended where they run into
    the end of the context). No model, no state."""

    name = "lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def draft(self, context, n: int) -> list[int]:
        if n <= 0 or len(context) < 2:
            return []
        ctx = np.asarray(context, np.int64)
        for g in range(min(self.max_ngram, len(ctx) - 1), self.min_ngram - 1, -1):
            tail = ctx[-g:]
            starts = np.flatnonzero(ctx[:len(ctx) - g] == tail[0])        # candidates: s + g < len(ctx)
            for s in starts[::-1]:
                if np.array_equal(ctx[s:s + g], tail):
                    # what followed, read on through the drafts themselves when it reaches the end: a match
                    # p tokens back drafts the period-p repetition (a loop of one token drafts n of it)
                    out, j = [], s + g
                    while len(out) < n:
                        out.append(int(ctx[j]) if j < len(ctx) else out[j - len(ctx)])
                        j += 1
                    return out
        return []


class DraftModel:
    """A smaller (or lower-bit) model drafting greedily in its own KV cache, which follows the target's context:
    each call rewinds it to the prefix it shares with the context (the rejected drafts go) and prefills the rest."""

    name = "draft model"

    def __init__(self, model, target, n_ctx: int | None = None):
        check_same_vocabulary(target, model)
        check_rollback(model, "draft model")
        self.model = model
        self.n_ctx = min(model.context_length, n_ctx or target.context_length)
        self.cache = model.new_cache(self.n_ctx)
        self.n_vocab = model.tokenizer.vocab_size if model.tokenizer is not None else model.vocab_size
        self._cached: list[int] = []

    def draft(self, context, n: int) -> list[int]:
        if n <= 0 or len(context) >= self.n_ctx:
            return []
        keep = 0
        m = min(len(self._cached), len(context) - 1, self.cache.pos)
        while keep < m and self._cached[keep] == context[keep]:
            keep += 1
        self.cache.rewind(keep)
        self._cached = list(context)
        logits = self.model.forward(list(context[keep:]), self.cache)
        out = []
        while True:
            t = int(np.argmax(logits[:self.n_vocab]))
            out.append(t)
            if len(out) == n or self.cache.pos >= self.n_ctx:
                return out
            logits = self.model.forward([t], self.cache)
            self._cached.append(t)


class SelfDraft:
    """The target's own file at a lower weight type (`--draft self:q4_0`), drafting greedily in the target's KV cache:
    no prompt prefill and no second cache. Its draft tokens' keys and values go past the cache's position and the
    target's check pass overwrites every one of them (the pass stores its rows before it attends), so the cache
    after a round holds the target's values only, as in the plain loop."""

    name = "self draft"
    shares_cache = True

    def __init__(self, model, target):
        check_same_vocabulary(target, model)
        check_rollback(model, "draft model")
        if model.new_cache(2).layout != target.new_cache(2).layout:
            raise ValueError("a self draft needs the target's cache layout (the same model at another weight type)")
        self.model = model
        self.n_vocab = model.tokenizer.vocab_size if model.tokenizer is not None else model.vocab_size

    def draft(self, context, n: int, cache=None) -> list[int]:
        if n <= 0 or cache is None or cache.pos + n > cache.n_ctx:
            return []
        pos, out = cache.pos, []
        try:
            logits = self.model.forward([context[-1]], cache)    # the last token: not in the cache yet
            while True:
                out.append(int(np.argmax(logits[:self.n_vocab])))
                if len(out) == n:
                    return out
                logits = self.model.forward([out[-1]], cache)
        finally:
            cache.rewind(pos)


class DraftLength:
    """How many tokens to draft next, between `lo` and `hi`: `start` first (a drafting model's tokens cost steps of
    their own, so it starts short: 2; lookup's drafts are free: 4), then one more after a round whose drafts were all
    accepted, the accepted count + 1 after a rejection.

    Two cut-offs, each a pause of `backoff` plain steps before it tries again (the pause doubling up to 256 each
    time it loses again, growing four-fold while no draft has been accepted yet, back to 8 when a round wins):
    - a round that kept none of its drafts: it gave one token for a pass and the drafting, a loss whatever the
      clock says, and the sign of a drafter that does not fit the text, so it pauses at once;
    - speed: it keeps the rate of plain steps (tokens / s; one plain step is taken to measure it, after the second
      round) and of speculative rounds (tokens they gave / s, drafting included; the first round, where a draft
      model prefills the prompt, not counted); when `MIN_ROUNDS` rounds average below plain steps, it pauses."""

    MIN_ROUNDS = 2

    def __init__(self, lo: int = 1, hi: int = 8, clock=time.perf_counter, start: int = 4):
        if not 1 <= lo <= hi:
            raise ValueError(f"need 1 <= draft-min <= draft-max, got {lo}, {hi}")
        self.lo, self.hi, self.clock = lo, hi, clock
        self.k = min(hi, max(lo, start))
        self.plain_rate = self.spec_rate = None     # tokens per second, moving averages
        self.pause, self.backoff = 0, 8
        self.seen = self.rounds = 0                 # rounds in all; measured since the last pause
        self.ever_accepted = False

    def next(self, room: int) -> int:
        """Tokens to draft now (0: a plain step), at most `room`."""
        if self.pause > 0 or (self.plain_rate is None and self.seen >= 2):
            return 0                    # backing off, or one plain step to measure what speculation must beat
        return min(self.k, room) if room >= self.lo else 0

    def plain(self, seconds: float) -> None:
        self.pause = max(0, self.pause - 1)
        self.plain_rate = _ema(self.plain_rate, 1.0 / max(seconds, 1e-9))

    def round(self, drafted: int, accepted: int, seconds: float) -> None:
        self.k = min(self.hi, self.k + 1) if accepted == drafted else max(self.lo, accepted + 1)
        self.seen += 1
        self.ever_accepted |= accepted > 0
        if accepted == 0 and drafted > 0:
            self._lose()
            return
        if self.seen == 1:
            return                      # warm-up: a draft model's prompt prefill
        self.spec_rate = _ema(self.spec_rate, (accepted + 1) / max(seconds, 1e-9))
        self.rounds += 1
        if self.rounds < self.MIN_ROUNDS or self.plain_rate is None:
            return
        if self.spec_rate < self.plain_rate:
            self._lose()
        else:
            self.backoff = 8

    def _lose(self) -> None:
        self.pause = self.backoff
        self.backoff = min(256, self.backoff * (2 if self.ever_accepted else 4))
        self.spec_rate, self.rounds = None, 0


def _ema(old, new, alpha: float = 0.3):
    return new if old is None else (1 - alpha) * old + alpha * new


@dataclass
class Speculation:
    """A drafter and its draft lengths, given to `generate_speculative` or a `Session`."""
    drafter: object
    draft_max: int = 8
    draft_min: int = 1

    def __post_init__(self):
        if not 1 <= self.draft_min <= self.draft_max:
            raise ValueError(f"need 1 <= --draft-min <= --draft-max, got {self.draft_min} and {self.draft_max}")

    def describe(self) -> str:
        """One line for a banner: what drafts, and how many tokens."""
        d = self.drafter
        what = f"{d.name} {d.model.path} ({d.model.weight_type})" if hasattr(d, "model") else d.name
        return f"speculative decoding: {what}, {self.draft_min}-{self.draft_max} tokens"

    @staticmethod
    def exact_for(sampler) -> bool:
        """Whether speculation keeps `sampler`'s output exact: a plain Sampler (greedy: the same tokens; sampling:
        the same distribution, by rejection sampling). Any other callable may keep state between calls (a grammar):
        it runs the plain loop."""
        return sampler is None or type(sampler) is Sampler


def load_draft_model(spec: str, target_path: str, **load_kwargs):
    """The model of a --draft value and whether it is a self draft: a model path, or `self:TYPE` (the target's own
    file at weight type TYPE, e.g. self:q4_0)."""
    from petit.loading import load       # the layer below generation (petit's public API is above it)
    if spec.startswith("self:"):
        return load(target_path, weights=spec[5:], **load_kwargs), True
    return load(spec, **load_kwargs), False


def make_drafter(draft_model, is_self: bool, target, n_ctx: int | None = None):
    """A drafter over a loaded draft model: a SelfDraft (in the target's cache) or a DraftModel (a cache of its own
    of n_ctx positions). Raises ValueError naming what does not match the target."""
    return SelfDraft(draft_model, target) if is_self else DraftModel(draft_model, target, n_ctx)


def load_draft(spec: str, target, target_path: str, n_ctx: int | None = None, **load_kwargs):
    """The drafter of a --draft value: a model path (a DraftModel), or `self:TYPE` (a SelfDraft: the target's own
    file at weight type TYPE, e.g. self:q4_0)."""
    return make_drafter(*load_draft_model(spec, target_path, **load_kwargs), target, n_ctx)


def _verify_sampled(sampler: Sampler, rows, drafts, context, n_vocab: int) -> tuple[int, int]:
    """Rejection sampling of deterministic drafts against the sampler's distributions: (accepted, next token)."""
    rng = sampler._rng
    for i, d in enumerate(drafts):
        p = sampler.probs(rows[i][:n_vocab], context + drafts[:i])
        if rng.random() < p[d]:
            continue
        p[d] = 0.0
        return i, int(min(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"), len(p) - 1))
    return len(drafts), int(sampler(rows[len(drafts)][:n_vocab], context + drafts))


def generate_speculative(model, prompt_ids, speculation: Speculation, *, max_tokens: int = 64, sampler=None,
                         stop_ids=(), cache=None, context_ids=(), stats=None, clock=time.perf_counter
                         ) -> Iterator[Step]:
    """`generate_tokens` with speculation: the same Steps (for a greedy sampler, the same tokens). `stats`, if
    given, gets drafted_tokens / accepted_tokens / target_passes added to (the prompt's pass counted)."""
    if not Speculation.exact_for(sampler):
        yield from generate_tokens(model, prompt_ids, max_tokens=max_tokens, sampler=sampler, stop_ids=stop_ids,
                                   cache=cache, context_ids=context_ids)
        return
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a non-negative integer, got {max_tokens!r}")
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty: give at least one token")
    check_rollback(model, "model")
    sampler = sampler or Sampler(temperature=0.0)
    if cache is None:
        cache = model.new_cache(min(model.context_length, len(prompt_ids) + max_tokens + 1))
    if cache.pos + len(prompt_ids) > cache.n_ctx:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) does not fit the context "
                         f"({cache.n_ctx - cache.pos} positions left)")
    stop = set(int(t) for t in stop_ids)
    n_vocab = model.tokenizer.vocab_size if model.tokenizer is not None else model.vocab_size
    greedy = sampler.temperature == 0
    control = DraftLength(speculation.draft_min, speculation.draft_max, clock,
                          start=4 if isinstance(speculation.drafter, LookupDrafter) else 2)
    drafter = speculation.drafter
    first = cache.pos + len(prompt_ids)          # the cache position of the first generated token
    context = list(context_ids) + [int(t) for t in prompt_ids]
    n_out = 0

    def pick(row, ctx) -> int:
        return int(sampler(row[:n_vocab], ctx))

    def count(name: str, n: int) -> None:
        if stats is not None:
            setattr(stats, name, getattr(stats, name) + n)

    pending = [pick(model.forward(prompt_ids, cache), context)]
    count("target_passes", 1)
    try:
        while max_tokens > 0:
            token = pending.pop(0)
            context.append(token)
            n_out += 1
            if token in stop:
                yield Step(token, finish_reason="stop")
                return
            if n_out == max_tokens or first + n_out - 1 >= cache.n_ctx:
                yield Step(token, finish_reason="length")
                return
            yield Step(token)
            if pending:                          # an accepted draft: already in the cache
                continue
            # the last token is not in the cache yet: check it and the drafts in one pass
            room = min(max_tokens - n_out - 1, cache.n_ctx - cache.pos - 1)
            t0 = clock()
            k = control.next(room)
            if not k:
                drafts = []
            elif getattr(drafter, "shares_cache", False):
                drafts = drafter.draft(context, k, cache)[:k]
            else:
                drafts = drafter.draft(context, k)[:k]
            if len(drafts) < speculation.draft_min:
                drafts = []
            if not drafts:
                pending.append(pick(model.forward([token], cache), context))
                count("target_passes", 1)
                control.plain(clock() - t0)
                continue
            rows = model.forward([token] + drafts, cache, all_logits=True)
            count("target_passes", 1)
            if greedy:
                nxt, accepted = pick(rows[0], context), 0
                while accepted < len(drafts) and nxt == drafts[accepted]:
                    accepted += 1
                    nxt = pick(rows[accepted], context + drafts[:accepted])
            else:
                accepted, nxt = _verify_sampled(sampler, rows, drafts, context, n_vocab)
            cache.rewind(cache.pos - (len(drafts) - accepted))      # the rejected drafts' keys and values go
            pending = drafts[:accepted] + [nxt]
            count("drafted_tokens", len(drafts))
            count("accepted_tokens", accepted)
            control.round(len(drafts), accepted, clock() - t0)
    finally:
        # the cache holds exactly the tokens given out but the last (as in the plain loop), also when stopped early
        cache.rewind(min(cache.pos, first + max(n_out - 1, 0)))
