"""Tests for petit.generation.sample.Sampler: penalties, greedy, temperature, top-k, top-p, min-p, seeding and
validation."""

import numpy as np
import pytest

from petit.generation.sample import Sampler

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
    (dict(min_p=-0.1), r"min_p must be a number in \[0, 1\] \(0 = off\), got -0.1"),
    (dict(min_p=1.5), r"min_p must be a number in \[0, 1\] \(0 = off\), got 1.5"),
    (dict(min_p=float("nan")), r"min_p must be a number in \[0, 1\] \(0 = off\), got nan"),
    (dict(min_p=True), r"min_p must be a number in \[0, 1\] \(0 = off\), got True"),
    (dict(repetition_penalty=0.0), r"repetition_penalty must be a finite number > 0 \(1 = off\), got 0.0"),
    (dict(repetition_penalty=-1.2), r"repetition_penalty must be a finite number > 0 \(1 = off\), got -1.2"),
    (dict(repetition_penalty=float("inf")), r"repetition_penalty must be a finite number > 0 \(1 = off\), got inf"),
    (dict(repetition_penalty="1.1"), r"repetition_penalty must be a finite number > 0 \(1 = off\), got '1.1'"),
    (dict(frequency_penalty=2.5), r"frequency_penalty must be a number in \[-2, 2\] \(0 = off\), got 2.5"),
    (dict(frequency_penalty=-2.01), r"frequency_penalty must be a number in \[-2, 2\] \(0 = off\), got -2.01"),
    (dict(frequency_penalty=float("nan")), r"frequency_penalty must be a number in \[-2, 2\] \(0 = off\), got nan"),
    (dict(presence_penalty=3), r"presence_penalty must be a number in \[-2, 2\] \(0 = off\), got 3"),
    (dict(presence_penalty=-2.5), r"presence_penalty must be a number in \[-2, 2\] \(0 = off\), got -2.5"),
    (dict(presence_penalty=False), r"presence_penalty must be a number in \[-2, 2\] \(0 = off\), got False"),
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


# --- penalties, min-p, chain order -------------------------------------------------------------------------

PEN_LOGITS = np.array([2.0, -1.0, 0.5, -3.0, 0.0, 1.0])
PEN_CONTEXT = [0, 1, 1, 4, 0, 0]  # counts: id 0 -> 3, id 1 -> 2, id 4 -> 1; ids 2, 3, 5 absent


@pytest.mark.parametrize("kwargs, expected", [
    # repetition: positive logits divided (2 -> 1), negative multiplied (-1 -> -2), 0 stays 0; once per id
    (dict(repetition_penalty=2.0), [1.0, -2.0, 0.5, -3.0, 0.0, 1.0]),
    (dict(repetition_penalty=0.5), [4.0, -0.5, 0.5, -3.0, 0.0, 1.0]),  # < 1 encourages repeats
    # frequency: minus 0.5 * count
    (dict(frequency_penalty=0.5), [0.5, -2.0, 0.5, -3.0, -0.5, 1.0]),
    (dict(frequency_penalty=-1.0), [5.0, 1.0, 0.5, -3.0, 1.0, 1.0]),
    # presence: minus 0.25 once for every id present, whatever its count
    (dict(presence_penalty=0.25), [1.75, -1.25, 0.5, -3.0, -0.25, 1.0]),
    # all three: repetition first, then frequency + presence
    (dict(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25),
     [-0.75, -3.25, 0.5, -3.0, -0.75, 1.0]),
])
def test_penalties_exact_logits(kwargs, expected):
    sampler = Sampler(temperature=1.0, **kwargs)
    for context in (PEN_CONTEXT, tuple(PEN_CONTEXT), np.array(PEN_CONTEXT, dtype=np.int32)):
        assert sampler._penalize(PEN_LOGITS, context).dense().tolist() == expected
        np.testing.assert_allclose(sampler.probs(PEN_LOGITS, context), softmax(expected), atol=1e-12)
    # penalties come before temperature
    np.testing.assert_allclose(Sampler(temperature=2.0, **kwargs).probs(PEN_LOGITS, PEN_CONTEXT),
                               softmax(np.array(expected) / 2.0), atol=1e-12)


