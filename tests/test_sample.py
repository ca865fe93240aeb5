"""Tests for petit.sample.Sampler: greedy, temperature, top-k, top-p, seeding and validation."""

import numpy as np
import pytest

from petit.sample import Sampler

LOGITS = np.array([1.0, 3.0, 2.0, 0.5, 2.5, -1.0], dtype=np.float32)  # order: 1, 4, 2, 0, 3, 5


def softmax(x):
    e = np.exp(np.asarray(x, dtype=np.float64) - np.max(x))
    return e / e.sum()


def draw(sampler, logits, n):
    return np.array([sampler(logits) for _ in range(n)])


def test_greedy_picks_argmax_and_lowest_index_on_ties():
    greedy = Sampler(temperature=0, seed=0)
    assert greedy(LOGITS) == 1
    assert greedy(np.array([0.0, 5.0, 5.0, -2.0])) == 1
    assert greedy(np.array([-np.inf, -3.0, -np.inf])) == 1
    assert isinstance(greedy(LOGITS), int)
    probs = greedy.probs(LOGITS)
    assert probs[1] == 1.0 and probs.sum() == 1.0


@pytest.mark.parametrize("temperature", [0.1, 0.8, 1.0, 5.0, 100.0])
def test_top_k_1_equals_greedy_at_any_temperature(temperature):
    sampler = Sampler(temperature=temperature, top_k=1, seed=3)
    assert set(draw(sampler, LOGITS, 200)) == {1}


def test_top_k_2_stays_in_top_two():
    sampler = Sampler(temperature=2.0, top_k=2, seed=4)
    picks = draw(sampler, LOGITS, 3000)
    assert set(picks) == {1, 4}
    expected = softmax(np.array([3.0, 2.5]) / 2.0)
    probs = sampler.probs(LOGITS)
    np.testing.assert_allclose(probs[[1, 4]], expected)
    assert probs[[0, 2, 3, 5]].sum() == 0.0


def test_top_k_larger_than_vocab_is_off():
    sampler = Sampler(temperature=1.0, top_k=100)
    np.testing.assert_allclose(sampler.probs(LOGITS), softmax(LOGITS), atol=1e-12)


def test_small_top_p_keeps_only_top_token():
    sampler = Sampler(temperature=1.0, top_p=0.01, seed=5)
    assert set(draw(sampler, LOGITS, 500)) == {1}


def test_top_p_keeps_smallest_nucleus():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(p)
    # Boundaries avoid exact float ties: 0.5 + 0.3 reaches 0.79 but not 0.81.
    probs = Sampler(temperature=1.0, top_p=0.79).probs(logits)
    np.testing.assert_allclose(probs, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=1e-12)
    probs = Sampler(temperature=1.0, top_p=0.81).probs(logits)
    np.testing.assert_allclose(probs, [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0], atol=1e-12)
    # top-k renormalizes first: 0.8 / 0.95 > 0.82 > 0.5 / 0.95
    combined = Sampler(temperature=1.0, top_k=3, top_p=0.82).probs(logits)
    np.testing.assert_allclose(combined, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=1e-12)


def test_top_p_matches_sorting_reference_with_ties():
    rng = np.random.default_rng(9)
    for _ in range(200):
        logits = rng.integers(0, 4, size=rng.integers(1, 30)).astype(np.float64)  # many exact ties
        top_p = float(rng.uniform(0.05, 1.0))
        p = softmax(logits)
        order = np.argsort(-p, kind="stable")  # ties: lower index first
        keep = min(int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1, len(p))
        expected = np.zeros_like(p)
        expected[order[:keep]] = p[order[:keep]] / p[order[:keep]].sum()
        np.testing.assert_allclose(Sampler(temperature=1.0, top_p=top_p).probs(logits), expected, atol=1e-12)


def test_frequencies_match_softmax():
    # 20k draws: the standard error of each frequency is at most sqrt(0.25 / 20000) ~ 0.0035, so an
    # absolute tolerance of 0.015 (> 4 sigma) makes a spurious failure practically impossible.
    n, temperature = 20_000, 1.5
    sampler = Sampler(temperature=temperature, seed=1234)
    freq = np.bincount(draw(sampler, LOGITS, n), minlength=len(LOGITS)) / n
    np.testing.assert_allclose(freq, softmax(LOGITS / temperature), atol=0.015)


def test_masked_tokens_are_never_drawn():
    logits = np.array([0.0, -np.inf, 0.0, -np.inf])
    assert set(draw(Sampler(temperature=1.0, seed=0), logits, 500)) == {0, 2}


def test_large_vocab_float32():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(150_000).astype(np.float32) * 3
    top = set(np.argsort(logits)[-40:].tolist())
    sampler = Sampler(temperature=0.7, top_k=40, top_p=0.9, seed=0)
    assert set(draw(sampler, logits, 200).tolist()) <= top
    assert Sampler(temperature=0)(logits) == int(np.argmax(logits))


def test_same_seed_same_tokens_different_seed_different():
    a = draw(Sampler(temperature=1.0, seed=42), LOGITS, 200)
    b = draw(Sampler(temperature=1.0, seed=42), LOGITS, 200)
    c = draw(Sampler(temperature=1.0, seed=43), LOGITS, 200)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.array_equal(draw(Sampler(0.9, top_k=3, top_p=0.8, seed=np.int64(7)), LOGITS, 100),
                          draw(Sampler(0.9, top_k=3, top_p=0.8, seed=7), LOGITS, 100))


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-0.1), r"temperature must be a finite number >= 0, got -0.1"),
    (dict(temperature=float("nan")), r"temperature must be a finite number >= 0, got nan"),
    (dict(temperature=True), r"temperature must be a finite number >= 0, got True"),
    (dict(temperature="1"), r"temperature must be a finite number >= 0, got '1'"),
    (dict(top_k=-1), r"top_k must be an int >= 0 \(0 = off\), got -1"),
    (dict(top_k=2.0), r"top_k must be an int >= 0 \(0 = off\), got 2.0"),
    (dict(top_k=True), r"top_k must be an int >= 0 \(0 = off\), got True"),
    (dict(top_p=0.0), r"top_p must be a number in \(0, 1\] \(1 = off\), got 0.0"),
    (dict(top_p=1.5), r"top_p must be a number in \(0, 1\] \(1 = off\), got 1.5"),
    (dict(top_p=False), r"top_p must be a number in \(0, 1\] \(1 = off\), got False"),
    (dict(seed=1.5), r"seed must be None or an int >= 0, got 1.5"),
    (dict(seed=-3), r"seed must be None or an int >= 0, got -3"),
    (dict(seed=True), r"seed must be None or an int >= 0, got True"),
])
def test_invalid_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampler(**kwargs)


@pytest.mark.parametrize("logits, message", [
    (np.zeros((2, 3)), r"non-empty 1-D array, got shape \(2, 3\)"),
    (np.zeros(0), r"non-empty 1-D array, got shape \(0,\)"),
    (np.array(["a", "b"]), "float array, got dtype <U1"),
    (np.array([0.0, np.nan]), "NaN or \\+inf"),
    (np.array([0.0, np.inf]), "NaN or \\+inf"),
    (np.array([-np.inf, -np.inf]), "all -inf"),
])
def test_invalid_logits(logits, message):
    for sampler in (Sampler(temperature=0), Sampler()):
        with pytest.raises(ValueError, match=message):
            sampler(logits)
