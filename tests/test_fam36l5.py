"""The fam36l group of issue 36 (tests/fixtures/hf5_fam36l, made by transformers 5.25): Thinking Machines' Inkling
(`inkling_text`), what tests/test_hf_parity.py (every position of the three prompts, greedy), test_verify_families.py
(`petit verify` at f32 / q8_0 / q4_0) and test_moe.py (quantized routing) do not already hold for every hf5 fixture.

- Decoding and a chunked prefill equal the whole sequence; the forward plan equals the per-op path bit for bit (f32
  and q8_0 weights; the hybrid cache with the convolutions' states); a batch gives each sequence its own logits.
- kernels/fam36l.c's ops against float64 at odd sizes: the attention with its relative bias, window, log scaling and
  sinks over a cache filled in chunks; the short convolutions over chunks (their state, a restart at position 0, the
  per-token taps); the attention over depth; pt_norm's L2 clip.
- What each family reads (transformers' aliases and rules), its refusals by message; a converted `.petit` file
  reloads and runs the same numbers.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.moe import inkling2_loop_text, inkling2_text, inkling_text
from petit.models.families.moe.inkling_block import RelAttn, SConv
from petit.native import ffi, lib
from models import (assert_a_batch_gives_each_sequence_its_own_logits, assert_a_converted_file_runs_the_same_numbers,
                    assert_decoding_and_a_chunked_prefill_equal_the_whole, assert_the_plan_equals_the_per_op_path,
                    load_strict as _load)
from test_fam36g5 import p
from test_moe_a5 import _read_safetensors, _write_safetensors

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36l"
CASES = ["inkling_text", "inkling2_text", "inkling2_loop_text"]
EACH = pytest.mark.parametrize("case", CASES)


def _config(case, **changes):
    """The case's config.json with `changes` (None: the key left out)."""
    d = {**json.loads((DIR / case / "config.json").read_text()), **changes}
    return {k: v for k, v in d.items() if v is not None}


@EACH
def test_decode_chunks_the_plan_a_batch_and_a_converted_file_hold(case, tmp_path):
    """Decoding and a chunked prefill equal the whole sequence; the plan equals the per-op path bit for bit (f32 and
    q8_0 weights; the hybrid cache with the convolutions' states); a prefill beside a decode step in one batch gives
    each sequence its own logits (the states and the relative bias per sequence); a converted file the same
    numbers."""
    folder = DIR / case
    model = _load(folder)
    assert_decoding_and_a_chunked_prefill_equal_the_whole(model, np.load(folder / "reference_long.npz")["input_ids"])
    for weights in ("f32", "q8_0"):
        assert_the_plan_equals_the_per_op_path(_load(folder, weights))
    assert_a_batch_gives_each_sequence_its_own_logits(model, np.load(folder / "reference_chat.npz")["input_ids"])
    assert_a_converted_file_runs_the_same_numbers(folder, tmp_path)


# ---- kernels ----

def _rel64(q, k, v, r, proj, scale, window, floor, alpha, sinks):
    """Inkling's attention in float64: q [T, H, hd], k, v [T, KV, hd], r [T, H, d_rel], sinks [T, H] or None."""
    T, H, hd = q.shape
    kv_of = np.arange(H) // (H // k.shape[1])
    out = np.zeros((T, H, hd))
    for t in range(T):
        tau = 1.0 + alpha * np.log(max((t + 1) / floor, 1.0)) if floor else 1.0
        js = np.arange(max(0, t - window + 1) if window else 0, t + 1)
        for h in range(H):
            d = t - js
            bias = np.where(d < proj.shape[1], r[t, h] @ proj[:, np.minimum(d, proj.shape[1] - 1)], 0.0)
            s = tau * (scale * k[js, kv_of[h]] @ q[t, h] + bias)
            m = max(s.max(), sinks[t, h]) if sinks is not None else s.max()
            e = np.exp(s - m)
            out[t, h] = e @ v[js, kv_of[h]] / (e.sum() + (np.exp(sinks[t, h] - m) if sinks is not None else 0.0))
    return out


