"""Several sequences in one step (`Model.forward_batch`, `Decoder.forward_batch`, kernels/plan.c): each sequence of a
batch gets bit for bit (np.array_equal) the logits and the KV cache it gets running alone, with sequences at different
positions and lengths, prompts (prefill) sharing a step with others' decode, sequences joining and sitting a step
out; for dense Llama / Qwen 2, sliding windows (Mistral), soft-capping with windows (Gemma 2), two RoPE slots
(Gemma 3), dynamic NTK (a table per sequence length), GPT-2's learned positions, at q8_0 and q4_0 weights with the
float32 and int8 KV caches. This holds because the matmul kernels give a token the same bits in any batch
(tests/test_kernels.py::test_a_token_gets_the_same_bits_in_any_batch). The per-op oracle runs batches too and
matches. Errors name the sequence that is wrong and leave every cache as it was.
"""
import functools
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.cache import KVCache

import models

HF = Path(__file__).parent / "fixtures" / "hf"
CASES = ["llama", "qwen2", "mistral", "gemma2", "gemma3_text", "llama_dynamic", "gpt2"]
# each step: sequence -> how many of its next tokens it runs. Sequences 0 and 1 start with prompts, 2 joins with a
# prompt while they decode, 1 sits step 3 out while 3 joins with a 20-token prompt (past the fixtures' 8-position
# windows and llama_dynamic's 16 original positions), then all four decode together.
STEPS = [{0: 9, 1: 5}, {0: 1, 1: 1, 2: 12}, {0: 1, 1: 3, 2: 1}, {0: 1, 2: 1, 3: 20}, {0: 1, 1: 1, 2: 1, 3: 1}]


@functools.lru_cache(maxsize=None)
def _hf(case: str, weights: str):
    return petit.load(HF / case, weights=weights)


def _tokens(model, n_seqs=4, length=32):
    rng = np.random.default_rng(7)
    return [rng.integers(0, model.vocab_size, length).astype(np.int32) for _ in range(n_seqs)]


def _solo(model, tokens, kv_type):
    """Each sequence alone, in the chunks the steps give it: its logits rows and its cache."""
    out = []
    for s, ids in enumerate(tokens):
        cache, rows, at = model.new_cache(64, kv_type), [], 0
        for step in STEPS:
            if s in step:
                rows.append(model.forward(ids[at:at + step[s]], cache, all_logits=True))
                at += step[s]
        out.append((np.concatenate(rows), cache))
    return out


def _batched(model, tokens, kv_type, run):
    """The same chunks, each step one batch of every sequence in it; run(model, [(ids, cache)]) -> logits list."""
    caches = [model.new_cache(64, kv_type) for _ in tokens]
    rows, at = [[] for _ in tokens], [0] * len(tokens)
    for step in STEPS:
        seqs = list(step)
        got = run(model, [(tokens[s][at[s]:at[s] + step[s]], caches[s]) for s in seqs])
        for s, logits in zip(seqs, got):
            assert logits.shape == (step[s], model.vocab_size)
            rows[s].append(logits)
            at[s] += step[s]
    return [(np.concatenate(r), c) for r, c in zip(rows, caches)]


def _model_batch(model, seqs):
    return model.forward_batch(seqs, all_logits=True)


def _oracle_batch(model, seqs):
    out = np.full((sum(len(ids) for ids, _ in seqs), model.vocab_size), np.nan, np.float32)
    model.net.forward_batch([(ids, cache, len(ids)) for ids, cache in seqs], out, oracle=True)
    at, parts = 0, []
    for ids, _ in seqs:
        parts.append(out[at:at + len(ids)])
        at += len(ids)
    return parts


def _assert_same_caches(a: KVCache, b: KVCache):
    assert a.pos == b.pos
    assert np.array_equal(a.k, b.k) and np.array_equal(a.v, b.v)
    if a.kv_type == "int8":
        assert np.array_equal(a.k_scale, b.k_scale) and np.array_equal(a.v_scale, b.v_scale)


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
@pytest.mark.parametrize("case", CASES)
def test_each_sequence_of_a_batch_gets_the_bits_it_gets_alone(case, weights, kv_type):
    model = _hf(case, weights)
    tokens = _tokens(model)
    alone = _solo(model, tokens, kv_type)
    together = _batched(model, tokens, kv_type, _model_batch)
    for s, ((want, c_alone), (got, c_batch)) in enumerate(zip(alone, together)):
        assert np.isfinite(want).all()
        assert np.array_equal(got, want), (f"sequence {s}: worst position {np.abs(got - want).max(axis=1).argmax()}, "
                                           f"off by {np.abs(got - want).max():.3g}")
        _assert_same_caches(c_batch, c_alone)


