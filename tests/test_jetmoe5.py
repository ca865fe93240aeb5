"""The jetmoe group of issue 30 (tests/fixtures/hf5_jetmoe: JetMoE, made by transformers 5.25; and
tests/fixtures/hf_moe_more/jetmoe, made by 4.57): what tests/test_hf_parity.py (35-token prompt, greedy), test_moe.py
(the routing-aware quantized bounds, routers float), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0)
and the app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- kernels/moa.c (the attention experts weighed by their routing) against its scalar reference at odd sizes.
- The forward plan equals the per-op path bit for bit.
- What the family reads (q / o in the engine's layout, routers float at every weight type) and refuses by name.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.native import ffi, lib

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_jetmoe"
FOLDER = DIR / "jetmoe"
OLD = Path(__file__).parent / "fixtures" / "hf_moe_more" / "jetmoe"     # transformers 4.57's
F32_TOL = 1e-4


def test_transformers_457s_fixture_runs_too():
    ref = np.load(OLD / "reference.npz")
    err = rel_err(_load(OLD).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"position {err.argmax()} off by {err.max():.2e} of the range"


def _gate(fn, logits, k, n_kv, hd, att):
    T, E = logits.shape
    out = att.copy()
    rc = fn(ffi.cast("const float *", ffi.from_buffer(logits)), T, E, k, n_kv, hd,
            ffi.cast("float *", ffi.from_buffer(out)))
    return rc, out


@pytest.mark.parametrize("T, E, k, n_kv, hd", [(1, 3, 1, 1, 1), (7, 5, 2, 3, 13), (13, 9, 3, 2, 7),
                                               (5, 6, 6, 1, 17)])
def test_moa_gate_equals_its_scalar_reference_at_odd_sizes(T, E, k, n_kv, hd):
    rng = np.random.default_rng(T * 100 + E)
    logits = rng.standard_normal((T, E)).astype(np.float32)
    att = rng.standard_normal((T, n_kv, E, hd)).astype(np.float32)
    rc, got = _gate(lib.pt_moa_gate, logits, k, n_kv, hd, att)
    rc_ref, want = _gate(lib.pt_moa_gate_ref, logits, k, n_kv, hd, att)
    assert rc == rc_ref == 0
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    # and what it computes: the top k's softmax on the chosen experts, zero elsewhere
    top = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    w = np.zeros((T, E))
    sel = np.take_along_axis(logits.astype(np.float64), top, axis=1)
    g = np.exp(sel - sel.max(axis=1, keepdims=True))
    np.put_along_axis(w, top, g / g.sum(axis=1, keepdims=True), axis=1)
    np.testing.assert_allclose(got, att * w[:, None, :, None], rtol=2e-6, atol=1e-7)
    assert ((got == 0).all(axis=(1, 3)) == (w == 0)).all()          # the experts not chosen: exactly 0


def test_moa_gate_refuses_bad_arguments():
    logits, att = np.zeros((2, 4), np.float32), np.zeros((2, 1, 4, 3), np.float32)
    for k in (0, 5):
        assert _gate(lib.pt_moa_gate, logits, k, 1, 3, att)[0] == -1
        assert _gate(lib.pt_moa_gate_ref, logits, k, 1, 3, att)[0] == -1


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_the_plan_equals_the_per_op_path(weights):
    model = _load(FOLDER, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)


@pytest.mark.parametrize("weights", ["f32", "q8_0", "q4_0"])
def test_reads_the_mixture_of_attention_heads_routers_float(weights):
    cfg = json.loads((FOLDER / "config.json").read_text())
    E, KV, hd, D = cfg["num_local_experts"], cfg["num_key_value_heads"], cfg["kv_channels"], cfg["hidden_size"]
    net = _load(FOLDER, weights).net
    assert net.arch.num_attention_heads == E * KV and net.arch.head_dim == hd
    for L in net.layers:
        assert L.q.shape == (E * KV * hd, D) and L.o.shape == (D, E * KV * hd)
        assert L.moa_top_k == cfg["num_experts_per_tok"] and L.down_b is not None and L.o_b is not None
        assert L.moa_router.dtype == "f32" and L.moe.router.dtype == "f32"
        if weights != "f32":
            assert L.q.dtype == weights and L.moe.up[0].dtype == weights


def _variant(tmp_path, **change) -> Path:
    d = tmp_path / "jetmoe"
    shutil.copytree(FOLDER, d)
    cfg = json.loads((FOLDER / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, **change)))
    return d


def test_top_k_changes_the_logits(tmp_path):
    """num_experts_per_tok routes both the attention and the MLP (and num_attention_heads follows it)."""
    ref = np.load(FOLDER / "reference.npz")
    got = _load(_variant(tmp_path, num_experts_per_tok=1, num_attention_heads=2)).logits(ref["input_ids"])
    assert rel_err(got, ref["logits"]).max() > 0.05


@pytest.mark.parametrize("change, message", [
    (dict(activation_function="gelu"), "activation_function 'gelu' is not supported by the jetmoe family"),
    (dict(num_attention_heads=6), "num_attention_heads 6 is not num_key_value_heads x num_experts_per_tok"),
    (dict(num_experts_per_tok=7, num_attention_heads=14), "num_experts_per_tok 7 > num_local_experts 6"),
])
def test_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, **change))
