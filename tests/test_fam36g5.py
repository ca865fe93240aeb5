"""The fam36g group of issue 36 (tests/fixtures/hf5_fam36g, made by transformers 5.25): A.X-K1, Laguna (per-head
and per-value gates) and ZAYA, what tests/test_hf_parity.py (every position of the three prompts, greedy),
test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and test_moe.py (quantized routing) do not already
hold for every hf5 fixture.

- The greedy continuation with the cache equals transformers'; decoding and a chunked prefill equal the whole
  sequence; the forward plan equals the per-op path bit for bit (f32 / q8_0 weights, float32 and int8 KV caches,
  ZAYA's hybrid cache with its CCA state); a batch gives each sequence its own logits bit for bit.
- kernels/fam36g.c's two ops against float64 at odd sizes (the CCA over chunks, its state and its first position),
  the MoE's soft cap, caller's logits and skip expert, the affine norm kind.
- What each family reads (checkpoint and module names, A.X-K1 without a score correction bias, ZAYA's skip expert's
  bias as transformers 5.25 loads it), its defaults, what it reports and refuses by name; a converted `.petit` file
  reloads and runs the same numbers.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.models.families.mla import axk1
from petit.models.families.moe import laguna, zaya
from petit.models.blocks.decoder import Vec
from petit.models.blocks.moe import Moe
from petit.native import Weight, ffi, lib
from models import (assert_a_batch_gives_each_sequence_its_own_logits, assert_a_converted_file_runs_the_same_numbers,
                    assert_decoding_and_a_chunked_prefill_equal_the_whole, assert_the_plan_equals_the_per_op_path,
                    load_strict as _load, renamed_copy)
from test_moe_a5 import _read_safetensors, _write_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36g"
CASES = ["axk1", "laguna", "laguna_per_element", "zaya"]
EACH = pytest.mark.parametrize("case", CASES)


def p(a):
    return ffi.cast("float *", ffi.from_buffer(a))


def _config(case, **changes):
    d = json.loads((DIR / case / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


@EACH
def test_greedy_continuation_with_the_cache_equals_transformers(case):
    ref = np.load(DIR / case / "reference.npz")
    got = [s.token for s in petit.generate_tokens(_load(DIR / case), list(ref["input_ids"]), max_tokens=12)]
    assert got == list(ref["greedy"])


@EACH
def test_decoding_and_a_chunked_prefill_equal_the_whole_sequence(case):
    assert_decoding_and_a_chunked_prefill_equal_the_whole(_load(DIR / case),
                                                         np.load(DIR / case / "reference_long.npz")["input_ids"])


@EACH
@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "f32"), ("f32", "int8")])
def test_the_plan_equals_the_per_op_path(case, weights, kv):
    assert_the_plan_equals_the_per_op_path(_load(DIR / case, weights), kv)


@EACH
def test_a_batch_gives_each_sequence_its_own_logits_bit_for_bit(case):
    """A prefill beside a decode step: per-layer heads and gates (Laguna), the CCA's state per sequence (ZAYA)."""
    model = _load(DIR / case)
    assert_a_batch_gives_each_sequence_its_own_logits(model, np.load(DIR / case / "reference_chat.npz")["input_ids"])


@EACH
def test_converted_file_runs_the_same_numbers(tmp_path, case):
    assert_a_converted_file_runs_the_same_numbers(DIR / case, tmp_path)


def _renamed(tmp_path, case, rename=lambda k: k, change=lambda k, a: a, drop=()):
    return renamed_copy(DIR / case, tmp_path, rename, change, drop)


def _same_logits(folder, case):
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(folder).logits(ids), _load(DIR / case).logits(ids))


# ---- kernels ----

@pytest.mark.parametrize("act, T, n, width", [(0, 1, 3, 5), (1, 7, 5, 1), (1, 4, 3, 17), (0, 9, 6, 1)])
def test_the_head_gate_equals_a_float64_reference_at_odd_sizes(act, T, n, width):
    rng = np.random.default_rng(T * n + width)
    g = (rng.standard_normal((T, n)) * 6).astype(np.float32)
    g[0, 0] = 25.0                                      # past torch's softplus threshold: itself
    y = rng.standard_normal((T, n, width)).astype(np.float32)
    g64 = g.astype(np.float64)
    s = np.where(g64 > 20, g64, np.log1p(np.exp(np.minimum(g64, 20)))) if act else 1 / (1 + np.exp(-g64))
    want = y * s[:, :, None]
    assert lib.pt_head_gate(act, p(g), p(y), T, n, width) == 0
    np.testing.assert_allclose(y, want, rtol=3e-7, atol=1e-7)
    assert lib.pt_head_gate(2, p(g), p(y), T, n, width) == -1