@pytest.mark.parametrize("H, KV, hd, d_rel, ext, window, floor, sinks, splits",
                         [(1, 1, 3, 1, 1, 0, 0, False, [1]), (6, 2, 5, 3, 7, 0, 4, False, [5, 1, 1, 6]),
                          (4, 4, 8, 2, 4, 5, 0, True, [13]), (3, 1, 6, 4, 9, 3, 2, True, [2, 9, 1])])
def test_the_relative_attention_equals_a_float64_reference_over_chunks(H, KV, hd, d_rel, ext, window, floor, sinks,
                                                                        splits):
    rng = np.random.default_rng(H * 10 + hd)
    T, n_ctx = sum(splits), sum(splits) + 3
    q, r = rng.standard_normal((T, H, hd)), rng.standard_normal((T, H, d_rel))
    k, v = rng.standard_normal((T, KV, hd)), rng.standard_normal((T, KV, hd))
    proj, sk = rng.standard_normal((d_rel, ext)), rng.standard_normal((T, H)) * 2 if sinks else None
    f32 = lambda a: np.ascontiguousarray(a, np.float32)                      # noqa: E731
    rel = RelAttn((H, KV, hd), f32(proj), window, 1.0 / hd, floor, 0.5)
    kc, vc = np.zeros((KV, n_ctx, hd), np.float32), np.zeros((KV, n_ctx, hd), np.float32)
    kc[:, :T], vc[:, :T] = f32(k).transpose(1, 0, 2), f32(v).transpose(1, 0, 2)
    out, at = np.zeros((T, H, hd), np.float32), 0
    for n in splits:
        qs, rs = f32(q[at:at + n]), f32(r[at:at + n])
        ss = f32(sk[at:at + n]) if sinks else None
        o = np.zeros((n, H, hd), np.float32)
        assert lib.pt_rel_attention(rel.c, p(qs), p(rs), p(ss) if sinks else ffi.NULL, p(kc), p(vc), n_ctx, n, at,
                                    p(o)) == 0
        out[at:at + n] = o
        at += n
    d64 = lambda a: None if a is None else f32(a).astype(np.float64)        # noqa: E731
    want = _rel64(*(d64(a) for a in (q, k, v, r, proj)), 1.0 / hd, window, floor, 0.5, d64(sk))
    np.testing.assert_allclose(out, want, rtol=0, atol=3e-6 * np.abs(want).max())
    assert lib.pt_rel_attention(rel.c, p(out), ffi.NULL, ffi.NULL, p(kc), p(vc), n_ctx, 2, n_ctx - 1, p(out)) == -1