def test_penalties_keep_masked_tokens_masked_and_float32():
    logits = np.array([-np.inf, 1.5, 0.0], dtype=np.float32)
    sampler = Sampler(temperature=1.0, repetition_penalty=1.5, frequency_penalty=1.0, presence_penalty=1.0)
    out = sampler._penalize(logits, [0, 1]).dense()
    assert out.tolist() == [-np.inf, 1.5 / 1.5 - 2.0, 0.0]
    assert sampler.probs(logits, [0, 1])[0] == 0.0


@pytest.mark.parametrize("context", [None, [], (), np.zeros(0, dtype=np.int64), np.zeros(0)])
def test_no_context_means_no_penalty(context):
    sampler = Sampler(temperature=1.0, repetition_penalty=1.3, frequency_penalty=1.0, presence_penalty=1.0)
    np.testing.assert_allclose(sampler.probs(LOGITS, context), softmax(LOGITS), atol=1e-12)
    assert Sampler(temperature=0, repetition_penalty=5.0)(LOGITS, context) == 1


def test_neutral_penalties_change_nothing():
    sampler = Sampler(temperature=1.0)  # defaults: 1.0, 0.0, 0.0
    np.testing.assert_allclose(sampler.probs(LOGITS, [1, 1, 4]), softmax(LOGITS), atol=1e-12)


def test_greedy_applies_penalties_then_argmax():
    logits = np.array([1.0, 3.0, 2.5])
    assert Sampler(temperature=0)(logits, [1]) == 1
    assert Sampler(temperature=0, repetition_penalty=1.5)(logits, [1]) == 2  # 3 / 1.5 = 2 < 2.5
    assert Sampler(temperature=0, repetition_penalty=1.1)(logits, [1]) == 1  # 3 / 1.1 > 2.5
    assert Sampler(temperature=0, frequency_penalty=0.3)(logits, [1, 1]) == 2  # 3 - 0.6 < 2.5
    assert Sampler(temperature=0, presence_penalty=0.6)(logits, [1, 1]) == 2  # 3 - 0.6 < 2.5
    probs = Sampler(temperature=0, repetition_penalty=1.5).probs(logits, [1])
    assert probs.tolist() == [0.0, 0.0, 1.0]
    # greedy overrides the filters, not the penalties
    assert Sampler(temperature=0, top_k=1, min_p=1.0, repetition_penalty=1.5)(logits, [1]) == 2


def test_callers_arrays_are_never_modified():
    sampler = Sampler(temperature=0.7, top_k=3, top_p=0.9, min_p=0.05, repetition_penalty=1.3,
                      frequency_penalty=0.5, presence_penalty=0.5, seed=0)
    greedy = Sampler(temperature=0, repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.5)
    for dtype in (np.float32, np.float64):
        logits = LOGITS.astype(dtype)
        context = np.array([1, 1, 4, 2])
        before, context_before = logits.copy(), context.copy()
        for s in (sampler, greedy):
            s(logits, context)
            s.probs(logits, context)
        assert logits.dtype == dtype and np.array_equal(logits, before)
        assert np.array_equal(context, context_before)


def test_min_p_keeps_exactly_the_expected_set():
    p = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    logits = np.log(p)
    # threshold 0.3 * 0.4 = 0.12: keeps 0.4, 0.3, 0.15
    probs = Sampler(temperature=1.0, min_p=0.3).probs(logits)
    np.testing.assert_allclose(probs, [0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85, 0, 0], atol=1e-12)
    # threshold 0.2: keeps 0.4, 0.3
    assert np.flatnonzero(Sampler(temperature=1.0, min_p=0.5).probs(logits)).tolist() == [0, 1]
    assert np.flatnonzero(Sampler(temperature=1.0, min_p=1.0).probs(logits)).tolist() == [0]
    np.testing.assert_allclose(Sampler(temperature=1.0, min_p=0.0).probs(logits), p, atol=1e-12)
    sampler = Sampler(temperature=1.0, min_p=0.3, seed=2)
    assert set(draw(sampler, logits, 500)) == {0, 1, 2}


