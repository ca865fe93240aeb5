"""The fam36m group of issue 36 (tests/fixtures/hf5_fam36m, made by transformers 5.25): A.X-K2, Ling 3 and HY-V4, what
tests/test_hf_parity.py (every position of the three prompts, greedy), test_verify_families.py (`petit verify` at f32
/ q8_0 / q4_0) and test_moe.py (quantized routing) do not already hold for every hf5 fixture.

- Decoding and a chunked prefill equal the whole sequence; the forward plan equals the per-op path bit for bit (f32 /
  q8_0 weights, float32 and int8 KV caches); a batch gives each sequence its own logits bit for bit; a converted
  `.petit` file runs the same numbers.
- The kernels' new modes against float64 at odd sizes: A.X-K2's gated norm (petit/models/blocks/norm_gate.py), its routing
  that scores the other groups' experts 0 (Moe.group_fill_zero), the experts' SwiGLU clamps after the activation and
  the shared expert's own (Moe.limit_after_act, sh_swiglu_limit), DSA's attention with sinks, HY-V4's
  hyper-connection (pt_hc_ind_pre); KDA's bounded forget gate is tests/test_hybrid5.py's KDA test.
- What each family reads (the released names and the modules'), its defaults, its refusals by message.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.hybrid import bailing_hybrid

from petit.models.families.mla import axk2, hy_v4
from petit.models.blocks.decoder import Norm, Vec
from petit.models.blocks.moe import Moe
from petit.models.blocks.norm_gate import NormGate
from petit.native import lib
from models import (assert_a_batch_gives_each_sequence_its_own_logits, assert_a_converted_file_runs_the_same_numbers,
                    assert_decoding_and_a_chunked_prefill_equal_the_whole,
                    assert_the_plan_equals_the_per_op_path, load_strict as _load, renamed_copy)
from test_fam36g5 import _f32, p
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_mla5 import _dsa_attention, _dsa_index

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36m"
CASES = ["axk2", "bailing_hybrid", "hy_v4"]
EACH = pytest.mark.parametrize("case", CASES)


def _config(case, **changes):
    d = json.loads((DIR / case / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


@EACH
def test_decoding_a_chunked_prefill_and_a_batch_give_the_whole_sequences_logits(case):
    """Decode steps and chunks of 13 within 1e-5 of the whole sequence; a prefill beside a decode step in one batch
    gives each its own logits bit for bit (tests/models.py)."""
    model, prompts = _load(DIR / case), {n: np.load(DIR / case / f"reference_{n}.npz")["input_ids"]
                                         for n in ("long", "chat")}
    assert_decoding_and_a_chunked_prefill_equal_the_whole(model, prompts["long"])
    assert_a_batch_gives_each_sequence_its_own_logits(model, prompts["chat"])


@EACH
@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "f32"), ("f32", "int8")])
def test_the_plan_equals_the_per_op_path_and_a_converted_file_the_folder(case, weights, kv, tmp_path):
    assert_the_plan_equals_the_per_op_path(_load(DIR / case, weights), kv)
    if weights == "q8_0":
        assert_a_converted_file_runs_the_same_numbers(DIR / case, tmp_path)


def _same_logits(folder, case):
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(folder).logits(ids), _load(DIR / case).logits(ids))


# ---- kernels ----

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("T, D, r", [(1, 5, 1), (7, 33, 3), (4, 64, 16)])
def test_the_gated_norm_equals_a_float64_reference_at_odd_sizes(T, D, r):
    """y = RMSNorm(x) w, y sigmoid(up silu(down y)): op by op (Norm.__call__) and as plan ops (tests/test_plan.py
    holds the two paths together on the fixture)."""
    rng = np.random.default_rng(T * D + r)
    down, dw = _f32(rng, r, D, 1.0 / np.sqrt(D))
    up, uw = _f32(rng, D, r, 2.0 / np.sqrt(r))
    w = (1 + 0.2 * rng.standard_normal(D)).astype(np.float32)
    n = Norm("rms", 1e-6, Vec(w), gate=NormGate(dw, uw))
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros_like(x)
    assert n(p(x), T, D, p(y)) == 0
    x64 = x.astype(np.float64)
    z = x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-6) * w
    h = z @ down.T
    want = z * _sigmoid((h * _sigmoid(h)) @ up.T)
    np.testing.assert_allclose(y, want, rtol=0, atol=3e-6 * np.abs(want).max())


def _moe64(x, router, mats, k, bias, *, groups=0, topk_group=0, fill=-np.inf, limit=0.0, after=False,
           shared=None, sh_limit=0.0, scale=1.0):
    """transformers' sigmoid routing + bias (DeepSeek-V3's groups: a group's best two summed, the others `fill`),
    the chosen sigmoids renormalised x scale, SwiGLU experts clamped (gate <= limit and |up| <= limit before silu,
    or silu(gate) <= limit after it), plus a shared expert with its own clamp."""
    s = _sigmoid(x @ router.T)
    c = s + bias
    if groups:
        g = c.reshape(len(c), groups, -1)
        best = np.argsort(-np.sort(g, 2)[:, :, -2:].sum(2), 1, kind="stable")[:, :topk_group]
        keep = np.zeros(g.shape[:2], bool)
        np.put_along_axis(keep, best, True, 1)
        c = np.where(np.repeat(keep, g.shape[2], 1), c, fill)
    top = np.argsort(-c, 1, kind="stable")[:, :k]
    w = np.take_along_axis(s, top, 1)
    w = w / w.sum(1, keepdims=True) * scale

    def glu(v, gate, up, down, lim):
        a, u = v @ gate.T, v @ up.T
        if lim > 0:
            u = np.clip(u, -lim, lim)
            a = np.minimum(a * _sigmoid(a), lim) if after else np.minimum(a, lim)
            return (a if after else a * _sigmoid(a)) * u @ down.T
        return a * _sigmoid(a) * u @ down.T
    out = np.stack([sum(w[t, j] * glu(x[t], *mats[top[t, j]], limit) for j in range(k)) for t in range(len(x))])
    if shared is not None:
        out = out + np.stack([glu(x[t], *shared, sh_limit) for t in range(len(x))])
    return out, np.sort(top, 1)


def _experts(rng, E, D, F):
    mats = [tuple(_f32(rng, *s, 1.5 / np.sqrt(s[1])) for s in ((F, D), (F, D), (D, F))) for _ in range(E)]
    return [tuple(m[0] for m in e) for e in mats], [[e[i][1] for e in mats] for i in range(3)]


@pytest.mark.parametrize("T, E, G, kg, k, D, F", [(9, 8, 4, 2, 2, 17, 5), (13, 12, 3, 1, 3, 33, 7)])
def test_grouped_routing_scoring_the_other_groups_0_equals_a_float64_reference(T, E, G, kg, k, D, F):
    """A.X-K2's router: outside the topk_group best groups an expert scores 0 for the choice (not -inf), so with
    negative selection biases it can beat a chosen group's expert."""
    rng = np.random.default_rng(T + E)
    router, rw = _f32(rng, E, D, 3.0 / np.sqrt(D))
    arrays, (g, u, d) = _experts(rng, E, D, F)
    bias = (rng.standard_normal(E) * 0.2 - 0.7).astype(np.float32)
    x = rng.standard_normal((T, D)).astype(np.float32)
    for fill_zero in (True, False):
        moe = Moe(rw, g, u, d, k, True, scoring="sigmoid", sel_bias=Vec(bias), n_group=G, topk_group=kg,
                  group_score="top2_sum", routed_scale=2.5, group_fill_zero=fill_zero)
        y = np.zeros((T, D), np.float32)
        assert moe.run(p(x), T, p(y)) == 0
        want, top = _moe64(x.astype(np.float64), router, arrays, k, bias, groups=G, topk_group=kg,
                           fill=0.0 if fill_zero else -np.inf, scale=2.5)
        assert np.array_equal(moe.last_routing(T), top)
        np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())
    assert not np.array_equal(top, _moe64(x.astype(np.float64), router, arrays, k, bias, groups=G, topk_group=kg,
                                          fill=0.0)[1])      # the case chosen so that the two choices differ