def _conv64(x, w, scale, dyn, heads):
    """(x + causal depthwise conv) x scale in float64; dyn [T, heads, K] per-token taps in lag order."""
    T, C = x.shape
    K = w.shape[1]
    pad = np.concatenate([np.zeros((K - 1, C)), x])
    out = np.zeros_like(x)
    for t in range(T):
        taps = np.repeat(w[None], 1, 0)[0].copy()
        if dyn is not None:
            taps += np.repeat(dyn[t][:, ::-1], C // heads, axis=0)
        out[t] = ((pad[t:t + K] * taps.T).sum(0) + x[t]) * scale
    return out


@pytest.mark.parametrize("C, K, heads, scale, splits", [(1, 1, 0, 1.0, [3]), (7, 4, 0, 1.0, [1, 1, 1, 5]),
                                                       (12, 3, 4, 0.37, [2, 6, 1]), (10, 5, 2, 0.5, [9])])
def test_the_short_convolution_equals_a_float64_reference_over_chunks(C, K, heads, scale, splits):
    """The state carried between chunks equals the whole sequence; a sequence started again at position 0 reads no
    stale state; the state ends holding the last K - 1 inputs."""
    rng = np.random.default_rng(C * K)
    T = sum(splits)
    x = rng.standard_normal((T, C)).astype(np.float32)
    w = (rng.standard_normal((C, K)) / np.sqrt(K)).astype(np.float32)
    dyn = rng.standard_normal((T, heads, K)).astype(np.float32) if heads else None
    conv = SConv(w, False, 0, scale, heads)
    want = _conv64(x.astype(np.float64), w.astype(np.float64), np.float32(scale),
                   None if dyn is None else dyn.astype(np.float64), heads)
    for _ in range(2):                              # the second time the state holds the first run's rows
        y, at = x.copy(), 0
        state = np.full((max(K - 1, 1), C), 7.0, np.float32)
        for n in splits:
            d = p(np.ascontiguousarray(dyn[at:at + n])) if heads else ffi.NULL
            assert lib.pt_sconv_step(conv.c, p(y[at:]), d, n, at, p(state)) == 0
            at += n
        np.testing.assert_allclose(y, want, rtol=0, atol=2e-6 * np.abs(want).max())
        if K > 1:
            np.testing.assert_array_equal(state, np.concatenate([np.zeros((K - 1, C), np.float32), x])[-(K - 1):])
    assert lib.pt_sconv_step(conv.c, p(y), ffi.NULL if not heads else d, 0, 0, p(state)) == -1


@pytest.mark.parametrize("n_src, n_q, T, D", [(0, 1, 3, 5), (1, 3, 2, 17), (4, 1, 5, 33), (3, 4, 1, 8)])
def test_the_attention_over_depth_equals_a_float64_reference(n_src, n_q, T, D):
    rng = np.random.default_rng(n_src * 7 + D)
    src = (rng.standard_normal((n_src, T + 2, D)) * 3).astype(np.float32)     # each source its own block of rows
    cur = rng.standard_normal((T, D)).astype(np.float32)
    qs = rng.standard_normal((n_q, D)).astype(np.float32)
    out = np.zeros((n_q, T + 1, D), np.float32)
    assert lib.pt_block_res(p(src) if n_src else ffi.NULL, n_src, (T + 2) * D, p(cur), p(qs), n_q, T, D, 1e-6, p(out),
                            (T + 1) * D) == 0
    x = np.concatenate([src[:, :T].astype(np.float64), cur[None].astype(np.float64)])      # [n + 1, T, D]
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    s = np.einsum("qd,ntd->tqn", qs.astype(np.float64), x) / np.sqrt(D)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    want = np.einsum("tqn,ntd->qtd", w, x)
    np.testing.assert_allclose(out[:, :T], want, rtol=0, atol=2e-6 * np.abs(want).max())
    assert lib.pt_block_res(p(src), 300, D, p(cur), p(qs), n_q, T, D, 1e-6, p(out), D) == -1


def test_the_l2_clip_norm_kind_scales_rows_down_to_the_threshold():
    rng = np.random.default_rng(2)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((6, 11), (2, 11)))
    x[0] *= 0.01                                    # short rows stay as they are (x w)
    y = np.zeros_like(x)
    assert lib.pt_norm(3, p(x), p(w), ffi.NULL, 2.5, 6, 11, 2, p(y)) == 0
    xw = x.astype(np.float64) * np.tile(w, (3, 1))
    want = xw * np.minimum(1.0, 2.5 / (np.linalg.norm(xw, axis=1, keepdims=True) + 1e-6))
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)
    assert np.array_equal(y[0], (x[0] * w[0]))


# ---- Inkling ----

