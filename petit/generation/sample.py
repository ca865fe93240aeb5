"""Token sampling from next-token logits: penalties, greedy, temperature, top-k, top-p (nucleus) and min-p.

A token costs a few passes over the vocabulary (one argmax, which also checks the logits, and a comparison or two
per candidate round) and work on the candidates only, whatever the vocabulary size: the penalties touch the
distinct context ids, and the filters run on the tokens whose logit reaches a threshold instead of on the whole
vocabulary sorted (see Sampler._candidates). The arithmetic is float64 on the candidates, as a full computation
would be, so the kept set is the one a full stable sort gives and the probabilities agree to rounding.
"""

from __future__ import annotations

import math
import numbers
import threading

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
        logits = self._penalize(logits, context_ids)
        if self.temperature == 0:
            return logits.argmax()
        ids, weights = self._candidates(logits)
        pick = _draw(weights, self._rng.random())
        return pick if ids is None else int(ids[pick])

    def probs(self, logits: np.ndarray, context_ids=None) -> np.ndarray:
        """Return the full-vocab distribution that :meth:`__call__` draws from (float64, sums to 1).

        With ``temperature == 0`` it is one-hot on the greedy token (after the penalties).
        """
        logits = self._penalize(logits, context_ids)
        out = np.zeros(logits.size, dtype=np.float64)
        if self.temperature == 0:
            out[logits.argmax()] = 1.0
        else:
            ids, weights = self._candidates(logits)
            out[slice(None) if ids is None else ids] = weights / weights.sum()
        return out

    def _penalize(self, logits, context_ids) -> _Penalized:
        """Check the arguments and return the logits after the penalties.

        Only the distinct ids of the context are touched (unique ids with counts): their penalized values are
        kept apart in float64, beside the caller's array, so the cost is ``O(len(context) log len(context))``
        plus one pass over the vector (its argmax, which also checks it), whatever the vocabulary size.
        """
        base, best = _check_logits(logits)
        ids = _check_context(context_ids, base.shape[0])
        if ids.size == 0 or (self.repetition_penalty == 1.0 and self.frequency_penalty == 0.0
                             and self.presence_penalty == 0.0):
            return _Penalized(base, best)
        ids, counts = _unique(ids)
        values = base[ids].astype(np.float64)
        if self.repetition_penalty != 1.0:
            values = np.where(values > 0, values / self.repetition_penalty, values * self.repetition_penalty)
        values -= self.frequency_penalty * counts + self.presence_penalty
        return _Penalized(base, best, ids, values)

    def _candidates(self, logits: _Penalized) -> tuple[np.ndarray | None, np.ndarray]:
        """Return the ids (ascending) that top-k, top-p and min-p keep and their unnormalized probabilities,
        ``exp(logit / temperature - max)``: the most probable token has weight 1. ``ids`` is None when no filter
        is on: then every token is a candidate and the weights cover the whole vocabulary.

        The filters never sort the whole vocabulary. A round takes the tokens whose logit reaches a threshold
        (one comparison over the vocabulary) and works on them alone; for the mass of the others, a few counts of
        the tokens above lower thresholds bound it from above and below. Top-k needs at least k tokens in the
        round, min-p alone a threshold below the weight ``min_p``, and top-p a cut that is the same anywhere in
        those bounds: otherwise the next round, deeper, runs. The last one takes every token.
        """
        n, temperature = logits.size, self.temperature
        top_k = self.top_k if 0 < self.top_k < n else 0
        if not top_k and self.top_p == 1.0 and self.min_p == 0.0:
            weights = logits.dense(_buffer("weights", n, np.float64))
            return None, _weights(weights, temperature, logits.top / temperature)
        # x_max (the largest logit / temperature) can wait for the candidates when it is a context id's: top-k's
        # hold it, and so do top-p's if they are any; the rounds start from an upper bound of it meanwhile
        x_max = logits.top / temperature if logits.top_known or not (top_k or self.top_p < 1.0) else None
        x_start = logits.bound / temperature if x_max is None else x_max

        def weight(threshold: float) -> float:
            """The weight of a logit at the threshold: no token below it weighs more, since /, - and exp are
            monotonic (the margins cover an exp that rounds a scalar differently from an array)."""
            return math.exp(threshold / temperature - x_max)

        rounds, counted, last_only = self._rounds(logits, top_k, x_start), {}, False
        while True:
            threshold, lower = next(rounds)           # the last round takes every token, and returns
            if last_only and threshold != -math.inf:
                continue
            ids, values = logits.above(threshold)      # ids None: every token
            if x_max is None and not top_k:
                # top-p: every token at or above the threshold is here, so the largest one too, if any
                logits.top = float(values.max()) if values.size else logits.top    # (else one more pass)
                x_max = logits.top / temperature
                if x_start - x_max > 1.0:      # these rounds were set for a top logit too far above: again
                    rounds, counted, x_start = self._rounds(logits, top_k, x_max), {}, x_max
                    continue
            if ids is not None and top_k and ids.size < top_k:
                continue
            if ids is not None and not top_k and self.top_p < 1.0 and 2 * ids.size > n:
                last_only = True          # a flat distribution: the last round costs little more, and is exact
                continue
            bound = low = high = 0.0   # no token left out weighs more than bound; their mass is in [low, high]
            if top_k:                  # the k tokens are all that is left, the largest among them
                ids, x = _top_k(ids, values / temperature, top_k)
                x_max = float(x.max()) if x_max is None else x_max
                weights = np.exp(x - x_max)
            elif ids is None:          # the whole vocabulary: in place
                weights = _weights(values, temperature, x_max)
            else:
                weights = np.exp(values / temperature - x_max)
                for t in lower:
                    if t not in counted:
                        counted[t] = logits.count_above(t)
                counts = [ids.size] + [counted[t] for t in lower] + [n]
                tops = [weight(t) * (1 + 1e-12) for t in [threshold, *lower]]
                bound = tops[0]
                high = sum((counts[i + 1] - counts[i]) * tops[i] for i in range(len(tops)))
                low = sum((counts[i + 1] - counts[i]) * tops[i + 1] for i in range(len(tops) - 1)) * (1 - 2e-12)
                if self.top_p == 1.0 and bound >= self.min_p:
                    continue              # min-p alone: a token left out may reach min_p
            if self.top_p < 1.0:
                kept = _nucleus(ids, weights, self.top_p, bound, low, high)
                if kept is None:
                    last_only = 8 * ids.size > n      # a broad distribution: the next round costs almost as much
                    continue
                ids, weights = kept
            if self.min_p > 0.0:
                keep = weights >= self.min_p * weights.max()
                ids, weights = _where(ids, keep), weights[keep]
            if ids is None or not weights.all():  # masked or underflowed tokens are never candidates
                keep = weights > 0
                ids, weights = _where(ids, keep), weights[keep]
            if logits.ids.size and ids.size > 1 and not (ids[1:] > ids[:-1]).all():
                order = ids.argsort()             # context ids came last
                ids, weights = ids[order], weights[order]
            return ids, weights

    def _rounds(self, logits: _Penalized, top_k: int, x_max: float):
        """Yield the candidate rounds of :meth:`_candidates`, as (threshold, lower thresholds to count) in logits,
        the highest first, for a largest logit of ``x_max * temperature``; the last one, -inf, takes every
        token."""
        n, temperature = logits.size, self.temperature
        if top_k:
            # from an evenly strided sample of the vocabulary, values that about 4k + 4 * stride (then 64k)
            # tokens reach
            stride = max(1, n // _SAMPLE)
            sample = logits.base[::stride]
            for scale in (4, 64):
                rank = min(sample.size, scale * math.ceil(top_k / stride) + 4)
                threshold = float(np.partition(sample, sample.size - rank)[sample.size - rank])
                if math.isfinite(threshold):
                    yield threshold, []
        elif self.top_p < 1.0:
            base = x_max - math.log(n)
            for depth, counted in _TOP_P_ROUNDS:
                threshold, lower = (base - depth) * temperature, [(base - c) * temperature for c in counted]
                if math.isfinite(threshold) and all(map(math.isfinite, lower)):
                    yield threshold, lower
        else:
            threshold = (x_max - _MIN_P_MARGIN + math.log(self.min_p)) * temperature      # past the weight min_p
            if math.isfinite(threshold):
                yield threshold, []
        yield -math.inf, []


# Top-p rounds, as (d, counted): a round takes the tokens within log(vocab) + d of the top logit (in units of
# temperature) and counts those within log(vocab) + each counted depth. The tokens below the last weigh at most
# exp(-depth) of the top token together (2.5e-3 in the first round, then 1.2e-4, 1.7e-5, 8e-7, 2e-9), and the
# counts bound the mass of those in between within a factor e^3 or less. The cut is known unless top_p lands within
# the bounds' gap of a boundary, which takes a deeper round: one time in eight with logits like a language model's
# (temperatures 0.7 to 1, with and without a repetition penalty), for one count pass, where two did no better.
_TOP_P_ROUNDS = ((3.0, (6.0,)), (5.0, (7.0, 9.0)), (7.0, (9.0, 11.0)), (9.0, (11.0, 14.0)), (11.0, (14.0, 20.0)))
_MIN_P_MARGIN = 1e-3        # min-p alone: a first round slightly past log(min_p), so rounding cannot cut it short
_SAMPLE = 2048              # top-k guesses its first threshold from about this many logits
_CHUNK = 64                 # top-p sorts this many of the most probable candidates first, then more as needed
_BLOCK = 1024               # the draw over a whole vocabulary sums blocks of this many weights first
_F32_MAX = float(np.finfo(np.float32).max)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))   # the dtypes worked on as they are; others become float64


