"""The one token loop: prefill the prompt into the KV cache, then sample one token per forward pass.

`generate_tokens` yields a Step per token; `stream_text` is the same loop with each Step's text filled in by a
`TextStream`. `petit.generation.session.Session` runs this loop too, with its stop strings and statistics.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from petit.generation.detokenize import TextStream
from petit.generation.sample import Sampler

if TYPE_CHECKING:                        # the cache module loads the kernels; generation itself does not need them
    from petit.cache import KVCache


@dataclass
class Step:
    """One generated token.

    Attributes:
        token: the sampled token id.
        text: the text this token completes (may be "" while a UTF-8 character or a merge is incomplete).
        finish_reason: None while generating; "stop" when the token is a stop token (it is still reported) or
            reaches a stop string, "length" when max_tokens or the context is reached.
        stats: for a Session's Steps, the reply's `Stats` (one object, updated as the reply goes; complete once the
            iterator ends or is closed); None for generate_tokens / stream_text.
    """
    token: int
    text: str = ""
    finish_reason: str | None = None
    stats: object = None


def generate_tokens(model, prompt_ids, *, max_tokens: int = 64, sampler: Callable | None = None,
                    stop_ids=(), cache: KVCache | None = None,
                    on_logits: Callable[[np.ndarray], None] | None = None, context_ids=()) -> Iterator[Step]:
    """Prefill `prompt_ids` into the cache, then sample up to `max_tokens` tokens, one forward pass each.

    Args:
        model: a petit Model.
        prompt_ids: at least one token id.
        max_tokens: the most tokens to generate.
        sampler: logits -> token id (default: greedy).
        stop_ids: token ids that end generation (the stop token is yielded with finish_reason "stop").
        cache: the KV cache to append to (default: a fresh one sized for prompt + max_tokens).
        on_logits: called with the logits [T, vocab] of every position as it is computed (prompt rows first,
            then one row per generated token that is fed back).
        context_ids: tokens already in the cache before prompt_ids (a chat's earlier turns); with prompt_ids and
            the generated tokens they are what a Sampler's repetition / frequency / presence penalties look at.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a non-negative integer, got {max_tokens!r}")
    if len(prompt_ids) == 0:
        raise ValueError("the prompt is empty: give at least one token")
    sampler = sampler or Sampler(temperature=0.0)
    if cache is None:
        cache = model.new_cache(min(model.context_length, len(prompt_ids) + max_tokens + 1))
    if cache.pos + len(prompt_ids) > cache.n_ctx:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) does not fit the context "
                         f"({cache.n_ctx - cache.pos} positions left)")
    stop = set(int(t) for t in stop_ids)
    # a model's vocabulary may be padded past its tokenizer's (ids no text maps to): never sample those
    n_vocab = model.tokenizer.vocab_size if model.tokenizer is not None else model.vocab_size
    logits = model.forward(prompt_ids, cache, all_logits=on_logits is not None)
    if on_logits is not None:
        on_logits(logits)
        logits = logits[-1]
    context = list(context_ids) + [int(t) for t in prompt_ids]
    # a plain callable gets the logits only; a Sampler, or a sampler that asks (wants_context), the context too
    penalised = isinstance(sampler, Sampler) or getattr(sampler, "wants_context", False)
    for i in range(max_tokens):
        token = int(sampler(logits[:n_vocab], context) if penalised else sampler(logits[:n_vocab]))
        context.append(token)
        if token in stop:
            yield Step(token, finish_reason="stop")
            return
        last = i == max_tokens - 1 or cache.pos >= cache.n_ctx
        if last:
            yield Step(token, finish_reason="length")
            return
        yield Step(token)
        logits = model.forward([token], cache)
        if on_logits is not None:
            on_logits(logits[None, :])


def stream_text(model, prompt_ids, **kwargs) -> Iterator[Step]:
    """generate_tokens with the text of each step filled in: complete UTF-8 only, in order; a trailing partial
    character is flushed with the last step."""
    text = TextStream(model.tokenizer)
    for step in generate_tokens(model, prompt_ids, **kwargs):
        text.fill(step)
        yield step