REFUSALS = {"inkling_text": [
    ({"tie_word_embeddings": True}, "tie_word_embeddings true is not supported"),
    ({"hidden_act": "tanh"}, "hidden_act 'tanh' is not supported by the inkling_text family"),
    ({"layer_types": ["hybrid"] * 3}, "layer_types must list 4 values of hybrid / hybrid_sliding"),
    ({"mlp_layer_types": ["moe"] * 4}, "mlp_layer_types must list 4 values of dense / sparse"),
    ({"num_experts_per_tok": 9}, r"num_experts_per_tok \(9\) exceeds n_routed_experts \(8\)"),
    ({"swa_num_key_value_heads": 3}, "8 query heads are not a multiple of 3 key-value heads"),
    ({"sliding_window": 4}, "sliding_window 4 and sliding_window_size 8 disagree")], "inkling2_text": [
    ({"scoring_func": "softmax"}, "scoring_func 'softmax' is not supported"),
    ({"n_layers_per_attn_res_block": 0}, "n_layers_per_attn_res_block must be a positive integer"),
    ({"final_logit_softcapping": 0.0}, "final_logit_softcapping must be a positive number"),
    ({"hidden_act": "relu6"}, "hidden_act 'relu6' is not supported by the inkling2_text family")],
    "inkling2_loop_text": [
    ({"n_layers_per_attn_res_block": 2}, r"loop_layer_index_start 1 and loop_layer_index_end 3 must be multiples of "
                                         r"n_layers_per_attn_res_block 2"),
    ({"loop_layer_index_end": 4}, r"the looped layers 1..3 must be a run of the 3 layers"),
    ({"loop_num_passes": 0}, "loop_num_passes must be a positive integer")]}


@pytest.mark.parametrize("case, change, message", [(c, *r) for c, rs in REFUSALS.items() for r in rs])
def test_each_family_refuses_by_name(case, change, message):
    from petit.models import MODEL_TYPES
    with pytest.raises(ValueError, match=message):
        MODEL_TYPES[case].Config.from_dict(_config(case, **change))


def test_inkling_reads_its_layers_shapes_and_cut_vocabulary():
    model = _load(DIR / "inkling_text")
    net = model.net
    assert [L.ink_heads for L in net.layers] == [(8, 4, 8), (4, 2, 16), (8, 4, 8), (4, 2, 16)]
    assert [L.moe is not None for L in net.layers] == [False, True, True, True]
    assert all(L.moe.top_k == 4 and len(L.moe.up) == 10 for L in net.layers[1:])    # 2 routed + 2 shared chosen
    assert model.vocab_size == 310 and net.embed.shape == (310, 64) and net.lm_head.shape == (310, 64)
    assert [L.rel.c.extent for L in net.layers] == [8, 12, 8, 12] and net.layers[1].rel.c.log_floor == 8
    with pytest.raises(ValueError, match="out of range"):
        model.logits([5, 315])


def test_inkling_reads_transformers_aliases_and_rules():
    cfg = inkling_text.Config.from_dict(_config("inkling_text", sliding_window_size=None, sliding_window=8,
                                                n_routed_experts=None, num_local_experts=8,
                                                logits_mup_width_multiplier=None, embedding_multiplier=24.0))
    assert (cfg.sliding_window_size, cfg.n_routed_experts, cfg.logits_mup_width_multiplier) == (8, 8, 24.0)
    d = {k: v for k, v in _config("inkling_text").items() if k not in ("layer_types", "mlp_layer_types")}
    cfg = inkling_text.Config.from_dict(dict(d, num_hidden_layers=7, dense_mlp_idx=2, dense_intermediate_size=64))
    assert cfg.layer_types == ["hybrid_sliding"] * 5 + ["hybrid", "hybrid_sliding"]
    assert cfg.mlp_layer_types == ["dense"] * 2 + ["sparse"] * 5
    assert (cfg.intermediate_size, cfg.moe_intermediate_size) == (64, 96)    # intermediate_size: the experts' then
    cfg = inkling_text.Config.from_dict(dict(d, local_layer_ids=[1, 2]))
    assert cfg.layer_types == ["hybrid", "hybrid_sliding", "hybrid_sliding", "hybrid"]
    with pytest.warns(UserWarning, match="ignoring unknown key.*bogus"):
        inkling_text.Config.from_dict(dict(d, bogus=1))


