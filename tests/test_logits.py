"""The Shaped sampler without a model: logit_bias (-100 bans, +100 selects exclusively, others add), the recorded
log-probabilities (those of the biased logits, before the Sampler's temperature), and a grammar's mask, which has
the last word over the bias."""
import numpy as np
import pytest

from petit.generation.logits import FLOOR, Shaped
from petit.generation.sample import Sampler

LOGITS = np.array([2.0, 1.0, 0.5, -1.0, 3.0], dtype=np.float32)


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    return x - x.max() - np.log(np.exp(x - x.max()).sum())


class Only:
    """A stand-in grammar matcher that allows a fixed set of tokens and records what it is told."""

    def __init__(self, allowed):
        self.mask = np.zeros(LOGITS.size, dtype=bool)
        self.mask[list(allowed)] = True
        self.consumed = []

    def allowed(self):
        return self.mask

    def consume(self, token):
        self.consumed.append(token)


def test_the_bias_bans_forces_and_adds():
    greedy = Sampler(temperature=0)
    assert Shaped(greedy, bias={4: -100})(LOGITS) == 0
    assert Shaped(greedy, bias={3: 100})(LOGITS) == 3
    assert Shaped(greedy, bias={2: 2.6})(LOGITS) == 2                 # 0.5 + 2.6 > 3.0
    hot = Shaped(Sampler(temperature=5.0, seed=1), bias={1: 100, 3: 100})
    assert {hot(LOGITS) for _ in range(50)} == {1, 3}                 # only the tokens at +100, both of them
    assert LOGITS[4] == 3.0                                           # the caller's logits are left alone


def test_the_recorded_logprobs_are_those_of_the_biased_logits():
    s = Shaped(Sampler(temperature=1.7, top_k=2, seed=3), bias={0: -100, 2: 1.5}, logprobs=True, top_logprobs=3)
    token = s(LOGITS)
    expected = log_softmax([-np.inf, 1.0, 2.0, -1.0, 3.0])
    (record,) = s.records
    assert record.token == token and record.logprob == pytest.approx(expected[token], abs=1e-12)
    assert [t for t, _ in record.top] == [4, 2, 1]
    assert [lp for _, lp in record.top] == pytest.approx([expected[4], expected[2], expected[1]], abs=1e-12)
    few = Shaped(Sampler(temperature=0), bias={0: -100, 1: -100, 2: -100, 3: -100}, logprobs=True, top_logprobs=3)
    few(LOGITS)
    assert few.records[0].top == [(4, 0.0)]                           # banned tokens are no alternatives


def test_the_grammar_masks_and_has_the_last_word():
    g = Only({1, 3})
    s = Shaped(Sampler(temperature=0), matcher=g, logprobs=True)
    assert s(LOGITS) == 1 and g.consumed == [1]
    g = Only({1, 3})
    s = Shaped(Sampler(temperature=0), bias={1: -100, 3: -100}, matcher=g, logprobs=True)
    assert s(LOGITS) == 1                                             # the bias banned all the grammar allows
    assert s.records[0].logprob == FLOOR                              # reported, as JSON can carry it
