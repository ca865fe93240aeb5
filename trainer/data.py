"""Token streams for training: encoding, the chat loss mask, the train/validation split and batches.

A corpus becomes one long stream of token ids plus a parallel 0/1 ``mask``; ``mask[i] = 1`` means
"train on predicting token i". Batches are random windows of ``context + 1`` tokens; the window of step
``s`` is drawn from ``numpy.random.default_rng([seed, s])``, so a run needs no RNG state to resume.
"""

from __future__ import annotations

import re

import numpy as np

# An assistant answer in ChatML: the answer text and its closing <|im_end|> are what the model learns.
_ASSISTANT_RE = re.compile(r"(<\|im_start\|>assistant\n)(.*?<\|im_end\|>)", re.DOTALL)


def encode_text(text: str, tokenizer) -> np.ndarray:
    """Encode with a ``petit.tokenizer.Tokenizer`` (special-token texts become their ids) -> int32 ids."""
    return np.asarray(tokenizer.encode(text, allow_special=True), dtype=np.int32)


def encode_chat(text: str, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """Encode a ChatML corpus and mark the assistant answers (text + ``<|im_end|>``) for the loss.

    The corpus is cut at the answer boundaries and each piece is encoded on its own; the boundaries fall
    right after ``assistant\\n`` (a whitespace chunk of its own) and right after a special token, so the
    ids are the same as encoding the whole text at once.

    Returns:
        (ids int32, mask uint8), same length; mask is 1 on answer tokens.
    """
    ids, mask = [], []
    pos = 0
    for m in _ASSISTANT_RE.finditer(text):
        head = tokenizer.encode(text[pos:m.start(2)], allow_special=True)
        answer = tokenizer.encode(m.group(2), allow_special=True)
        ids += head + answer
        mask += [0] * len(head) + [1] * len(answer)
        pos = m.end()
    tail = tokenizer.encode(text[pos:], allow_special=True)
    ids += tail
    mask += [0] * len(tail)
    return np.asarray(ids, dtype=np.int32), np.asarray(mask, dtype=np.uint8)


def check_ids(ids, vocab_size: int) -> np.ndarray:
    """Return ids as a 1-D int32 array; raise ValueError if an id is outside [0, vocab_size)."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"token ids must be a 1-D sequence of integers, got shape {arr.shape} dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
        raise ValueError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
    return arr.astype(np.int32, copy=False)


def split_train_val(ids: np.ndarray, mask: np.ndarray | None, val_fraction: float, context: int):
    """Split the stream: the last ``val_fraction`` of the tokens is the validation set.

    Returns:
        ((train_ids, train_mask), (val_ids, val_mask)); the val pair is (None, None) if val_fraction is 0.

    Raises:
        ValueError: If either part is shorter than context + 1 tokens (one window).
    """
    n = len(ids)
    n_val = int(round(n * val_fraction))
    need = context + 1
    if n - n_val < need or (val_fraction > 0 and n_val < need):
        raise ValueError(
            f"the corpus has {n} tokens; with context {context} and val_fraction {val_fraction} it needs at "
            f"least {need} training tokens" + (f" and {need} validation tokens" if val_fraction > 0 else "")
            + f" (got {n - n_val} and {n_val}). Use a bigger corpus or a smaller --context")
    cut = n - n_val
    train = (ids[:cut], None if mask is None else mask[:cut])
    val = (ids[cut:], None if mask is None else mask[cut:]) if n_val else (None, None)
    return train, val


def get_batch(ids: np.ndarray, mask: np.ndarray | None, batch_size: int, context: int,
              rng: np.random.Generator):
    """Random windows: x, y (B, T) int with y = x shifted by one; m (B, T) float32 mask of y, or None."""
    starts = rng.integers(0, len(ids) - context, size=batch_size)  # last start leaves room for y
    idx = starts[:, None] + np.arange(context + 1)[None, :]  # (B, T+1)
    chunk = ids[idx]
    m = None if mask is None else mask[idx[:, 1:]].astype(np.float32)
    return chunk[:, :-1], chunk[:, 1:], m


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The batch RNG of a step: a pure function of (seed, step), so resuming needs no saved RNG state."""
    return np.random.default_rng([seed, step])


def eval_batches(ids: np.ndarray, mask: np.ndarray | None, batch_size: int, context: int, max_tokens: int):
    """Yield (x, y, m) over consecutive non-overlapping windows of the validation stream, up to about
    max_tokens tokens in total; the same windows every call."""
    n_windows = max(1, min((len(ids) - 1) // context, max_tokens // context))
    starts = np.arange(n_windows) * context
    for i in range(0, n_windows, batch_size):
        idx = starts[i:i + batch_size, None] + np.arange(context + 1)[None, :]
        chunk = ids[idx]
        m = None if mask is None else mask[idx[:, 1:]].astype(np.float32)
        yield chunk[:, :-1], chunk[:, 1:], m
