"""Token sampling from next-token logits: greedy, temperature, top-k and top-p (nucleus)."""

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

    Args:
        temperature: ``>= 0``; 0 means greedy (argmax, ties go to the lowest index).
        top_k: Keep only the ``top_k`` highest logits; 0 disables the filter.
        top_p: Keep the smallest set of most probable tokens whose total probability is ``>= top_p``;
            must be in ``(0, 1]``, 1 disables the filter.
        seed: Seed for ``np.random.default_rng``; the same seed and logits give the same tokens.
            None seeds from the operating system.

    Raises:
        ValueError: If a parameter is out of range or of the wrong type (bools are rejected).
    """

    def __init__(self, temperature=0.8, top_k=0, top_p=1.0, seed=None):
        if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        if not _is_int(top_k) or top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0 = off), got {top_k!r}")
        if not _is_real(top_p) or not 0 < top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1] (1 = off), got {top_p!r}")
        if seed is not None and (not _is_int(seed) or seed < 0):
            raise ValueError(f"seed must be None or an int >= 0, got {seed!r}")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.seed = None if seed is None else int(seed)
        self._rng = np.random.default_rng(self.seed)

    def __repr__(self) -> str:
        return (f"Sampler(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p}, "
                f"seed={self.seed})")

    def __call__(self, logits: np.ndarray) -> int:
        """Sample one token id.

        Args:
            logits: 1-D float array of unnormalized log-probabilities (``-inf`` masks a token).

        Returns:
            The chosen token id.

        Raises:
            ValueError: If ``logits`` is not a non-empty 1-D array, contains NaN or ``+inf``, or is all
                ``-inf``.
        """
        logits = _check_logits(logits)
        if self.temperature == 0:
            return int(np.argmax(logits))
        ids, probs = self._candidates(logits)
        cumulative = np.cumsum(probs)
        u = self._rng.random() * cumulative[-1]
        pick = min(int(np.searchsorted(cumulative, u, side="right")), len(ids) - 1)
        return int(ids[pick])

    def probs(self, logits: np.ndarray) -> np.ndarray:
        """Return the full-vocab distribution that :meth:`__call__` draws from (float64, sums to 1).

        With ``temperature == 0`` it is one-hot on the greedy token.
        """
        logits = _check_logits(logits)
        out = np.zeros(logits.shape[0], dtype=np.float64)
        if self.temperature == 0:
            out[int(np.argmax(logits))] = 1.0
        else:
            ids, probs = self._candidates(logits)
            out[ids] = probs
        return out

    def _candidates(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return candidate ids and their renormalized probabilities after top-k and top-p."""
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
