"""The forward plan (kernels/plan.c, petit/models/blocks/plan.py) against the per-op path it replaces
(`Decoder.forward(..., oracle=True)`): for every family's transformers fixture (tests/fixtures/hf), the bundled
model and the tiny Llama variants of tests/models.py, with f32 / q8_0 / q4_0 weights and the float32 and int8 KV
caches, the logits of a chunked prefill (7 then 30 tokens), of token-by-token decode after it, and of a fresh
37-token prefill are bit-identical (np.array_equal), and so are the KV caches. The fixtures between them switch on
sliding windows (8 positions, shorter than the prompt), attention and logit soft-capping, NoPE layers, learned
positions, parallel blocks, q/k norms, biases, a residual multiplier and every RoPE scaling, dynamic NTK's per-step
tables included. The errors a caller can meet come out the same through both paths.
"""
import functools
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.assets import default_model_path

import models

HF = Path(__file__).parent / "fixtures" / "hf"
MORE = HF.parent / "hf_more"        # the other decoder families (issue 18): OLMo, GLM, Hunyuan, Falcon, BLOOM, ...
FOLDERS = {p.name: p for d in (HF, MORE) for p in sorted(d.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
BUNDLED = ["default-q8_0.petit", "default-q4_0.petit"]
LLAMA_VARIANTS = {
    "mha_interleaved": {"num_key_value_heads": 4, "rope_interleaved": True, "rope_theta": 500.0},
    "odd_sizes": {"hidden_size": 96, "intermediate_size": 160, "num_attention_heads": 6, "num_key_value_heads": 3,
                  "head_dim": 16, "num_hidden_layers": 3},
}
CHUNKS = [7, 30, 1, 1, 1, 1, 1]     # a chunked prefill, then decode one token at a time
FRESH = [37, 1, 1]                  # one odd prefill, then decode


@functools.lru_cache(maxsize=None)
def _hf(case: str, weights: str):
    return petit.load(FOLDERS[case], weights=weights)


def _run(model, chunks, kv_type, oracle, seed=1):
    """The logits of every position each chunk runs, and the cache after."""
    ids = np.random.default_rng(seed).integers(0, model.vocab_size, sum(chunks)).astype(np.int32)
    cache = model.new_cache(64, kv_type=kv_type)
    out, at = [], 0
    for n in chunks:
        logits = np.full((n, model.vocab_size), np.nan, np.float32)
        model.net.forward(ids[at:at + n], cache, logits, oracle=oracle)
        out.append(logits)
        at += n
    assert cache.pos == at
    return np.concatenate(out), cache


def _assert_same(model, kv_type):
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, kv_type, oracle=False)
        want, c_oracle = _run(model, chunks, kv_type, oracle=True)
        assert np.isfinite(want).all()
        assert np.array_equal(got, want), (f"chunks {chunks}: worst position "
                                           f"{np.abs(got - want).max(axis=1).argmax()}, "
                                           f"off by {np.abs(got - want).max():.3g}")
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)
        if kv_type == "int8":
            assert np.array_equal(c_plan.k_scale, c_oracle.k_scale)
            assert np.array_equal(c_plan.v_scale, c_oracle.v_scale)


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("weights", ["f32", "q8_0", "q4_0"])
@pytest.mark.parametrize("case", CASES)
def test_every_family_step_is_bit_identical_to_the_per_op_path(case, weights, kv_type):
    _assert_same(_hf(case, weights), kv_type)


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_model_step_is_bit_identical(name, kv_type):
    _assert_same(petit.load(default_model_path(name)), kv_type)


@pytest.mark.parametrize("dtype", ["f32", "f16", "q8_0", "q4_0"])
@pytest.mark.parametrize("variant", LLAMA_VARIANTS)
def test_llama_variants_step_is_bit_identical(variant, dtype, tmp_path):
    path = tmp_path / "m.petit"
    models.write_model(path, {**models.TINY, **LLAMA_VARIANTS[variant]}, dtype=dtype)
    _assert_same(petit.load(path), "f32")


