"""Token sampling from next-token logits: penalties, greedy, temperature, top-k, top-p (nucleus) and min-p."""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["Sampler"]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Sampler:
    """Pick the next token from a logits vector.

    Processor chain, in this order:
    penalties (repetition, then frequency/presence) -> temperature -> top-k -> top-p -> min-p -> sample.
    Greedy decoding (``temperature == 0``) still applies the penalties, then takes the argmax: it overrides
    the filters, not the penalties (as in Hugging Face, where ``repetition_penalty`` also applies to greedy
    search). The penalties look at the ``context_ids`` passed to :meth:`__call__` / :meth:`probs`.

    Args:
        temperature: ``>= 0``; 0 means greedy (argmax, ties go to the lowest index).
        top_k: Keep only the ``top_k`` highest logits; 0 disables the filter.
        top_p: Keep the smallest set of most probable tokens whose total probability is ``>= top_p``;
            must be in ``(0, 1]``, 1 disables the filter.
        seed: Seed for ``np.random.default_rng``; the same seed and logits give the same tokens.
            None seeds from the operating system.
        min_p: In ``[0, 1]``; keep the tokens whose probability (after temperature) is
            ``>= min_p * max probability``; 0 disables the filter.
        repetition_penalty: Finite, ``> 0`` (CTRL / Hugging Face): for every distinct id in the context,
            ``logit / penalty`` if ``logit > 0`` else ``logit * penalty``; 1 disables it.
        frequency_penalty: In ``[-2, 2]`` (OpenAI): ``logit -= frequency_penalty * count`` where ``count``
            is the number of times the id occurs in the context; 0 disables it.
        presence_penalty: In ``[-2, 2]`` (OpenAI): ``logit -= presence_penalty`` for every id that occurs
            in the context; 0 disables it.

    Raises:
        ValueError: If a parameter is out of range or of the wrong type (bools are rejected).
    """

    def __init__(self, temperature=0.8, top_k=0, top_p=1.0, seed=None, *, min_p=0.0, repetition_penalty=1.0,
                 frequency_penalty=0.0, presence_penalty=0.0):
        if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        if not _is_int(top_k) or top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0 = off), got {top_k!r}")
        if not _is_real(top_p) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1] (1 = off), got {top_p!r}")
        if seed is not None and (not _is_int(seed) or seed < 0):
            raise ValueError(f"seed must be None or an int >= 0, got {seed!r}")
        if not _is_real(min_p) or not 0 <= min_p <= 1:
            raise ValueError(f"min_p must be a number in [0, 1] (0 = off), got {min_p!r}")
        if not _is_real(repetition_penalty) or not math.isfinite(repetition_penalty) or repetition_penalty <= 0:
            raise ValueError(
                f"repetition_penalty must be a finite number > 0 (1 = off), got {repetition_penalty!r}")
        for name, value in (("frequency_penalty", frequency_penalty), ("presence_penalty", presence_penalty)):
            if not _is_real(value) or not -2 <= value <= 2:
                raise ValueError(f"{name} must be a number in [-2, 2] (0 = off), got {value!r}")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.seed = None if seed is None else int(seed)
        self.min_p = float(min_p)
        self.repetition_penalty = float(repetition_penalty)
        self.frequency_penalty = float(frequency_penalty)
        self.presence_penalty = float(presence_penalty)
        self._rng = np.random.default_rng(self.seed)

    def _settings(self) -> list[tuple[str, object]]:
        return [("temperature", self.temperature), ("top_k", self.top_k), ("top_p", self.top_p),
                ("min_p", self.min_p), ("repetition_penalty", self.repetition_penalty),
                ("frequency_penalty", self.frequency_penalty), ("presence_penalty", self.presence_penalty),
                ("seed", self.seed)]

    def __repr__(self) -> str:
        return "Sampler(" + ", ".join(f"{k}={v!r}" for k, v in self._settings()) + ")"

    def describe(self) -> str:
        """Every resolved setting on one line, for a banner, e.g.
        ``temperature=0.8 top_k=40 top_p=0.95 min_p=0.05 repetition_penalty=1.1 frequency_penalty=0
        presence_penalty=0 seed=1``.
        """
        return " ".join(f"{k}={_short(v)}" for k, v in self._settings())

    def __call__(self, logits: np.ndarray, context_ids=None) -> int:
        """Sample one token id.

        Args:
            logits: 1-D float array of unnormalized log-probabilities (``-inf`` masks a token). It is never
                modified.
            context_ids: The token ids the penalties look at (prompt + generated so far); None or empty
                means the penalties have no effect.

        Returns:
            The chosen token id.

        Raises:
            ValueError: If ``logits`` is not a non-empty 1-D array, contains NaN or ``+inf``, or is all
                ``-inf``; or if ``context_ids`` is not a 1-D sequence of ints in ``[0, len(logits))``.
        """
        logits = self._penalize(_check_logits(logits), context_ids)
        if self.temperature == 0:
            return int(np.argmax(logits))
        ids, probs = self._candidates(logits)
        cumulative = np.cumsum(probs)
        u = self._rng.random() * cumulative[-1]
        pick = min(int(np.searchsorted(cumulative, u, side="right")), len(ids) - 1)
        return int(ids[pick])

    def probs(self, logits: np.ndarray, context_ids=None) -> np.ndarray:
        """Return the full-vocab distribution that :meth:`__call__` draws from (float64, sums to 1).

        With ``temperature == 0`` it is one-hot on the greedy token (after the penalties).
        """
        logits = self._penalize(_check_logits(logits), context_ids)
        out = np.zeros(logits.shape[0], dtype=np.float64)
        if self.temperature == 0:
            out[int(np.argmax(logits))] = 1.0
        else:
            ids, probs = self._candidates(logits)
            out[ids] = probs
        return out

    def _penalize(self, logits: np.ndarray, context_ids) -> np.ndarray:
        """Return the logits after the penalties: a float64 copy, or ``logits`` itself if nothing applies.

        Only the distinct ids of the context are touched (``np.unique`` with counts), so the cost is
        ``O(len(context) log len(context))`` plus one copy of the vector, whatever the vocabulary size.
        """
        ids = _check_context(context_ids, logits.shape[0])
        if ids.size == 0 or (self.repetition_penalty == 1.0 and self.frequency_penalty == 0.0
                             and self.presence_penalty == 0.0):
            return logits
        ids, counts = np.unique(ids, return_counts=True)
        out = logits.astype(np.float64)  # always a copy: the caller's array is never modified
        x = out[ids]
        if self.repetition_penalty != 1.0:
            x = np.where(x > 0, x / self.repetition_penalty, x * self.repetition_penalty)
        x -= self.frequency_penalty * counts + self.presence_penalty
        out[ids] = x
        return out

    def _candidates(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return candidate ids and their renormalized probabilities after top-k, top-p and min-p."""
        x = logits.astype(np.float64) / self.temperature
        n = x.shape[0]
        if 0 < self.top_k < n:
            ids = np.argpartition(x, n - self.top_k)[n - self.top_k:]
            ids.sort()
            x = x[ids]
        else:
            ids = np.arange(n)
        x = np.exp(x - x.max())
        probs = x / x.sum()
        if self.top_p < 1.0:
            keep = self._nucleus(probs)
            ids, probs = ids[keep], probs[keep]
            probs = probs / probs.sum()
        if self.min_p > 0.0:
            keep = probs >= self.min_p * probs.max()
            ids, probs = ids[keep], probs[keep]
            probs = probs / probs.sum()
        return ids, probs

    def _nucleus(self, probs: np.ndarray) -> np.ndarray:
        """Boolean mask of the smallest set of most probable tokens holding at least ``top_p`` of the mass.

        Equivalent to a stable sort by decreasing probability (ties broken by lower index) followed by a
        cut, but only the values are sorted: everything above the cut's probability is kept, plus the
        lowest-index tokens tied with it.
        """
        values = np.sort(probs)[::-1]
        keep_count = min(int(np.searchsorted(np.cumsum(values), self.top_p, side="left")) + 1, len(probs))
        threshold = values[keep_count - 1]
        keep = probs > threshold
        tied = np.flatnonzero(probs == threshold)[: keep_count - int(np.count_nonzero(keep))]
        keep[tied] = True
        return keep


def _check_logits(logits) -> np.ndarray:
    arr = np.asarray(logits)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"logits must be a non-empty 1-D array, got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"logits must be a float array, got dtype {arr.dtype}")
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError("logits must not contain NaN or +inf")
    if np.isneginf(arr).all():
        raise ValueError("logits are all -inf: no token can be sampled")
    return arr


def _short(value) -> str:
    """``repr`` of a setting, without a float's trailing ``.0`` (``1.0`` -> ``1``, ``0.05`` -> ``0.05``)."""
    text = repr(value)
    return text[:-2] if isinstance(value, float) and text.endswith(".0") else text


def _check_context(context_ids, n_vocab: int) -> np.ndarray:
    """Return ``context_ids`` as a 1-D int array (empty for None), checking every id is in ``[0, n_vocab)``."""
    if context_ids is None:
        return np.zeros(0, dtype=np.int64)
    arr = np.asarray(context_ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"context_ids must be a 1-D sequence of ints, got shape {arr.shape} dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n_vocab:
        bad = lo if lo < 0 else hi
        raise ValueError(f"context_ids must be in [0, {n_vocab}) (the logits' length), got {bad}")
    return arr


# the built-in fallbacks, used when neither a flag nor the model's generation defaults give a setting
FALLBACK = {"temperature": 0.8, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
            "frequency_penalty": 0.0, "presence_penalty": 0.0}


# transformers' GenerationConfig defaults, which apply to a model whose generation_config.json says do_sample
HF_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}


def resolve(explicit: dict, model_defaults: dict | None = None) -> dict:
    """Each sampling setting from the first place that gives it: an explicit value (a flag or a request field,
    None = not given) > the model's generation defaults (generation_config.json, or a .petit file's "generation",
    where do_sample false means greedy) > FALLBACK. Returns every key of FALLBACK plus "seed"."""
    model_defaults = dict(model_defaults or {})
    if model_defaults.get("do_sample") is False:
        model_defaults["temperature"] = 0.0
    elif model_defaults.get("do_sample") is True:     # what transformers samples with when the file leaves it out
        for key, value in HF_SAMPLING_DEFAULTS.items():
            model_defaults.setdefault(key, value)
    out = {}
    for key, fallback in FALLBACK.items():
        value = explicit.get(key)
        if value is None:
            value = model_defaults.get(key)
        out[key] = fallback if value is None else value
    out["seed"] = explicit.get("seed")
    return out