def test_inkling_reads_a_head_at_the_vocabulary_when_unpadded_is_not_smaller(tmp_path):
    d = tmp_path / "m"
    shutil.copytree(DIR / "inkling_text", d)
    (d / "config.json").write_text(json.dumps(_config("inkling_text", unpadded_vocab_size=None)))
    model = _load(d)
    ids = np.load(d / "reference.npz")["input_ids"]
    assert model.vocab_size == 320
    np.testing.assert_array_equal(model.logits(ids)[:, :310], _load(DIR / "inkling_text").logits(ids))


# ---- Inkling 2 ----

def test_inkling2_reads_the_released_layout():
    """The fixture as save_pretrained writes it (transformers' conversion mapping reversed: model.llm.*, w13_weight
    with gate and up rows interleaved, attn_res.attn_queries.{i - 1} for layer i, the unembedding padded to 320)."""
    model = _load(DIR / "inkling2_text")
    net = model.net
    assert [L.ink_heads for L in net.layers] == [(8, 4, 8), (4, 2, 16), (4, 2, 16), (8, 4, 8)]
    assert [L.attn_q is None or L.attn_q.rows for L in net.layers] == [True, 3, 3, 1]
    assert [L.in_norms != () for L in net.layers] == [False, True, True, False]
    assert [L.k_conv.c.heads for L in net.layers] == [0, 2, 2, 0]         # the full layers' dynamic taps
    assert [L.rel.c.log_floor for L in net.layers] == [0, 8, 8, 0]
    assert model.vocab_size == 310 and net.lm_head.shape == (310, 64) and net.arch.logit_softcap == 20.0
    assert [net.cfg.blocks_before(i) for i in range(5)] == [0, 1, 1, 2, 2]
    m = net.layers[0].moe
    assert (m.top_k, m.norm_eps, m.routed_scale, m.gate_softcap, m.up_softcap) == (2, 1e-20, 2.5, 4.0, 2.0)


def test_inkling2_reads_transformers_aliases():
    cfg = inkling2_text.Config.from_dict(_config("inkling2_text", moe_intermediate_size=None, intermediate_size=32,
                                                 route_scale=None, routed_scaling_factor=2.5))
    assert (cfg.moe_intermediate_size, cfg.route_scale) == (32, 2.5)
    d = {k: v for k, v in _config("inkling2_text").items() if k != "layer_types"}
    cfg = inkling2_text.Config.from_dict(dict(d, num_hidden_layers=7))
    assert cfg.layer_types == ["hybrid_sliding"] * 5 + ["hybrid", "hybrid_sliding"]


def test_the_soft_capped_experts_equal_a_float64_reference():
    """Inkling 2's experts: cg tanh(g / cg) sigmoid(g) x cu tanh(u / cu), the chosen sigmoids over their sum."""
    from petit.models.blocks.decoder import Vec
    from petit.models.blocks.moe import Moe
    from petit.native import Weight
    rng = np.random.default_rng(3)
    T, E, k, D, F = 7, 5, 2, 33, 9

    def f32(rows, cols, scale):
        a = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        return a, Weight(a.view(np.uint8).reshape(-1), "f32", (rows, cols))
    router, rw = f32(E, D, 1.0 / np.sqrt(D))
    mats = [tuple(f32(*s, 3 / np.sqrt(s[1])) for s in ((F, D), (F, D), (D, F))) for _ in range(E)]
    bias = (rng.standard_normal(E) * 0.3).astype(np.float32)
    moe = Moe(rw, [m[0][1] for m in mats], [m[1][1] for m in mats], [m[2][1] for m in mats], k, True,
              scoring="sigmoid", sel_bias=Vec(bias), routed_scale=1.5, norm_eps=1e-20, gate_softcap=2.0,
              up_softcap=3.0)
    x = rng.standard_normal((T, D)).astype(np.float32)
    y = np.zeros((T, D), np.float32)
    assert moe.run(p(x), T, p(y)) == 0
    x64 = x.astype(np.float64)
    s = 1 / (1 + np.exp(-x64 @ router.T))
    top = np.argsort(-(s + bias), axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(s, top, axis=1)
    w = w / w.sum(axis=1, keepdims=True) * 1.5

    def expert(v, g, u, d):
        g, u = v @ g.T, v @ u.T
        return (2 * np.tanh(g / 2) / (1 + np.exp(-g)) * 3 * np.tanh(u / 3)) @ d.T
    want = np.stack([sum(w[t, j] * expert(x64[t], *(m[0] for m in mats[top[t, j]])) for j in range(k))
                     for t in range(T)])
    np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())