@pytest.mark.parametrize("after, limit, sh_limit", [(True, 0.7, 0.0), (True, 0.5, 0.9), (False, 0.6, 0.0),
                                                   (False, 0.6, None)])
def test_clamped_experts_equal_a_float64_reference(after, limit, sh_limit):
    """Ling 3's clamp after the activation (Step3p7's limit_after_act), with the shared expert's own limit (0: none);
    DeepSeek-V4's before it; sh_swiglu_limit None: the shared expert clamped as the routed ones (DeepSeek-V4)."""
    rng = np.random.default_rng(int(after) * 10 + int(limit * 10))
    T, E, k, D, F = 11, 6, 2, 29, 9
    router, rw = _f32(rng, E, D, 3.0 / np.sqrt(D))
    arrays, (g, u, d) = _experts(rng, E, D, F)
    shared = tuple(_f32(rng, *s, 1.5 / np.sqrt(s[1])) for s in ((F, D), (F, D), (D, F)))
    bias = (rng.standard_normal(E) * 0.3).astype(np.float32)
    moe = Moe(rw, g, u, d, k, True, shared=tuple(s[1] for s in shared), scoring="sigmoid", sel_bias=Vec(bias),
              swiglu_limit=limit, limit_after_act=after, sh_swiglu_limit=sh_limit)
    x = (rng.standard_normal((T, D)) * 2).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(p(x), T, p(y)) == 0
    want, top = _moe64(x.astype(np.float64), router, arrays, k, bias, limit=limit, after=after,
                       shared=tuple(s[0] for s in shared), sh_limit=limit if sh_limit is None else sh_limit)
    assert np.array_equal(moe.last_routing(T), top)
    np.testing.assert_allclose(y, want, rtol=0, atol=3e-5 * np.abs(want).max())
    unclamped, _ = _moe64(x.astype(np.float64), router, arrays, k, bias, shared=tuple(s[0] for s in shared))
    assert np.abs(unclamped - want).max() > 0.05 * np.abs(want).max()     # the clamps do something here