def _cca64(q, k, v, dw, db, gw, gb, H, KV, hd, v0):
    """transformers' ZayaCCAProjection in float64 over a whole sequence (two zero rows before it)."""
    T, C, G, Vh = len(q), (H + KV) * hd, H // KV, KV * hd // 2
    X = np.concatenate([np.zeros((2, C)), np.concatenate([q, k], axis=1)])
    y1 = (X[:-1] * dw[:, 0] + X[1:] * dw[:, 1] + db).reshape(T + 1, H + KV, hd)
    w = gw.reshape(H + KV, hd, hd, 2)
    y2 = (np.einsum("tgi,goi->tgo", y1[:-1], w[..., 0]) + np.einsum("tgi,goi->tgo", y1[1:], w[..., 1])).reshape(T, C)
    y2 = y2 + gb
    qr = (q.reshape(T, H, hd) + np.repeat(k.reshape(T, KV, hd), G, axis=1)) * 0.5
    q_out = y2[:, :H * hd] + qr.reshape(T, -1)
    k_out = y2[:, H * hd:] + qr.reshape(T, KV, G, hd).mean(2).reshape(T, -1)
    first = np.zeros(Vh) if v0 is None else v0
    v_out = np.concatenate([v[:, :Vh], np.concatenate([first[None], v[:-1, Vh:]])], axis=1)
    return q_out, k_out, v_out


@pytest.mark.parametrize("H, KV, hd, T, splits, v0", [(1, 1, 2, 1, [1], False), (3, 1, 6, 9, [4, 5], True),
                                                      (4, 2, 6, 11, [1, 1, 9], True), (6, 3, 4, 13, [13], False),
                                                      (2, 2, 3, 7, [2, 1, 4], True)])