# ---- Inkling 2 with looped layers ----

def test_the_loop_runs_its_layers_each_pass_with_its_own_cache_and_routing_record():
    model = _load(DIR / "inkling2_loop_text")
    net = model.net
    assert net.cfg.runs() == [(0, 0), (1, 0), (2, 0), (1, 1), (2, 1)]
    assert [L.ink_heads for L in net.layers] == [(8, 4, 8), (4, 2, 16), (8, 4, 8), (4, 2, 16), (8, 4, 8)]
    assert net.layers[1].q is net.layers[3].q and net.layers[1].moe is not net.layers[3].moe   # weights shared
    assert all(a is b for a, b in zip(net.layers[1].moe.up, net.layers[3].moe.up))
    cache = model.new_cache(8)
    assert len(cache.k) == 10 and cache.layout[2] == tuple(range(5, 10))     # 5 runs: KV slots, then states
    assert [q.rows for q in net.msg_q] == [4, 4] and set(net.gates) == {1, 2}


def test_the_loop_reads_the_message_queries_as_transformers_merges_them():
    """middle_cycle_cross_pass_queries holds q, mlp and _kv_queries k, v of each loop layer: message_input.query
    [j] is [q, k, v, mlp]."""
    from petit.loading.folder import read_config
    net = _load(DIR / "inkling2_loop_text").net
    raw = _read_safetensors(DIR / "inkling2_loop_text" / "model.safetensors")
    qm, kv = raw["model.llm.middle_cycle_cross_pass_queries"], raw["model.llm.middle_cycle_cross_pass_kv_queries"]
    for j in range(2):
        np.testing.assert_array_equal(net.msg_q[j].a, np.stack([qm[2 * j], kv[2 * j], kv[2 * j + 1], qm[2 * j + 1]]))
    assert read_config(str(DIR / "inkling2_loop_text"))["loop_num_passes"] == 2


def test_the_loop_reads_transformers_loop_config():
    d = {k: v for k, v in _config("inkling2_loop_text").items() if not k.startswith("loop_")}
    cfg = inkling2_loop_text.Config.from_dict(dict(d, loop_config={"core_start": 1, "core_end": 2, "num_passes": 4,
                                                                   "gate_rank": 8}))
    assert (cfg.loop_layer_index_start, cfg.loop_layer_index_end, cfg.loop_num_passes, cfg.loop_gate_rank) == \
        (1, 2, 4, 8)
    assert cfg.runs() == [(0, 0)] + [(1, p) for p in range(4)] + [(2, 0)]


def test_quantized_experts_are_refused_by_name(tmp_path):
    """A released checkpoint's NVFP4 experts (packed values, half the columns, beside their scales) are refused."""
    d = tmp_path / "m"
    shutil.copytree(DIR / "inkling2_text", d)
    raw = _read_safetensors(DIR / "inkling2_text" / "model.safetensors")
    name = "model.llm.layers.0.mlp.experts.w13_weight"
    raw[name] = np.zeros((8, 64, 32), np.uint8)
    _write_safetensors(d / "model.safetensors", raw)
    with pytest.raises(ValueError, match=rf"tensor '{name}' is \w+ \(8, 64, 32\), expected a float .*experts stored quantized"):
        _load(d)