@pytest.mark.parametrize("n_ctx, pos0, T, heads, stride, top_k, hd", [(53, 7, 29, 3, 41, 11, 23),
                                                                      (97, 0, 97, 5, 77, 31, 57),
                                                                      (301, 300, 1, 7, 19, 129, 9)])
def test_dsa_attention_with_sinks_equals_its_reference_and_float64(n_ctx, pos0, T, heads, stride, top_k, hd):
    """HY-V4's sinks in DeepSeek Sparse Attention: one more logit a head in each query's softmax over its chosen
    positions, its share dropped (the chosen positions: the indexer's, as tests/test_mla5.py makes them)."""
    rng = np.random.default_rng(n_ctx + T)
    rows = rng.standard_normal((n_ctx, stride)).astype(np.float32)
    q, w = rng.standard_normal((T, heads, 13)).astype(np.float32), rng.standard_normal((T, heads)).astype(np.float32)
    rows[:, :13] = rng.standard_normal((n_ctx, 13))
    sel, n_sel = _dsa_index(lib.pt_dsa_index, q, w, rows, None, stride, 0, pos0, T, top_k)
    qa = rng.standard_normal((T, heads, stride)).astype(np.float32)
    sinks = (rng.standard_normal(heads) * 2).astype(np.float32)
    sinks[0] = 40.0                                     # above every score: the other branch of the rescaling
    got = _dsa_attention(lib.pt_dsa_attention, qa, rows, None, pos0, hd, sel, n_sel, top_k, sinks)
    ref = _dsa_attention(lib.pt_dsa_attention_ref, qa, rows, None, pos0, hd, sel, n_sel, top_k, sinks)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)
    for t in range(T):
        r = rows[sel[t, :n_sel[t]], :hd].astype(np.float64)
        for h in range(heads):
            s = r @ qa[t, h, :hd] * 0.3
            m = max(s.max(), sinks[h])
            e = np.exp(s - m)
            np.testing.assert_allclose(got[t, h, :hd], e @ r / (e.sum() + np.exp(sinks[h] - m)), rtol=0, atol=1e-5)


def _hc_ind(fn_c, X, fn, base, scale, magnitude, eps=1e-6, norm_eps=1e-5):
    T, n, D = X.shape
    x_out, post, comb = np.zeros((T, D), np.float32), np.zeros((T, n), np.float32), np.full((T, n, n), 7, np.float32)
    rc = fn_c(p(X), p(fn), p(base), p(scale), T, n, D, eps, norm_eps, magnitude, p(x_out), p(post), p(comb))
    return rc, x_out, post, comb