def test_the_cca_step_equals_a_float64_reference_over_chunks(H, KV, hd, T, splits, v0):
    """The sequence in chunks (the state carried between them) equals transformers' whole-sequence projection; a
    sequence started again at position 0 reads no stale state."""
    from petit.models.families.moe.cca import Cca
    rng = np.random.default_rng(H * 100 + T)
    C, Ck = (H + KV) * hd, KV * hd
    dw, db = rng.standard_normal((C, 2)), rng.standard_normal(C) * 0.3
    gw, gb = rng.standard_normal((C, hd, 2)) / np.sqrt(2 * hd), rng.standard_normal(C) * 0.3
    v0v = rng.standard_normal(Ck // 2) if v0 else None
    cca = Cca(H, KV, hd, dw, db, gw, gb, v0v, 0)
    q, k, v = (rng.standard_normal((T, n)).astype(np.float32) for n in (H * hd, Ck, Ck))
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)            # noqa: E731
    want = _cca64(*(a.astype(np.float64) for a in (q, k, v)), *(f64(a) for a in (dw, db, gw, gb)), H, KV, hd,
                  None if v0v is None else f64(v0v))
    for _ in range(2):                                  # the second time: the state holds the first run's rows
        qs, ks, vs = q.copy(), k.copy(), v.copy()
        state, vstate = np.full((2, C), 7.0, np.float32), np.full(Ck // 2, 7.0, np.float32)
        at = 0
        for n in splits:
            assert lib.pt_cca_step(cca.rec, p(qs[at:]), p(ks[at:]), p(vs[at:]), n, at, p(state), p(vstate)) == 0
            at += n
        for got, w in zip((qs, ks, vs), want):
            np.testing.assert_allclose(got, w, rtol=0, atol=2e-5 * np.abs(w).max())
        np.testing.assert_array_equal(state, np.concatenate([np.zeros((2, C), np.float32),
                                                             np.concatenate([q, k], axis=1)])[-2:])
        np.testing.assert_array_equal(vstate, v[-1, Ck // 2:])
    assert lib.pt_cca_step(cca.rec, p(q), p(k), p(v), 0, 0, p(state), p(vstate)) == -1


def _f32(rng, rows, cols, scale):
    a = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    return a, Weight(a.view(np.uint8).reshape(-1), "f32", (rows, cols))


def _swiglu(v, g, u, d):
    return ((v @ g.T) / (1 + np.exp(-(v @ g.T))) * (v @ u.T)) @ d.T


@pytest.mark.parametrize("T, E, k, D, F, cap", [(1, 3, 1, 17, 5, 2.0), (11, 5, 2, 37, 13, 4.0), (7, 6, 3, 33, 9, 0.5)])
def test_soft_capped_sigmoid_routing_equals_a_float64_reference_at_odd_sizes(T, E, k, D, F, cap):
    """Laguna's router: the top k of sigmoid(cap tanh(l / cap)) + bias, the chosen sigmoids renormalised."""
    rng = np.random.default_rng(T + E + D)
    router, rw = _f32(rng, E, D, 3.0 / np.sqrt(D))
    mats = [tuple(_f32(rng, *s, 1 / np.sqrt(s[1])) for s in ((F, D), (F, D), (D, F))) for _ in range(E)]
    bias = (rng.standard_normal(E) * 0.3).astype(np.float32)
    moe = Moe(rw, [m[0][1] for m in mats], [m[1][1] for m in mats], [m[2][1] for m in mats], k, True,
              scoring="sigmoid", sel_bias=Vec(bias), logit_softcap=cap)
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(p(x), T, p(y)) == 0
    x64 = x.astype(np.float64)
    s = 1 / (1 + np.exp(-cap * np.tanh(x64 @ router.T / cap)))
    top = np.argsort(-(s + bias), axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(s, top, axis=1)
    w /= w.sum(axis=1, keepdims=True)
    want = np.stack([sum(w[t, j] * _swiglu(x64[t], *(m[0] for m in mats[top[t, j]])) for j in range(k))
                     for t in range(T)])
    assert np.array_equal(moe.last_routing(T), np.sort(top, axis=1))
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_caller_logits_and_the_skip_expert_add_nothing():
    """ZAYA's Moe: the logits written before the call are routed (no router product), top 1 of softmax + bias
    weighed by its probability; a token taking the skip expert (the last) gets zeros."""
    rng = np.random.default_rng(5)
    E, D, F, T = 3, 19, 7, 6
    mats = [tuple(_f32(rng, *s, 1 / np.sqrt(s[1])) for s in ((F, D), (F, D), (D, F))) for _ in range(E)]
    out, ow = _f32(rng, E + 1, 4, 1.0)                 # the router MLP's output matrix, only for the record
    moe = Moe(ow, [m[0][1] for m in mats], [m[1][1] for m in mats], [m[2][1] for m in mats], 1, False,
              sel_bias=Vec(np.zeros(E + 1, np.float32)), n_zero=1, zero_skip=True, ext_logits=True)
    logits = (rng.standard_normal((T, E + 1)) * 2).astype(np.float32)
    logits[[1, 4], E] = 9.0                             # these two take the skip expert
    rec = moe.c(T)
    ffi.buffer(rec.logits, logits.nbytes)[:] = logits.tobytes()
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.full((T, D), np.nan, np.float32)
    assert moe.run(p(x), T, p(y)) == 0
    pr = np.exp(logits - logits.max(1, keepdims=True))
    pr /= pr.sum(1, keepdims=True)
    top = pr.argmax(1)
    assert list(moe.last_routing(T)[:, 0]) == list(top) and top[1] == top[4] == E
    for t in range(T):
        want = np.zeros(D) if top[t] == E else pr[t, top[t]] * _swiglu(x[t].astype(np.float64),
                                                                        *(m[0] for m in mats[top[t]]))
        np.testing.assert_allclose(y[t], want, rtol=0, atol=2e-5 * max(np.abs(want).max(), 1))


def test_the_affine_norm_kind_is_x_plus_b_times_w_per_row():
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 11), (2, 11), (2, 11)))
    y = np.zeros_like(x)
    assert lib.pt_norm(2, p(x), p(w), p(b), 0.0, 6, 11, 2, p(y)) == 0
    np.testing.assert_array_equal(y, (x + np.tile(b, (3, 1))) * np.tile(w, (3, 1)))
    assert lib.pt_norm(2, p(x), ffi.NULL, ffi.NULL, 0.0, 6, 11, 1, p(y)) == 0 and np.array_equal(y, x)
    assert lib.pt_norm(4, p(x), p(w), p(b), 0.0, 6, 11, 2, p(y)) == -1     # 3: fam36l's l2clip


# ---- A.X-K1 ----

def test_axk1_reads_its_layers():
    layers = _load(DIR / "axk1").net.layers
    assert [L.moe is not None for L in layers] == [False, True, True]
    assert [L.post_mlp_norm is not None for L in layers] == [False, True, True]
    assert all(L.moe.n_group == 4 and L.moe.topk_group == 2 and L.moe.sel_bias is not None for L in layers[1:])


def test_axk1_module_names_and_the_dense_layers_unused_norm(tmp_path):
    """The norm under transformers' module name (mlp.post_mlp_layernorm), and a dense layer's post_mlp_layernorm
    stored as the released files do (unused, unread, not reported): the same logits."""
    d = _renamed(tmp_path, "axk1", rename=lambda k: k.replace("post_mlp_layernorm", "mlp.post_mlp_layernorm"))
    raw = _read_safetensors(d / "model.safetensors")
    _write_safetensors(d / "model.safetensors", raw | {"model.layers.0.post_mlp_layernorm.weight": np.full(64, 9.0,
                                                                                                         np.float32)})
    _same_logits(d, "axk1")


def test_axk1_without_a_score_correction_bias_routes_on_the_sigmoids(tmp_path):
    """The released files have no e_score_correction_bias (transformers keeps it zero): as the bias zeroed."""
    gone = _renamed(tmp_path / "a", "axk1", drop={f"model.layers.{i}.mlp.gate.e_score_correction_bias"
                                                   for i in (1, 2)})
    zero = _renamed(tmp_path / "b", "axk1", change=lambda k, a: a * 0 if k.endswith("correction_bias") else a)
    ids = np.load(DIR / "axk1" / "reference.npz")["input_ids"]
    assert _load(gone).net.layers[1].moe.sel_bias is None
    np.testing.assert_array_equal(_load(gone).logits(ids), _load(zero).logits(ids))


def test_axk1_defaults_derive_the_routed_layers_as_transformers():
    d = {k: v for k, v in _config("axk1", num_hidden_layers=6).items() if k != "mlp_layer_types"}
    assert axk1.Config.from_dict(d).mlp_layer_types == ["dense"] + ["sparse"] * 5
    cfg = axk1.Config.from_dict(dict(d, first_k_dense_replace=2, moe_layer_freq=2))
    assert cfg.mlp_layer_types == ["dense", "dense", "sparse", "dense", "sparse", "dense"]
    m = axk1.Config.from_dict({})
    assert (m.n_routed_experts, m.num_experts_per_tok, m.n_group, m.topk_group, m.q_lora_rank) == (192, 8, 8, 4, 1536)


@pytest.mark.parametrize("changes, message", [
    (dict(q_lora_rank=None), "q_lora_rank null: A.X-K1's attention always has the low-rank query"),
    (dict(first_k_dense_replace=2), r"first_k_dense_replace 2 / moe_layer_freq 1 contradict mlp_layer_types"),
    (dict(num_local_experts=7), "num_local_experts 7 and n_routed_experts 8 disagree"),
    (dict(rope_interleave=False), "rope_interleave false"),
    (dict(attention_bias=True), "attention_bias / mlp_bias are not supported"),
])
def test_axk1_bad_configs_are_refused_by_name(changes, message):
    d = _config("axk1", **changes)
    if "q_lora_rank" in changes:
        d["q_lora_rank"] = None
    with pytest.raises(ValueError, match=message):
        axk1.Config.from_dict(d)


# ---- Laguna ----

def test_laguna_reads_each_layers_heads_gates_and_ropes():
    layers = _load(DIR / "laguna").net.layers
    net = _load(DIR / "laguna").net
    assert net.arch.num_attention_heads == 6 and [L.heads for L in layers] == [4, 0, 2, 4]
    assert [L.attn_gate.shape[0] for L in layers] == [4, 6, 2, 4]
    assert all(L.attn_gate_act == "softplus" and L.attn_gate_width == 16 for L in layers)
    assert [L.window for L in layers] == [8, 0, 8, 8] and layers[1].rope.dim == 8 and layers[0].rope.dim == 16
    assert layers[1].rope.kind == "yarn" and layers[0].rope is layers[2].rope
    assert layers[0].moe is None and all(L.moe.logit_softcap == 4.0 and L.moe.routed_scale == 2.0 for L in layers[1:])
    el = _load(DIR / "laguna_per_element").net.layers
    assert all(L.attn_gate.shape[0] == 64 and L.attn_gate_width == 1 for L in el)


def test_laguna_module_names_read_the_same(tmp_path):
    names = {"mlp.experts.e_score_correction_bias": "mlp.gate.e_score_correction_bias",
             "mlp.shared_expert.": "mlp.shared_experts."}

    def rename(k):
        for a, b in names.items():
            k = k.replace(a, b)
        return k
    _same_logits(_renamed(tmp_path, "laguna", rename=rename), "laguna")


def test_laguna_defaults_are_transformers():
    cfg = laguna.Config.from_dict({})
    assert cfg.types() == ["full_attention"] * 40 and cfg.mlp_layer_types == ["dense"] + ["sparse"] * 39
    assert cfg.num_attention_heads_per_layer == [48] * 40 and cfg.gating is True
    r = cfg.ropes()["full_attention"]
    assert (r.dim, r.base, r.kind) == (64, 500000.0, "default")


def test_laguna_reports_the_top_level_rope_keys_it_does_not_read():
    with pytest.warns(UserWarning, match=r"rope_theta \(laguna reads rope_parameters per layer type\)"):
        cfg = laguna.Config.from_dict(_config("laguna", rope_theta=1.0))
    assert cfg.ropes()["full_attention"].base == 10000.0


@pytest.mark.parametrize("changes, message", [
    (dict(moe_apply_router_weight_on_input=True), "moe_apply_router_weight_on_input true is not supported"),
    (dict(gating="per-row"), "gating 'per-row' is not one of"),
    (dict(num_attention_heads_per_layer=[4, 5, 2, 4]), "num_attention_heads_per_layer must list 4 positive multiples"),
    (dict(num_attention_heads_per_layer=[4, 4]), "num_attention_heads_per_layer must list 4"),
    (dict(mlp_layer_types=["dense"] * 3), "mlp_layer_types must list 4"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default"}}), "no rope_theta for the full_attention"),
    (dict(rope_types={"x": 1}), "rope_parameters and rope_types both given"),
    (dict(moe_router_logit_softcapping=-1.0), "moe_router_logit_softcapping must be >= 0"),
    (dict(hidden_act="gelu"), "hidden_act"),
])
def test_laguna_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        laguna.Config.from_dict(_config("laguna", **changes))


# ---- ZAYA ----

def test_zaya_reads_its_cca_router_and_residual_scales():
    net = _load(DIR / "zaya").net
    L = net.layers[1]
    assert net.arch.cache_slots == 6 and net.arch.state_layers == (3, 4, 5) and L.mix_qkv.slot == 4
    assert L.moe.ext_logits and L.moe.zero_skip and L.moe.n_zero == 1 and L.moe.top_k == 1
    assert L.pre_moe.scale is not None and net.layers[0].pre_moe.scale is None
    assert all(n.kind == "affine" for n in (*L.resid_alpha, L.post_attn_norm, L.post_mlp_norm, net.embed_norm))
    assert [x.window for x in net.layers] == [8, 0, 8] and L.rope.dim == 8
    assert net.lm_head is net.embed and net.lm_head_b is not None


def test_zaya_runs_the_skip_experts_bias_as_transformers_loads_it(tmp_path):
    """transformers 5.25 writes -1 over the stored balancing bias of the skip expert at every load; so does Petit."""
    d = _renamed(tmp_path, "zaya", change=lambda k, a: np.r_[a[:-1], 0.9] if k.endswith("balancing_biases") else a)
    assert _load(d).net.layers[0].moe.sel_bias.a[-1] == -1.0
    _same_logits(d, "zaya")


def test_zaya_defaults_are_transformers():
    cfg = zaya.Config.from_dict({})
    assert cfg.types() == ["hybrid"] * 40 and cfg.tie_word_embeddings and cfg.num_experts_per_tok == 1
    r = cfg.ropes()["hybrid"]
    assert (r.dim, r.base) == (64, 5_000_000.0) and "intermediate_size" not in cfg.to_dict()


def test_zaya_reads_the_released_configs_rope_type_beside_the_layer_types():
    rp = dict(_config("zaya")["rope_parameters"], rope_type="default")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert zaya.Config.from_dict(_config("zaya", rope_parameters=rp)).ropes()["hybrid"].dim == 8


def test_zaya_reports_intermediate_size_and_does_not_read_it():
    with pytest.warns(UserWarning, match=r"intermediate_size \(ZAYA has no dense MLP"):
        cfg = zaya.Config.from_dict(_config("zaya", intermediate_size=4096))
    assert cfg.intermediate_size == 32


@pytest.mark.parametrize("changes, message", [
    (dict(num_experts_per_tok=2), "num_experts_per_tok 2: ZAYA routes each token to one expert"),
    (dict(cca_time0=3), "cca_time0 3 is not supported"),
    (dict(sliding_window=None), "hybrid_sliding layers but sliding_window is null"),
    (dict(layer_types=["hybrid", "full_attention", "hybrid"]), "layer_types must list 3 values of hybrid"),
    (dict(hidden_act="gelu"), "hidden_act"),
])
def test_zaya_bad_configs_are_refused_by_name(changes, message):
    d = _config("zaya", **changes)
    if "sliding_window" in changes:
        d["sliding_window"] = None
    with pytest.raises(ValueError, match=message):
        zaya.Config.from_dict(d)