def test_min_p_is_applied_after_temperature():
    # p_i / p_max = exp((x_i - x_max) / T); min_p = 0.1 keeps (x_i - x_max) / T >= log(0.1) ~ -2.303
    logits = np.array([0.0, -1.0, -3.0])
    keep = lambda t: np.flatnonzero(Sampler(temperature=t, min_p=0.1).probs(logits)).tolist()  # noqa: E731
    assert keep(1.0) == [0, 1]  # -3 < -2.303: what min-p before temperature would keep at any T
    assert keep(2.0) == [0, 1, 2]  # ours: -3 / 2 = -1.5 >= -2.303
    assert keep(0.25) == [0]  # -1 / 0.25 = -4 < -2.303


def test_min_p_is_applied_after_top_p():
    p = np.array([0.5, 0.3, 0.2])
    logits = np.log(p)
    # ours: top-p 0.6 keeps {0, 1} (0.5 < 0.6 <= 0.8), then min-p 0.5 (threshold 0.25) keeps both.
    # min-p first would keep {0, 1} renormalized to [0.625, 0.375], then top-p 0.6 only {0}.
    probs = Sampler(temperature=1.0, top_p=0.6, min_p=0.5).probs(logits)
    np.testing.assert_allclose(probs, [0.625, 0.375, 0.0], atol=1e-12)


def test_min_p_after_top_k():
    # top-k 2 then min-p: ratio to the max is unchanged by renormalization
    probs = Sampler(temperature=1.0, top_k=2, min_p=0.5).probs(np.log([0.5, 0.3, 0.2]))
    np.testing.assert_allclose(probs, [0.625, 0.375, 0.0], atol=1e-12)


def test_penalties_large_vocab_match_dense_reference():
    rng = np.random.default_rng(1)
    n = 150_000
    logits = (rng.standard_normal(n) * 3).astype(np.float32)
    context = rng.integers(0, n, size=4000)
    context[:50] = context[0]  # a heavily repeated id
    rep, freq, pres = 1.2, 0.4, 0.3
    sampler = Sampler(temperature=0.8, top_k=40, min_p=0.05, repetition_penalty=rep, frequency_penalty=freq,
                      presence_penalty=pres, seed=0)
    counts = np.bincount(context, minlength=n)
    x = logits.astype(np.float64)
    present = counts > 0
    expected = np.where(present, np.where(x > 0, x / rep, x * rep), x) - freq * counts - pres * present
    out = sampler._penalize(logits, context).dense()
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert np.array_equal(out[~present], logits[~present].astype(np.float64))  # untouched elsewhere
    top = set(np.argsort(expected)[-40:].tolist())
    assert set(draw_ctx(sampler, logits, context, 100).tolist()) <= top
    assert Sampler(temperature=0, repetition_penalty=rep, frequency_penalty=freq,
                   presence_penalty=pres)(logits, context) == int(np.argmax(expected))


def draw_ctx(sampler, logits, context, n):
    return np.array([sampler(logits, context) for _ in range(n)])


def test_penalties_are_deterministic_with_seed():
    kwargs = dict(temperature=1.0, repetition_penalty=1.3, presence_penalty=0.5, min_p=0.02, seed=11)
    assert np.array_equal(draw_ctx(Sampler(**kwargs), LOGITS, [1, 4], 200),
                          draw_ctx(Sampler(**kwargs), LOGITS, [1, 4], 200))


@pytest.mark.parametrize("context, message", [
    ([0, 6], r"context_ids must be in \[0, 6\) \(the logits' length\), got 6"),
    ([-1, 2], r"context_ids must be in \[0, 6\) \(the logits' length\), got -1"),
    ([0.0, 1.0], r"context_ids must be a 1-D sequence of ints, got shape \(2,\) dtype float64"),
    ([[0, 1]], r"context_ids must be a 1-D sequence of ints, got shape \(1, 2\) dtype int"),
])
def test_invalid_context_ids(context, message):
    for sampler in (Sampler(temperature=0), Sampler(repetition_penalty=1.2)):
        with pytest.raises(ValueError, match=message):
            sampler(LOGITS, context)