@pytest.mark.parametrize("case", ["gemma2", "gpt2", "llama_dynamic"])
def test_the_oracle_runs_batches_and_the_step_matches_it(case):
    model = _hf(case, "q8_0")
    tokens = _tokens(model)
    for kv_type in ("f32", "int8"):
        plan = _batched(model, tokens, kv_type, _model_batch)
        oracle = _batched(model, tokens, kv_type, _oracle_batch)
        for (got, c_plan), (want, c_oracle) in zip(plan, oracle):
            assert np.array_equal(got, want)
            _assert_same_caches(c_plan, c_oracle)


def test_the_bundled_model_decodes_four_sequences_as_it_decodes_each():
    from petit.assets import default_model_path
    model = petit.load(default_model_path("default-q8_0.petit"))
    tokens = _tokens(model, length=40)
    alone = _solo(model, tokens, "int8")
    together = _batched(model, tokens, "int8", _model_batch)
    for (want, c_alone), (got, c_batch) in zip(alone, together):
        assert np.array_equal(got, want)
        _assert_same_caches(c_batch, c_alone)


def test_last_position_logits_and_a_batch_of_one():
    """Without all_logits each sequence gets its last row; a batch of one is `forward`."""
    model = _hf("qwen2", "q8_0")
    a, b = _tokens(model, 2)
    ref_a = model.forward(a[:6], model.new_cache(32))
    ref_b = model.forward(b[:1], model.new_cache(32))
    got = model.forward_batch([(a[:6], model.new_cache(32)), (b[:1], model.new_cache(32))])
    assert [g.shape for g in got] == [(model.vocab_size,)] * 2
    assert np.array_equal(got[0], ref_a) and np.array_equal(got[1], ref_b)
    (one,) = model.forward_batch([(a[:6], model.new_cache(32))])
    assert np.array_equal(one, ref_a)


def _batch_error(model, make_seqs):
    """The error forward_batch raises, and whether every cache in the batch kept its positions."""
    seqs = make_seqs()
    caches = [item[-1] for item in seqs if isinstance(item[-1], KVCache)]
    before = [c.pos for c in caches]
    with pytest.raises(ValueError) as e:
        model.forward_batch(seqs)
    return str(e.value), [c.pos for c in caches] == before


def test_errors_name_the_sequence_and_change_no_cache():
    model = _hf("llama", "q8_0")
    V = model.vocab_size
    warm = model.new_cache(16)
    model.forward([1, 2, 3], warm)

    def with_second(ids, cache):
        return lambda: [([5], warm), (ids, cache), ([6, 7], model.new_cache(16))]

    cases = [
        (with_second([3, V, -1], model.new_cache(16)),
         f"sequence 1: token id(s) [{V}, -1] out of range for a vocabulary of {V}"),
        (with_second([], model.new_cache(16)), "sequence 1: forward needs at least one token"),
        (with_second(list(range(5)), model.new_cache(4)),
         "sequence 1: context full: 0 + 5 tokens exceed the cache size 4"),
        (with_second([1], KVCache(1, 1, 8, 4)),
         "sequence 1: this KV cache (1, 1, 8, 4) was not made for this model (needs (2, 2) + (n_ctx <= 128, 16)): "
         "use model.new_cache()"),
        (with_second([1], warm), "sequence 1 uses the KV cache of sequence 0: each sequence needs its own"),
        (with_second([1], "cache"), "sequence 1: expected a KVCache (model.new_cache()), got str"),
        (lambda: [([1], model.new_cache(16)), [1]], "sequence 1: expected a (token_ids, cache) pair, got list"),
        (lambda: [], "forward_batch needs a list of (token_ids, cache) pairs, at least one"),
    ]
    for make, message in cases:
        assert _batch_error(model, make) == (message, True)
    assert warm.pos == 3
    # a lone sequence's errors read as forward's
    assert _batch_error(model, lambda: [([V], model.new_cache(16))])[0] == \
        f"token id(s) [{V}] out of range for a vocabulary of {V}"


@pytest.mark.parametrize("oracle", [False, True])
def test_the_decoder_names_the_sequence_through_both_paths(oracle):
    """Below Model's checks: bad ids reach the embedding, and an op that fails for one sequence (a RoPE table too
    short for its positions) names it; no cache moves."""
    model = petit.load(HF / "llama", weights="f32")
    V = model.vocab_size
    caches = [model.new_cache(16), model.new_cache(16)]
    with pytest.raises(ValueError) as e:
        model.net.forward_batch([(np.array([1], np.int32), caches[0], 1), (np.array([2, V], np.int32), caches[1], 1)],
                                np.empty((2, V), np.float32), oracle=oracle)
    assert str(e.value) == f"sequence 1: token id(s) [{V}] out of range for a vocabulary of {V}"
    for L in model.net.layers:
        L.rope = models.ShortRope(L.rope)
    model.net._plan = None
    with pytest.raises(RuntimeError) as e:
        model.net.forward_batch([(np.array([1], np.int32), caches[0], 1), (np.arange(5, dtype=np.int32), caches[1], 1)],
                                np.empty((2, V), np.float32), oracle=oracle)
    assert str(e.value) == "kernel error -1 in layer 0 (sequence 1, positions 0..4)"
    assert [c.pos for c in caches] == [0, 0]