class _Penalized:
    """The logits after the penalties, without a copy of the vocabulary.

    ``base`` is the caller's array (never modified) and ``best`` the first id of its largest logit; ``ids``
    (ascending, distinct) and ``values`` (float64) are the penalized logits of the context ids, which replace
    ``base``'s there; ``bound`` is at least the largest penalized logit, ``top``.
    """

    __slots__ = ("base", "best", "ids", "values", "bound", "_top")

    def __init__(self, base: np.ndarray, best: int, ids=None, values=None):
        self.base, self.best = base, best
        self.ids = np.zeros(0, dtype=np.int64) if ids is None else ids
        self.values = np.zeros(0, dtype=np.float64) if values is None else values
        self._top = self.bound = float(base[best])
        if self.ids.size:
            self.bound = max(self.bound, float(self.values.max()))
            at = int(self.ids.searchsorted(best))
            # the largest logit is a context id's: the largest penalized one is known after one more pass
            self._top = None if at < self.ids.size and self.ids[at] == best else self.bound

    @property
    def top_known(self) -> bool:
        return self._top is not None

    @property
    def top(self) -> float:
        """The largest penalized logit; the first time, one more pass if a context id held the largest logit."""
        if self._top is None:
            value = float(self.values.max())
            self._top = max(self._best_outside(value)[1], value)
        return self._top

    @top.setter
    def top(self, value: float) -> None:
        """Set by who found it: the largest of a set holding every token at or above some logit."""
        self._top = value

    @property
    def size(self) -> int:
        return self.base.shape[0]

    def dense(self, out: np.ndarray | None = None) -> np.ndarray:
        """Every penalized logit as a float64 array: ``out``, or a new one."""
        out = np.empty(self.size, dtype=np.float64) if out is None else out
        np.copyto(out, self.base)
        out[self.ids] = self.values
        return out

    def argmax(self) -> int:
        """The id of the largest penalized logit; ties go to the lowest id."""
        if not self.ids.size:
            return self.best
        i = int(np.argmax(self.values))               # ids ascending: the lowest id of the largest value
        other, value = int(self.ids[i]), float(self.values[i])
        best, best_value = self._best_outside(value)
        return other if best < 0 or value > best_value or (value == best_value and other < best) else best

    def _best_outside(self, floor: float) -> tuple[int, float]:
        """The lowest id holding the largest logit of ``base`` outside the context, and that logit, if it is
        ``>= floor``; else (-1, -inf)."""
        best = self.best
        at = int(self.ids.searchsorted(best))
        if at == self.ids.size or self.ids[at] != best:    # the largest logit is not a context id's: done
            value = float(self.base[best])
            return (best, value) if value >= floor else (-1, -math.inf)
        above = self._mask(floor).nonzero()[0]             # else those above floor (few), context ids aside
        if not above.size:
            return -1, -math.inf
        best = int(above[np.argmax(self.base[above])])
        return best, float(self.base[best])

    def _mask(self, threshold: float) -> np.ndarray:
        """Which tokens outside the context have a logit ``>= threshold`` in ``base`` (exactly, in float64
        terms), in this thread's scratch mask."""
        base, out = self.base, _buffer("mask", self.size, np.bool_)
        if base.dtype != np.float32:
            np.greater_equal(base, threshold, out=out)
        elif threshold > _F32_MAX:
            out[:] = False
        elif threshold < -_F32_MAX:
            np.greater(base, -np.inf, out=out)
        else:
            t32 = np.float32(threshold)   # the smallest float32 >= threshold: the comparison is then exact
            if float(t32) < threshold:
                t32 = np.nextafter(t32, np.float32(np.inf))
            np.greater_equal(base, t32, out=out)
        out[self.ids] = False
        return out

    def count_above(self, threshold: float) -> int:
        """How many tokens have a penalized logit ``>= threshold`` (finite)."""
        return int(np.count_nonzero(self._mask(threshold))) + int(np.count_nonzero(self.values >= threshold))

    def above(self, threshold: float) -> tuple[np.ndarray | None, np.ndarray]:
        """The ids and float64 logits of the tokens whose penalized logit is ``>= threshold``, the context ids
        last (each part in order); ``-inf``: (None, every token's logit)."""
        if threshold == -math.inf:
            return None, self.dense(_buffer("weights", self.size, np.float64))
        ids = self._mask(threshold).nonzero()[0]
        values = self.base[ids].astype(np.float64)
        sel = self.values >= threshold
        if sel.any():                     # the context ids after the others: ids are not in order then
            ids, values = np.concatenate([ids, self.ids[sel]]), np.concatenate([values, self.values[sel]])
        return ids, values