def test_describe_and_repr_list_every_setting():
    s = Sampler(0.8, 40, 0.95, 1, min_p=0.05, repetition_penalty=1.1)
    assert s.describe() == ("temperature=0.8 top_k=40 top_p=0.95 min_p=0.05 repetition_penalty=1.1 "
                            "frequency_penalty=0 presence_penalty=0 seed=1")
    assert Sampler(temperature=0).describe() == ("temperature=0 top_k=0 top_p=1 min_p=0 repetition_penalty=1 "
                                                 "frequency_penalty=0 presence_penalty=0 seed=None")
    assert Sampler(frequency_penalty=-0.5, presence_penalty=2, seed=np.int64(3)).describe().endswith(
        "frequency_penalty=-0.5 presence_penalty=2 seed=3")
    assert repr(s) == ("Sampler(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1, "
                       "frequency_penalty=0.0, presence_penalty=0.0, seed=1)")
    assert "\n" not in s.describe()


def test_settings_resolve_flag_then_model_then_fallback():
    from petit.generation.sample import FALLBACK, resolve
    got = resolve({"temperature": None, "top_k": 5, "seed": 3}, {"temperature": 0.6, "top_k": 50, "top_p": 0.9})
    assert got == dict(FALLBACK, temperature=0.6, top_k=5, top_p=0.9, seed=3)
    assert resolve({}, {"do_sample": False, "temperature": 0.7})["temperature"] == 0.0     # do_sample false: greedy
    assert resolve({"temperature": 1.2}, {"do_sample": False})["temperature"] == 1.2      # a flag still wins
    assert resolve({}, None) == dict(FALLBACK, seed=None)


# --- a 151,936-token vocabulary against a full sort ------------------------------------------------------------
# The sampler never sorts the whole vocabulary (it works on the tokens above thresholds); these compare it with the
# straightforward float64 computation of the documented chain, on Qwen2.5's vocabulary size.

BIG = 151_936


def reference_probs(logits, context=(), temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                    frequency_penalty=0.0, presence_penalty=0.0):
    """The documented chain on the whole vocabulary in float64, with full stable sorts (ties: lowest id first)."""
    x = np.asarray(logits, dtype=np.float64).copy()
    counts = np.bincount(np.asarray(context, dtype=np.int64), minlength=x.size)
    present = counts > 0
    x[present] = np.where(x[present] > 0, x[present] / repetition_penalty, x[present] * repetition_penalty)
    x -= frequency_penalty * counts + presence_penalty * present
    x /= temperature
    keep = np.isfinite(x)
    if 0 < top_k < x.size:
        order = np.argsort(-x, kind="stable")
        keep = np.zeros(x.size, dtype=bool)
        keep[order[:top_k]] = True
    p = np.where(keep, np.exp(x - x[keep].max()), 0.0)
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        cut = min(int(np.searchsorted(np.cumsum(p[order]), top_p, side="left")) + 1, p.size)
        q = np.zeros_like(p)
        q[order[:cut]] = p[order[:cut]]
        p = q / q.sum()
    if min_p > 0.0:
        p = np.where(p >= min_p * p.max(), p, 0.0)
        p /= p.sum()
    return p


def big_logits(kind, seed, dtype=np.float32):
    """A vocabulary of 151,936 logits with ties (values rounded to 0.05) and 500 -inf entries: `lm` has a bulk
    (normal, std 2.5) below a head of 32 tokens up to 18, like a language model's; `flat` is normal with std 3."""
    rng = np.random.default_rng(seed)
    if kind == "lm":
        x = rng.standard_normal(BIG) * 2.5
        x[rng.choice(BIG, 32, replace=False)] = 18.0 - np.cumsum(rng.exponential(0.6, 32))
    else:
        x = rng.standard_normal(BIG) * 3.0
    x = np.round(x * 20) / 20
    x[rng.choice(BIG, 500, replace=False)] = -np.inf
    return x.astype(dtype)