def test_the_fixtures_switch_on_what_the_plan_must_carry():
    """The cases above really exercise windows, soft-caps, NoPE, learned positions and residual scales."""
    nets = {case: _hf(case, "f32").net for case in CASES}
    assert any(L.window and L.window < 37 for n in nets.values() for L in n.layers)
    assert any(n.arch.attn_softcap and n.arch.logit_softcap for n in nets.values())
    assert any(L.rope is None for n in nets.values() for L in n.layers)
    assert nets["gpt2"].pos_embed is not None
    assert any(n.arch.residual_scale != 1.0 and n.arch.embed_scale != 1.0 for n in nets.values())
    assert any(n.arch.parallel for n in nets.values())
    assert len({id(L.rope) for L in nets["gemma3_text"].layers}) == 2     # two RoPE slots in one plan
    # the ops the later families added: a clamp of q / k / v, RoPE before the q / k norms, a parametrised
    # activation
    assert nets["olmo"].layers[0].clip > 0 and nets["hunyuan_v1_dense"].layers[0].norm_after_rope
    assert nets["apertus"].layers[0].mlp_act is not None
    # ALiBi, the embedding norm, post-LN residual norms and no final norm, the sub-norms and ternary rows of BitNet
    assert nets["bloom"].layers[0].alibi is not None and nets["bloom"].embed_norm is not None
    assert nets["opt_350m"].layers[0].resid_attn_norm is not None and nets["opt_350m"].final_norm is None
    assert nets["bitnet"].layers[0].o_norm is not None and nets["bitnet"].layers[0].q.dtype == "tq2"


def test_last_positions_and_no_head():
    """n logits of the last positions, and logits_out=None filling the cache without the head."""
    model = _hf("gemma2", "q8_0")
    ids = np.arange(1, 12, dtype=np.int32)
    for oracle in (False, True):
        full = np.empty((11, model.vocab_size), np.float32)
        model.net.forward(ids, model.new_cache(32), full, oracle=oracle)
        last3 = np.empty((3, model.vocab_size), np.float32)
        model.net.forward(ids, model.new_cache(32), last3, oracle=oracle)
        assert np.array_equal(last3, full[-3:])
        cache = model.new_cache(32)
        model.net.forward(ids, cache, None, oracle=oracle)
        assert cache.pos == 11
        one = np.empty((1, model.vocab_size), np.float32)
        model.net.forward(ids[:1] + 1, cache, one, oracle=oracle)
        ref = np.empty((12, model.vocab_size), np.float32)
        model.net.forward(np.append(ids, ids[0] + 1), model.new_cache(32), ref, oracle=oracle)
        assert np.array_equal(one[0], ref[-1])


def _error(model, ids, cache, oracle):
    with pytest.raises((ValueError, RuntimeError)) as e:
        model.net.forward(ids, cache, np.empty((1, model.vocab_size), np.float32), oracle=oracle)
    return type(e.value), str(e.value), cache.pos


@pytest.mark.parametrize("case", ["llama", "gpt2"])
def test_errors_are_the_same_through_both_paths(case):
    model = _hf(case, "f32")
    V = model.vocab_size
    for make_cache, ids in [
        (lambda: model.new_cache(16), np.array([3, V, -1, 5], np.int32)),          # token ids out of range
        (lambda: model.new_cache(4), np.arange(5, dtype=np.int32)),                # context full
        (lambda: petit.cache.KVCache(1, 1, 8, 4), np.arange(3, dtype=np.int32)),   # not this model's cache
    ]:
        got, want = _error(model, ids, make_cache(), False), _error(model, ids, make_cache(), True)
        assert got == want
    assert got[0] is ValueError and "was not made for this model" in got[1]
    t, msg, pos = _error(model, np.array([3, V, -1, 5], np.int32), model.new_cache(16), False)
    assert (t, msg, pos) == (ValueError, f"token id(s) [{V}, -1] out of range for a vocabulary of {V}", 0)
    t, msg, _ = _error(model, np.arange(5, dtype=np.int32), model.new_cache(4), False)
    assert msg == "context full: 0 + 5 tokens exceed the cache size 4"


def test_a_kernel_error_names_the_layer_through_both_paths():
    messages = []
    for oracle in (False, True):
        model = petit.load(HF / "llama", weights="f32")
        for L in model.net.layers:
            L.rope = models.ShortRope(L.rope)
        t, msg, pos = _error(model, np.arange(5, dtype=np.int32), model.new_cache(16), oracle)
        messages.append((t, msg, pos))
    assert messages[0] == messages[1] == (RuntimeError, "kernel error -1 in layer 0 (positions 0..4)", 0)


def test_a_test_fault_reaches_the_plan(monkeypatch):
    """PETIT_TEST_FAULT changes the prepared model, so the plan built from it carries the fault too."""
    ids = np.arange(1, 10, dtype=np.int32)
    clean = _hf("llama", "f32").logits(ids)
    monkeypatch.setenv("PETIT_TEST_FAULT", "rope_wrong_half")
    model = petit.load(HF / "llama", weights="f32")
    got, _ = _run(model, [9], "f32", oracle=False)
    want, _ = _run(model, [9], "f32", oracle=True)
    assert np.array_equal(got, want)
    assert not np.allclose(model.logits(ids), clean, atol=1e-3)
