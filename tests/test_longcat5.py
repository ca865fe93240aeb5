"""The longcat group of issue 30 (tests/fixtures/hf5_longcat: LongCat-Flash, made by transformers 5.25): what
tests/test_hf_parity.py (35-token prompt, greedy), test_moe.py (the routing-aware quantized bounds, routers float),
test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and the app's chat test do not already hold for every
hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- kernels/moe.c's zero-computation experts (pt_moe.n_zero) against a float64 reference at odd sizes, exact when a
  token chose only those.
- The forward plan equals the per-op path bit for bit (the shortcut MoE held across two layers in both).
- What the family reads (two Petit layers per LongCat layer, routers float at every weight type), both spellings
  of the aliased config keys, and what it refuses by name.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.models.blocks.moe import Moe
from petit.native import Weight, ffi

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

FOLDER = Path(__file__).parent / "fixtures" / "hf5_longcat" / "longcat_flash"


def _f32(rng, rows, cols, scale):
    a = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    return a, Weight(a.view(np.uint8).reshape(-1), "f32", (rows, cols))


def _longcat64(x, router, bias, experts, k, scale):
    """LongCat-Flash's MoE in float64: softmax over real + zero experts, the top k of softmax + bias (ties: the lower
    expert), weights softmax x scale; a real expert's SwiGLU output, a zero one's input, times its weight."""
    x = x.astype(np.float64)
    lg = x @ router.T.astype(np.float64)
    p = np.exp(lg - lg.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top = np.argsort(-(p + bias), axis=1, kind="stable")[:, :k]
    out = np.zeros_like(x)
    for t in range(len(x)):
        for e in top[t]:
            w = p[t, e] * scale
            if e >= len(experts):
                out[t] += w * x[t]
                continue
            g, u, d = (m.astype(np.float64) for m in experts[e])
            h = x[t] @ g.T
            out[t] += w * ((h / (1 + np.exp(-h)) * (x[t] @ u.T)) @ d.T)
    return out, top


@pytest.mark.parametrize("T, E, Z, k, D, F", [(1, 3, 1, 1, 17, 5), (11, 5, 3, 2, 37, 13), (7, 6, 2, 3, 33, 9),
                                              (13, 4, 4, 4, 19, 7)])
def test_zero_computation_experts_equal_a_float64_reference_at_odd_sizes(T, E, Z, k, D, F):
    rng = np.random.default_rng(T * 1000 + E * 10 + Z)
    router, rw = _f32(rng, E + Z, D, 3.0 / np.sqrt(D))
    mats = [(_f32(rng, F, D, 1 / np.sqrt(D)), _f32(rng, F, D, 1 / np.sqrt(D)), _f32(rng, D, F, 1 / np.sqrt(F)))
            for _ in range(E)]
    bias = (rng.standard_normal(E + Z) * 0.1).astype(np.float32)
    from petit.models.blocks.decoder import Vec
    moe = Moe(rw, [g[1] for g, _, _ in mats], [u[1] for _, u, _ in mats], [d[1] for _, _, d in mats], k, False,
              sel_bias=Vec(bias), routed_scale=6.0, n_zero=Z)
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), T, ffi.cast("float *", ffi.from_buffer(y))) == 0
    want, top = _longcat64(x, router, bias.astype(np.float64), [(g[0], u[0], d[0]) for g, u, d in mats], k, 6.0)
    assert np.array_equal(moe.last_routing(T), np.sort(top, axis=1))
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())
    assert (top >= E).any()                                     # a zero-computation expert was chosen somewhere


def test_a_token_routed_to_zero_experts_only_is_its_input_times_the_weights_exactly():
    rng = np.random.default_rng(5)
    D, F, E, Z = 21, 7, 3, 2
    router = np.zeros((E + Z, D), np.float32)
    rw = Weight(router.view(np.uint8).reshape(-1), "f32", router.shape)
    mats = [tuple(_f32(rng, *s, 0.3)[1] for s in ((F, D), (F, D), (D, F))) for _ in range(E)]
    from petit.models.blocks.decoder import Vec
    bias = np.array([0, 0, 0, 1, 1], np.float32)               # equal softmax (1/5 each): the zero experts win
    moe = Moe(rw, [m[0] for m in mats], [m[1] for m in mats], [m[2] for m in mats], 2, False, sel_bias=Vec(bias),
              routed_scale=6.0, n_zero=Z)
    x = rng.standard_normal((3, D)).astype(np.float32)
    y = np.full((3, D), np.nan, np.float32)
    before = moe.matrices_used
    assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), 3, ffi.cast("float *", ffi.from_buffer(y))) == 0
    assert moe.matrices_used == before                          # no expert matrix read
    w = np.float32(0.2) * np.float32(6.0)
    assert np.array_equal(y, x * (w + w))


def test_bad_zero_expert_counts_are_refused():
    rng = np.random.default_rng(1)
    _, rw = _f32(rng, 3, 8, 1.0)
    mats = [tuple(_f32(rng, *s, 0.3)[1] for s in ((4, 8), (4, 8), (8, 4))) for _ in range(3)]
    x, y = np.zeros((1, 8), np.float32), np.zeros((1, 8), np.float32)
    for z in (-1, 3):                   # negative; or every router row a zero expert
        moe = Moe(rw, [m[0] for m in mats], [m[1] for m in mats], [m[2] for m in mats], 1, False, n_zero=0)
        moe.c(1).n_zero = z
        assert moe.run(ffi.cast("float *", ffi.from_buffer(x)), 1, ffi.cast("float *", ffi.from_buffer(y))) == -1


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_the_plan_equals_the_per_op_path(weights):
    model = _load(FOLDER, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)


@pytest.mark.parametrize("weights", ["f32", "q8_0", "q4_0"])
def test_reads_two_layers_per_longcat_layer_and_the_routers_float(weights):
    cfg = json.loads((FOLDER / "config.json").read_text())
    E, Z, D = cfg["n_routed_experts"], cfg["zero_expert_num"], cfg["hidden_size"]
    net = _load(FOLDER, weights).net
    assert len(net.layers) == 2 * cfg["num_layers"] and net.arch.shortcut
    for i, L in enumerate(net.layers):
        assert L.mla is not None and L.gate.shape == (cfg["ffn_hidden_size"], D)
        assert L.moe_shortcut == (i % 2 == 0) and L.add_shortcut == (i % 2 == 1)
        if i % 2 == 0:
            assert L.moe.router.dtype == "f32" and L.moe.router.shape == (E + Z, D) and L.moe.n_zero == Z
            assert len(L.moe.up) == E and L.moe.routed_scale == cfg["routed_scaling_factor"]
            if weights != "f32":
                assert L.moe.up[0].dtype == weights and L.mla.q_a.dtype == weights
        else:
            assert L.moe is None


def _variant(tmp_path, drop=(), **change) -> Path:
    d = tmp_path / "longcat_flash"
    shutil.copytree(FOLDER, d)
    cfg = json.loads((FOLDER / "config.json").read_text())
    for k in drop:
        cfg.pop(k)
    (d / "config.json").write_text(json.dumps(dict(cfg, **change)))
    return d


def test_both_spellings_of_the_aliased_keys_give_the_same_model(tmp_path):
    ref = np.load(FOLDER / "reference.npz")
    cfg = json.loads((FOLDER / "config.json").read_text())
    d = _variant(tmp_path, drop=("n_routed_experts", "moe_topk", "ffn_hidden_size", "expert_ffn_hidden_size",
                                 "num_layers"),
                 num_local_experts=cfg["n_routed_experts"], num_experts_per_tok=cfg["moe_topk"],
                 intermediate_size=cfg["ffn_hidden_size"], moe_intermediate_size=cfg["expert_ffn_hidden_size"],
                 num_hidden_layers=2 * cfg["num_layers"])
    got = _load(d).logits(ref["input_ids"])
    assert np.array_equal(got, _load(FOLDER).logits(ref["input_ids"]))


def test_top_k_and_the_zero_experts_change_the_logits(tmp_path):
    ref = np.load(FOLDER / "reference.npz")
    got = _load(_variant(tmp_path, moe_topk=1)).logits(ref["input_ids"])
    assert rel_err(got, ref["logits"]).max() > 0.05


@pytest.mark.parametrize("change, message", [
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the longcat_flash family"),
    (dict(head_dim=8), "head_dim 8 differs from qk_rope_head_dim 16"),
    (dict(attention_bias=True), "attention_bias true is not supported by the longcat_flash family"),
    (dict(moe_topk=9), "moe_topk 9 exceeds n_routed_experts \\+ zero_expert_num \\(8\\)"),
    (dict(num_hidden_layers=3), "num_hidden_layers 3 is not 2 x num_layers \\(4\\)"),
    (dict(num_local_experts=5), "num_local_experts 5 and n_routed_experts 6 disagree"),
    (dict(qk_head_dim=20), "qk_head_dim 20 is not qk_nope_head_dim \\+ qk_rope_head_dim"),
])
def test_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, **change))