def big_context(logits, seed):
    """64 ids with repeats: 8 of the 32 most likely tokens, 4 masked (-inf) ones, the rest from everywhere."""
    rng = np.random.default_rng(seed + 100)
    likely = np.argsort(logits)[-32:]
    context = np.concatenate([rng.choice(likely, 8, replace=False), rng.choice(np.flatnonzero(np.isinf(logits)), 4),
                              rng.integers(0, BIG, 52)])
    context[-10:] = context[0]          # one id ten times more
    return rng.permutation(context)


BIG_SETTINGS = [
    dict(temperature=0.8, top_k=40),
    dict(temperature=1.3, top_k=2000),
    dict(temperature=0.8, top_p=0.9),
    dict(temperature=1.0, top_p=0.5),
    dict(temperature=0.7, top_p=0.99),
    dict(temperature=2.0, top_p=0.95),                  # a broad nucleus of thousands of tokens
    dict(temperature=0.8, min_p=0.05),
    dict(temperature=1.5, min_p=0.001),
    dict(temperature=0.7, top_k=20, top_p=0.8),
    dict(temperature=1.0, top_k=50, top_p=0.9, min_p=0.02),
    dict(temperature=0.8, top_p=0.9, min_p=0.1),
    dict(temperature=0.8, top_p=0.9, repetition_penalty=1.1),
    dict(temperature=0.8, repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.3),
    dict(temperature=0.7, top_k=20, top_p=0.8, repetition_penalty=1.05, frequency_penalty=-0.5),
    dict(temperature=1.0, min_p=0.05, repetition_penalty=0.8, presence_penalty=-1.0),
]