def _weights(values: np.ndarray, temperature: float, x_max: float) -> np.ndarray:
    """``exp(values / temperature - x_max)``, in place."""
    values /= temperature
    values -= x_max
    return np.exp(values, out=values)


_scratch = threading.local()


def _buffer(name: str, size: int, dtype) -> np.ndarray:
    """This thread's scratch array ``name`` of ``size`` elements, reused from call to call.

    A new vocabulary-sized array costs a page fault per 4 KiB on first touch, which (in a virtual machine above
    all) can take longer than the work on it: ~1 ms for the 1.2 MB of a float64 vector of 151,936 tokens. So
    the vocabulary-sized arrays of a call live here; threading.local keeps two threads' calls apart.
    """
    key = (name, dtype)
    buffer = _scratch.__dict__.get(key)
    if buffer is None or buffer.shape[0] < size:
        buffer = _scratch.__dict__[key] = np.empty(size, dtype=dtype)
    return buffer[:size]


def _where(ids: np.ndarray | None, keep: np.ndarray) -> np.ndarray:
    """The ids the mask keeps; ids None stands for every token, in order."""
    return keep.nonzero()[0] if ids is None else ids[keep]


def _top_k(ids, x, k):
    """The ids and values of the k largest ``x`` (ties at the k-th value go to the lowest ids), order kept."""
    if x.size <= k:
        return ids, x
    kth = np.partition(x, x.size - k)[x.size - k]
    keep = x > kth
    keep[_lowest(ids, (x == kth).nonzero()[0], k - int(np.count_nonzero(keep)))] = True
    return _where(ids, keep), x[keep]