@pytest.mark.parametrize("T, n, D", [(1, 1, 1), (3, 3, 7), (5, 4, 33), (2, 7, 65)])
def test_hy_v4s_hyper_connection_equals_its_reference_and_float64(T, n, D):
    """pre = sigmoid(m[:n] s0 + b) + eps, post = magnitude sigmoid(m[n:] s1 + b) + eps, m = fn . X / rms(X); the
    block's input sum_j pre_j X_j; comb the identity, so pt_hc_post gives X + post y."""
    rng = np.random.default_rng(T * 100 + n * 10 + D)
    X = rng.standard_normal((T, n, D)).astype(np.float32)
    fn = (rng.standard_normal((2 * n, n * D)) * 1.2 / np.sqrt(n * D)).astype(np.float32)
    base, scale = (rng.standard_normal(2 * n) * 0.5).astype(np.float32), np.array([0.9, 1.3], np.float32)
    got, ref = (_hc_ind(f, X, fn, base, scale, 2.0) for f in (lib.pt_hc_ind_pre, lib.pt_hc_ind_pre_ref))
    assert got[0] == ref[0] == 0
    for a, b in zip(got[1:], ref[1:]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    X64 = X.astype(np.float64).reshape(T, -1)
    m = X64 @ fn.T.astype(np.float64) / np.sqrt((X64 ** 2).mean(1, keepdims=True) + 1e-5)
    pre = _sigmoid(m[:, :n] * scale[0] + base[:n]) + 1e-6
    np.testing.assert_allclose(got[1], (pre[:, :, None] * X.astype(np.float64)).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], 2.0 * _sigmoid(m[:, n:] * scale[1] + base[n:]) + 1e-6, rtol=1e-5, atol=1e-6)
    assert np.array_equal(got[3], np.broadcast_to(np.eye(n, dtype=np.float32), (T, n, n)))
    y = rng.standard_normal((T, D)).astype(np.float32)
    out = np.zeros_like(X)
    assert lib.pt_hc_post(p(X), p(y), p(got[2]), p(got[3]), T, n, D, p(out)) == 0
    np.testing.assert_array_equal(out, got[2][:, :, None] * y[:, None, :] + X)


# ---- A.X-K2 ----

def test_axk2_reads_its_gated_norms_fused_query_and_groups():
    layers = _load(DIR / "axk2").net.layers
    assert [L.moe is not None for L in layers] == [False, True]
    assert all(L.attn_norm.gate is not None and L.mla.q_cat and L.mla.gate.shape == (4 * 48, 64) for L in layers)
    assert layers[0].mlp_norm.gate is None and layers[1].mlp_norm.gate.down.shape == (8, 64)
    m = layers[1].moe
    assert (m.n_group, m.topk_group, m.group_fill_zero, m.routed_scale) == (4, 2, True, 2.5)
    assert all(L.mla.dsa.top_k == 12 and L.mla.dsa.n_heads == 16 for L in layers)


def test_axk2_module_names_read_the_same(tmp_path):
    """transformers' module names (q_gate_proj, the gate MLPs' mlp.fc1 / fc2) for the released ones."""
    names = {"W_down": "mlp.fc1", "W_up": "mlp.fc2", "self_attn.q_b_proj.": "self_attn.q_gate_proj."}

    def rename(k):
        for a, b in names.items():
            k = k.replace(a, b)
        return k
    _same_logits(renamed_copy(DIR / "axk2", tmp_path, rename), "axk2")


def test_axk2_defaults_are_transformers():
    cfg = axk2.Config.from_dict({})
    assert (cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.n_group, cfg.topk_group, cfg.q_lora_rank,
            cfg.gated_norm_rank, cfg.index_n_heads, cfg.index_topk) == (128, 8, None, None, 384, 16, 16, 2048)
    assert cfg.mlp_layer_types == ["dense"] + ["sparse"] * 47 and cfg.routed_scaling_factor == 2.5
    d = {k: v for k, v in _config("axk2", num_hidden_layers=6).items() if k not in ("mlp_layer_types", "layer_types")}
    assert axk2.Config.from_dict(dict(d, first_k_dense_replace=2, moe_layer_freq=2)).mlp_layer_types == \
        ["dense", "dense", "sparse", "dense", "sparse", "dense"]
    assert axk2.Config.from_dict(dict(_config("axk2"), num_local_experts=8)).n_routed_experts == 8