@pytest.mark.parametrize("kind", ["lm", "flat"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_large_vocab_matches_a_full_sort(kind, seed):
    logits = big_logits(kind, seed, dtype=np.float32 if seed < 2 else np.float64)
    context = big_context(logits, seed)
    before = logits.copy()
    for settings in BIG_SETTINGS:
        expected = reference_probs(logits, context, **settings)
        got = Sampler(**settings).probs(logits, context)
        assert np.array_equal(np.flatnonzero(got), np.flatnonzero(expected)), settings
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0, err_msg=str(settings))
    greedy = dict(repetition_penalty=1.3, frequency_penalty=0.5, presence_penalty=0.3)
    expected = int(np.argmax(reference_probs(logits, context, temperature=1e-3, **greedy)))
    assert Sampler(temperature=0, **greedy)(logits, context) == expected
    assert np.array_equal(logits, before, equal_nan=True)     # the caller's array is never modified


def test_large_vocab_top_p_between_two_boundaries():
    # top_p half-way between two cumulative sums of the sorted distribution keeps exactly the upper one's tokens
    logits = big_logits("lm", 3)
    p = reference_probs(logits, temperature=0.8)
    cumulative = np.cumsum(np.sort(p)[::-1])
    for k in (1, 2, 5, 12, 40, 300):
        top_p = float((cumulative[k - 1] + cumulative[k]) / 2)
        got = Sampler(temperature=0.8, top_p=top_p).probs(logits)
        assert np.count_nonzero(got) == k + 1
        np.testing.assert_allclose(got, reference_probs(logits, temperature=0.8, top_p=top_p), rtol=1e-6, atol=0)


@pytest.mark.parametrize("k", range(1, 9))
def test_top_p_exactly_on_a_boundary_keeps_the_smallest_set_and_the_lowest_tied_ids(k):
    # 8 tied tokens (probability 1/8 each, exactly) in a vocabulary of -inf: k/8 is reached by k of them
    logits = np.full(BIG, -np.inf, dtype=np.float32)
    tied = np.sort(np.random.default_rng(k).choice(BIG, 8, replace=False))
    logits[tied] = 1.5
    got = Sampler(temperature=0.9, top_p=k / 8).probs(logits)
    assert np.flatnonzero(got).tolist() == tied[:k].tolist()
    assert got[tied[:k]].tolist() == [1 / k] * k
    if k < 8:                                      # a hair above the boundary takes one more
        assert np.flatnonzero(Sampler(temperature=0.9, top_p=k / 8 + 1e-9).probs(logits)).tolist() == \
            tied[:k + 1].tolist()


def test_top_p_boundary_with_the_rest_of_the_vocabulary_just_below_it():
    # 4 tied tokens at 10 hold all but 3.6e-9 of the mass (151,932 tokens at -20): 2 of them reach 0.5 - 1.8e-9,
    # short of top_p = 0.5, so a third is needed; the tail is far below every threshold the sampler tries first
    logits = np.full(BIG, -20.0)
    logits[[7, 70_000, 90_000, 150_000]] = 10.0
    got = Sampler(temperature=1.0, top_p=0.5).probs(logits)
    assert np.flatnonzero(got).tolist() == [7, 70_000, 90_000]
    np.testing.assert_allclose(got, reference_probs(logits, top_p=0.5), rtol=1e-12, atol=0)
    logits[logits == -20.0] = -60.0     # now the tail's mass (1.5e-26) rounds away: 2 reach 0.5 exactly
    assert np.flatnonzero(Sampler(temperature=1.0, top_p=0.5).probs(logits)).tolist() == [7, 70_000]


def test_top_k_ties_at_the_cut_go_to_the_lowest_ids():
    logits = np.full(BIG, -5.0, dtype=np.float32)
    logits[[10, 20]] = 3.0
    tied = [5, 900, 40_000, 100_000, 151_935]
    logits[tied] = 2.0
    got = Sampler(temperature=1.0, top_k=4).probs(logits)
    assert np.flatnonzero(got).tolist() == [5, 10, 20, 900]
    np.testing.assert_allclose(got, reference_probs(logits, top_k=4), rtol=1e-12, atol=0)


def test_greedy_after_penalties_ties_go_to_the_lowest_id_at_a_large_vocab():
    logits = np.full(BIG, -1.0)
    logits[[9, 80_000]] = 3.0           # both in the context: 3 / 1.5 = 2
    logits[[50_000, 120_000]] = 2.0     # not in the context
    greedy = Sampler(temperature=0, repetition_penalty=1.5)
    assert greedy(logits, [80_000, 9]) == 9
    assert greedy(logits, [80_000]) == 9                    # 9 keeps its 3
    logits[9] = 1.0
    assert greedy(logits, [80_000, 9]) == 50_000            # 50,000 ties with 80,000 and comes first
    assert greedy(logits, [80_000, 50_000]) == 80_000       # 50,000 falls to 2 / 1.5; 80,000 ties with 120,000
    assert greedy(logits, [80_000, 50_000, 120_000]) == 80_000


@pytest.mark.parametrize("settings", [dict(temperature=0.8), dict(temperature=0.8, top_p=0.9),
                                      dict(temperature=1.2, top_k=40, min_p=0.02)])
def test_draws_follow_the_cumulative_sum_in_id_order(settings):
    # the draw is one uniform per token, scaled to the kept mass and looked up in the running sum over the kept
    # ids in ascending order: a seed gives the same token as before the sampler stopped sorting the vocabulary
    logits = big_logits("lm", 4)
    p = reference_probs(logits, **settings)
    ids = np.flatnonzero(p)
    cumulative = np.cumsum(p[ids])
    for seed in range(20):
        u = np.random.default_rng(seed).random() * cumulative[-1]
        expected = int(ids[min(int(np.searchsorted(cumulative, u, side="right")), ids.size - 1)])
        assert Sampler(seed=seed, **settings)(logits) == expected


def test_threads_sampling_at_once_do_not_share_their_work():
    import threading

    vectors = [big_logits(kind, seed) for kind in ("lm", "flat") for seed in (5, 6)]
    settings = [dict(temperature=0.8, top_p=0.9, repetition_penalty=1.1), dict(temperature=0.9),
                dict(temperature=1.0, top_k=30), dict(temperature=2.0, top_p=0.95)]
    expected = [Sampler(**s).probs(x, [1, 2, 3]) for s, x in zip(settings, vectors)]
    errors = []

    def work(i):
        for _ in range(15):
            if not np.array_equal(Sampler(**settings[i]).probs(vectors[i], [1, 2, 3]), expected[i]):
                errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