def _lowest(ids: np.ndarray | None, at: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` positions among ``at`` (ascending) with the lowest ids: ties go to the lowest ids."""
    if ids is None or count >= at.size:
        return at[:count]
    return at[np.argsort(ids[at], kind="stable")[:count]]


def _nucleus(ids, weights, top_p, bound, low, high):
    """The smallest set of most probable tokens holding at least ``top_p`` of the mass, order kept; None if it
    depends on the mass of the tokens left out, known only to lie in ``[low, high]`` with none above ``bound``.

    Equivalent to a stable sort by decreasing weight (ties broken by lower id) followed by a cut, but only the
    most probable tokens are sorted: the top 64 (found by a partition), then the next ones while those hold too
    little mass. Everything above the cut's weight is kept, plus the lowest-id tokens tied with it.
    """
    total = float(weights.sum())
    target = top_p * (total + high)
    m = weights.size
    if m <= 64 * _CHUNK:                    # a few thousand: sort them all
        values = np.sort(weights)[::-1]
        cumulative = values.cumsum()
    else:
        part = _buffer("part", m, np.float64)
        np.copyto(part, weights)
        values, cumulative, done, size = np.zeros(0), np.zeros(0), 0, _CHUNK
        while True:
            # part[m - size:] becomes the `size` largest weights: partition what is below the `done` largest
            part[:m - done].partition(m - size)
            more = np.sort(part[m - size:m - done])[::-1]       # all smaller than those before
            values = np.concatenate([values, more])
            cumulative = np.concatenate([cumulative, (cumulative[-1] if done else 0.0) + more.cumsum()])
            if cumulative[-1] >= target or size == m:
                break
            if top_p * (high - low) >= values[-1]:
                return None   # the cut is further down, where boundaries are closer together than the bounds' gap
            # 8x more, or more still if the mass missing needs it: the others weigh at most values[-1] each
            done, size = size, int(min(m, max(8 * size, size + (target - cumulative[-1]) / values[-1])))
    cut = int(cumulative.searchsorted(target, side="left"))
    if high == 0.0:
        cut = min(cut, values.size - 1)
    elif (cut == values.size or cut != int(cumulative.searchsorted(top_p * (total + low), side="left"))
          or values[cut] <= bound):
        return None
    threshold = values[cut]
    keep = np.greater(weights, threshold, out=_buffer("keep", m, np.bool_))
    keep[_lowest(ids, (weights == threshold).nonzero()[0], cut + 1 - int(np.count_nonzero(keep)))] = True
    return _where(ids, keep), weights[keep]


def _draw(weights: np.ndarray, r: float) -> int:
    """The index at which ``r * total`` falls in the running sum of ``weights`` (in order), for ``r`` in [0, 1).

    A whole vocabulary is first summed by blocks, so only one block's running sum is needed.
    """
    n = weights.shape[0]
    start, offset, block = 0, 0.0, weights
    if n > 4 * _BLOCK:
        whole = n - n % _BLOCK
        sums = weights[:whole].reshape(-1, _BLOCK).sum(axis=1)
        if whole < n:
            sums = np.append(sums, weights[whole:].sum())
        ends = sums.cumsum()
        u = r * ends[-1]
        j = int(ends.searchsorted(u, side="right"))
        if j == ends.size:       # u at the very end (rounding): the last block that can be drawn from
            j = int(sums.nonzero()[0][-1])
        start, offset = j * _BLOCK, float(ends[j - 1]) if j else 0.0
        block = weights[start:start + _BLOCK]
        cumulative = offset + block.cumsum()
    else:
        cumulative = block.cumsum()
        u = r * cumulative[-1]
    pick = int(cumulative.searchsorted(u, side="right"))
    if pick >= block.size:       # u at the very end (rounding): the last token that can be drawn
        pick = int(block.nonzero()[0][-1])
    return start + pick


def _unique(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ids (ascending, int64) and how often each occurs: np.unique's answer, at half its cost."""
    ids = ids.astype(np.int64)            # a copy, sorted in place
    ids.sort()
    first = np.empty(ids.size, dtype=bool)
    first[0] = True
    np.not_equal(ids[1:], ids[:-1], out=first[1:])
    starts = first.nonzero()[0]
    counts = np.empty(starts.size, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = ids.size - starts[-1]
    return ids[starts], counts


def _check_logits(logits) -> tuple[np.ndarray, int]:
    """Return ``logits`` as a float32 or float64 array and the (first) id of its largest value, after checking
    it."""
    arr = np.asarray(logits)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"logits must be a non-empty 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":       # float, signed or unsigned int
        raise ValueError(f"logits must be a float array, got dtype {arr.dtype}")
    if arr.dtype not in _FLOATS:
        arr = arr.astype(np.float64)
    best = int(arr.argmax())        # one pass: the first NaN if there is one, else the first largest value
    top = float(arr[best])
    if math.isnan(top) or top == math.inf:
        raise ValueError("logits must not contain NaN or +inf")
    if top == -math.inf:
        raise ValueError("logits are all -inf: no token can be sampled")
    return arr, best


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
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
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