AXK2_REFUSALS = [
    (dict(n_group=None), "n_group None and topk_group 2 must be set together"),
    (dict(q_lora_rank=None), "q_lora_rank must be set for axk2"),
    (dict(first_k_dense_replace=0), r"first_k_dense_replace 0 / moe_layer_freq 1 contradict mlp_layer_types"),
    (dict(gated_norm_rank=0), "gated_norm_rank must be a positive integer"),
    (dict(layer_types=["full_attention"] * 2), "layer_types must list 2 values, each indexed_attention"),
    (dict(attention_bias=True), "attention_bias / mlp_bias are not supported"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported"),
]


# ---- Ling 3 ----

def test_bailing_hybrid_reads_its_layers():
    net = _load(DIR / "bailing_hybrid").net
    L = net.layers
    assert [x.mamba is not None for x in L] == [True, False, True, False]
    assert all(x.mamba.kda == 1 and x.mamba.kda_lower_bound == -5.0 for x in L[::2])
    assert all(x.mla.gate.shape == (4, 64) and x.mla.gate_x and x.mla.gate_width == 0 for x in L[1::2])
    assert all(x.rope is not None and x.rope.interleaved and x.rope.dim == 16 for x in L[1::2])
    assert L[0].moe is None and all((x.moe.n_group, x.moe.topk_group, x.moe.limit_after_act) == (4, 2, True)
                                    for x in L[1:])
    assert [(x.moe.swiglu_limit, x.moe.sh_swiglu_limit) for x in L[1:]] == [(1.0, 0.0), (0.0, 0.0), (0.8, 0.9)]
    assert net.arch.state_layers == (0, 2)


def test_bailing_hybrid_module_names_read_the_same(tmp_path):
    """transformers' module names (the conversion mapping applied: embed_tokens, self_attn, o_proj, the forget gate's
    module, one conv1d, e_score_correction_bias) for the released ones."""
    raw = _read_safetensors(DIR / "bailing_hybrid" / "model.safetensors")
    out = {}
    for k, a in raw.items():
        k = bailing_hybrid.module_name(k)
        for n in ("f_proj.", "dt_bias", "A_log"):
            k = k.replace(".self_attn." + n, ".self_attn.forget_gate." + n)
        out[k] = a
    for i in (0, 2):
        a = f"model.layers.{i}.self_attn."
        out[a + "conv1d.weight"] = np.concatenate([out.pop(a + f"{n}_conv1d.weight") for n in "qkv"])
    d = renamed_copy(DIR / "bailing_hybrid", tmp_path)
    _write_safetensors(d / "model.safetensors", out)
    _same_logits(d, "bailing_hybrid")


def test_bailing_hybrid_defaults_are_transformers():
    cfg = bailing_hybrid.Config.from_dict({})
    assert cfg.layer_types == (["linear_attention"] * 5 + ["full_attention"]) * 7
    assert cfg.mlp_layer_types == ["dense"] * 2 + ["sparse"] * 40
    assert (cfg.linear_head_dim, cfg.linear_num_heads, cfg.linear_conv_kernel_dim) == (128, 32, 4)
    assert (cfg.num_experts, cfg.num_experts_per_token, cfg.num_expert_group, cfg.topk_group, cfg.rope_theta,
            cfg.kda_safe_gate, cfg.kda_lower_bound) == (512, 8, 8, 4, 6e6, True, -5.0)
    assert cfg.expert_swiglu_limit_list == [0.0] * 42 and cfg.q_lora_rank is None
    d = _config("bailing_hybrid", swiglu_limits=[0, 2, 0, 0], n_group=1)
    d.pop("expert_swiglu_limit_list")
    d.pop("num_expert_group")
    cfg = bailing_hybrid.Config.from_dict(d)
    assert cfg.expert_swiglu_limit_list == [0, 2, 0, 0] and cfg.num_expert_group == 1


BAILING_REFUSALS = [
    (dict(linear_head_dim=32), "linear_head_dim 32 but head_dim 16: transformers 5.25 takes linear_head_dim from"),
    (dict(expert_swiglu_limit_list=[0, 1]), "expert_swiglu_limit_list must list 4 limits"),
    (dict(share_expert_swiglu_limit_list=[0, -1, 0, 0]), "share_expert_swiglu_limit_list must list 4 limits >= 0"),
    (dict(kda_lower_bound=1.0), "kda_lower_bound must be a negative number"),
    (dict(topk_group=5), "num_experts 8 in num_expert_group 4 groups, topk_group 5 of them"),
    (dict(layer_types=["linear_attention"] * 3), "layer_types must list 4 values"),
    (dict(attention_bias=True), "attention_bias true is not supported by the bailing_hybrid family"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the bailing_hybrid family"),
]


# ---- HY-V4 ----

def test_hy_v4_reads_its_streams_sinks_gates_and_shared_indexer():
    net = _load(DIR / "hy_v4").net
    L = net.layers
    assert net.n == 3 and net.magnitude == 1.7 and len(net.hc) == 3 and net.hc[0][0].fn.a.shape == (6, 192)
    assert net.hc_head.fn.a.shape == (3, 192) and net.hc_head.scale.a.shape == (1,)
    assert all(x.sinks.a.shape == (4,) and x.mla.gate.shape == (192, 64) and x.mla.gate_x for x in L)
    assert [x.mla.dsa.shared for x in L] == [False, False, True] and L[2].mla.dsa.source is L[1].mla.dsa
    assert L[0].mla.dsa.k_norm.eps == 1e-5 and L[0].mla.dsa.rope.interleaved
    assert L[0].moe is None and all((x.moe.swiglu_limit, x.moe.sh_swiglu_limit) == (1.0, 0.0) for x in L[1:])


def test_hy_v4_module_names_read_the_same(tmp_path):
    """transformers' module names (attn_hc.fn, hc_head.hc_fn, sinks, gate_proj) for the released ones."""
    _same_logits(renamed_copy(DIR / "hy_v4", tmp_path, hy_v4.module_name), "hy_v4")


def test_hy_v4_defaults_are_transformers():
    cfg = hy_v4.Config.from_dict({})
    assert cfg.indexer_types[:6] == ["full", "full", "shared", "shared", "shared", "full"]
    assert cfg.mlp_layer_types == ["dense"] + ["sparse"] * 33 and cfg.num_key_value_heads == 32
    assert (cfg.hc_mult, cfg.hc_magnitude, cfg.hc_eps, cfg.swiglu_limit, cfg.routed_scaling_factor, cfg.n_group,
            cfg.index_topk, cfg.index_n_heads, cfg.rms_norm_eps) == (4, 2.0, 1e-6, 10.0, 2.827, 1, 2048, 16, 1e-5)
    assert (cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim) == \
        (1536, 512, 192, 64, 256)


HY_V4_REFUSALS = [
    (dict(indexer_types=["shared", "full", "full"]), "indexer_types must list 3 values, each 'full' or 'shared'"),
    (dict(hc_mult=17), "hc_mult 17 is above the 16 streams"),
    (dict(swiglu_limit=0.0), "swiglu_limit must be a positive number"),
    (dict(hc_eps=-1.0), "hc_eps must be a number >= 0"),
    (dict(q_lora_rank=None), "q_lora_rank must be set for hy_v4"),
    (dict(layer_types=["full_attention"] * 3), "layer_types must list 3 values, each indexed_attention"),
]


@pytest.mark.parametrize("case, changes, message", [("axk2", *r) for r in AXK2_REFUSALS] +
                         [("bailing_hybrid", *r) for r in BAILING_REFUSALS] + [("hy_v4", *r) for r in HY_V4_REFUSALS])
def test_bad_configs_are_refused_by_name(case, changes, message):
    d = _config(case, **changes)
    d.update(changes)               # a null one too
    with pytest.raises(ValueError, match=message):
        {"axk2": axk2, "bailing_hybrid": bailing_hybrid, "hy_v4": hy_v4}[case].Config.from_dict(d)
