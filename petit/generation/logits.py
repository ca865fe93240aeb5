"""What a request may do to the logits before its Sampler draws: a logit bias, a grammar's mask, and a record of
each token's log-probability.

`Shaped(sampler, ...)` is a sampler itself (logits, context ids -> token id), so the token loop runs it as it runs a
Sampler. In order:

1. logit_bias: `bias[id]` is added to the token's logit; -100 bans the token (its logit becomes -inf) and +100
   selects it exclusively (every token without +100 is banned), as OpenAI documents the ends of the range.
2. logprobs: the log-softmax of those logits (the model's distribution after the bias, before the penalties,
   temperature, top-k / top-p / min-p and the grammar) gives the sampled token's log-probability and the top ones.
3. grammar: the tokens that would leave it get -inf. If the bias left no token the grammar allows, the grammar
   wins (the bias is dropped for that token), so a constrained reply always continues.
4. the Sampler draws from what is left (its penalties and filters apply as usual), and the grammar is told the token.
"""
from dataclasses import dataclass

import numpy as np

BAN, FORCE = -100, 100
FLOOR = -9999.0       # the log-probability reported for a token the bias had banned (JSON has no -inf)


@dataclass
class TokenLogprob:
    token: int
    logprob: float
    top: list                      # [(token id, logprob)], the most probable first


class Shaped:
    """A sampler that applies `bias` ({token id: -100..100}), records `top_logprobs` alternatives per token when
    `logprobs` is on, and keeps to `matcher` (a petit.generation.grammar.Matcher), then calls `sampler`."""

    wants_context = True                 # the token loop passes the context ids, for the Sampler's penalties

    def __init__(self, sampler, *, bias: dict | None = None, logprobs: bool = False, top_logprobs: int = 0,
                 matcher=None):
        self.sampler, self.matcher = sampler, matcher
        self.logprobs, self.top_logprobs = logprobs, top_logprobs
        self.records: list[TokenLogprob] = []
        bias = {int(k): float(v) for k, v in (bias or {}).items()}
        self._force = np.array(sorted(k for k, v in bias.items() if v >= FORCE), dtype=np.int64)
        self._ban = np.array(sorted(k for k, v in bias.items() if v <= BAN), dtype=np.int64)
        rest = sorted((k, v) for k, v in bias.items() if BAN < v < FORCE)
        self._add_ids = np.array([k for k, _ in rest], dtype=np.int64)
        self._add = np.array([v for _, v in rest], dtype=np.float64)

    def _biased(self, logits: np.ndarray) -> np.ndarray:
        x = np.array(logits, dtype=np.float64)         # a copy: the caller's logits stay as they are
        n = x.size
        if self._add_ids.size:
            keep = self._add_ids < n
            x[self._add_ids[keep]] += self._add[keep]
        if self._ban.size:
            x[self._ban[self._ban < n]] = -np.inf
        force = self._force[self._force < n]
        if force.size:
            only = np.full(n, -np.inf)
            only[force] = x[force]
            x = only
        return x

    def __call__(self, logits, context_ids=None) -> int:
        raw = np.asarray(logits)
        x = self._biased(raw) if (self._add_ids.size or self._ban.size or self._force.size) \
            else np.array(raw, dtype=np.float64)
        if self.logprobs:
            logprobs = _log_softmax(x)
        if self.matcher is not None:
            allowed = self.matcher.allowed()
            masked = np.where(allowed, x, -np.inf)
            if not np.isfinite(masked).any():          # the bias banned all the grammar allows: the grammar wins
                masked = np.where(allowed, raw.astype(np.float64), -np.inf)
            x = masked
        token = int(self.sampler(x, context_ids))
        if self.logprobs:
            self.records.append(TokenLogprob(token, max(float(logprobs[token]), FLOOR),
                                             _top(logprobs, self.top_logprobs)))
        if self.matcher is not None:
            self.matcher.consume(token)
        return token


def _log_softmax(x: np.ndarray) -> np.ndarray:
    top = x.max()
    if not np.isfinite(top):
        return np.full(x.size, -np.inf)
    shifted = x - top
    return shifted - np.log(np.exp(shifted).sum())


def _top(logprobs: np.ndarray, k: int) -> list:
    """The k most probable tokens with a finite log-probability (ties: the lower id first)."""
    if k <= 0:
        return []
    k = min(k, logprobs.size)
    ids = np.argpartition(-logprobs, k - 1)[:k]
    ids = ids[np.lexsort((ids, -logprobs[ids]))]
    return [(int(i), float(logprobs[i])) for i in ids if np.isfinite(logprobs[i])]
