"""The fam36i group of issue 36 (tests/fixtures/hf5_fam36i, made by transformers 5.25): what tests/test_hf_parity.py
(every position of the 35-token, 140-token and chat prompts; the greedy tokens; the quantized bounds), test_moe.py (routing-aware
bounds, plan = oracle, decode = prefill), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) do not
already hold for every hf5 fixture.

- aria_text: the experts read from either spelling of the 3-D tensors (Aria's fc1 / fc2, transformers' gate_up_proj /
  down_proj) give the same numbers; what the family reads (every layer routed, softmax over the chosen logits,
  the shared experts' width and biases); its refusals by name.
- cohere_compass_text: RoPE rotate-half in the layer types rope_parameters gives one (NoPE where null), windows in
  the sliding layers, the parallel block, logit_scale; rope_parameters read as transformers reads it (dangling
  top-level entries dropped, the M-RoPE keys left) and refused where transformers builds no model.
- minimax_m3_vl_text: kernels/mm3.c's indexer and block-sparse attention against their scalar reference and float64 at
  odd sizes (float and int8 caches); a token at a time gives the prefill's bits; what the family reads (the indexer
  keys' cache slots, Gemma's norms, dense and expert layers, the clamped SwiGLU); the legacy config keys read as
  transformers reads them, rotary_dim reported, refusals by name; the context shift refused.
- beam: the scalable softmax's query scale (attention mode 2) against float64 at odd sizes and far positions; what
  the family reads (windows, RoPE and the scale by layer type, the gate and its per-head bias, the four norms with
  the depth scaling folded into their eps, grouped experts, the soft cap); transformers' defaults; refusals.
- A converted `.petit` file of each reloads and runs the same numbers; the plan is the per-op path bit for bit.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from petit.generation.ctx_shift import shift_refusal
from petit.models.families.moe import aria_text, beam, minimax_m3_vl_text
from petit.models.families.dense import cohere_compass_text
from petit.native import attention, ffi, lib
from models import converted_runs_the_same, load_strict as _load
from test_mla5 import _f, _i32, _int8_rows
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36i"
ARIA, COMPASS, MM3, BEAM = (DIR / n for n in ("aria_text", "cohere_compass_text", "minimax_m3_vl_text", "beam"))
ALL = [ARIA, COMPASS, MM3, BEAM]
FOLDERS = pytest.mark.parametrize("folder", ALL, ids=[p.name for p in ALL])


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    converted_runs_the_same(folder, tmp_path, np.load(folder / "reference.npz")["input_ids"])


@FOLDERS
@pytest.mark.parametrize("weights, kv_type", [("f32", "f32"), ("q8_0", "int8")])
def test_the_plan_is_the_per_op_path_bit_for_bit(folder, weights, kv_type):
    """tests/test_plan.py's check (a chunked prefill, token-by-token decode, a fresh prefill; logits and caches)
    over this group's fixtures: the indexer's ops, the gate bias, the scalable softmax's mode ride the plan too."""
    import petit
    _assert_same(petit.load(folder, weights=weights), kv_type)


def _config(folder, **changes):
    d = json.loads((folder / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


# ---- aria_text ----

def test_aria_reads_every_layer_as_experts_with_shared_ones():
    model = _load(ARIA)
    raw = _read_safetensors(ARIA / "model.safetensors")
    for i, L in enumerate(model.net.layers):
        m = L.moe
        assert m is not None and m.scoring == "softmax" and m.norm_topk and m.top_k == 2 and len(m.up) == 6
        assert m.shared[0].shape == (64, 64) and m.shared_gate is None and m.shared_b is not None      # 2 x 32
        fc1 = raw[f"model.layers.{i}.mlp.experts.fc1.weight"]                                         # [E, D, 2F]
        np.testing.assert_array_equal(np.frombuffer(m.up[3].raw, np.float32).reshape(32, 64), fc1[3][:, 32:].T)
        np.testing.assert_array_equal(np.asarray(m.shared_b[0].a),
                                      raw[f"model.layers.{i}.mlp.shared_experts.gate_proj.bias"])


def test_aria_reads_transformers_module_names_the_same(tmp_path):
    """The experts under transformers' names (experts.gate_up_proj / down_proj, the layout unchanged): the same
    logits, nothing left unused."""
    d = tmp_path / "a"
    shutil.copytree(ARIA, d)
    raw = _read_safetensors(ARIA / "model.safetensors")
    renamed = {k.replace("experts.fc1.weight", "experts.gate_up_proj").replace("experts.fc2.weight",
                                                                              "experts.down_proj"): v
               for k, v in raw.items()}
    assert sum("gate_up_proj" in k for k in renamed) == 3
    _write_safetensors(d / "model.safetensors", renamed)
    ids = np.load(ARIA / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(ARIA).logits(ids))


def test_aria_reports_unknown_keys():
    with pytest.warns(UserWarning, match="moe_aux_loss"):
        cfg = aria_text.Config.from_dict(_config(ARIA, moe_aux_loss=0.1))
    assert cfg.unknown_keys == ["moe_aux_loss"]


@pytest.mark.parametrize("changes, message", [
    (dict(moe_topk=7), r"moe_topk \(7\) exceeds moe_num_experts \(6\)"),
    (dict(moe_num_shared_experts=0), "moe_num_shared_experts must be a positive integer"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the aria_text family"),
    (dict(mlp_bias="yes"), "mlp_bias must be true or false"),
])
def test_aria_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        aria_text.Config.from_dict(_config(ARIA, **changes))


# ---- cohere_compass_text ----

def test_compass_reads_each_layers_kinds():
    net = _load(COMPASS).net
    assert [L.window for L in net.layers] == [8, 0, 8]
    r = net.layers[0].rope
    assert r is net.layers[2].rope and net.layers[1].rope is None and not r.interleaved and r.dim == 16
    assert net.arch.parallel and net.arch.logit_scale == 0.25 and net.lm_head is net.embed
    assert all(L.mlp_norm is None and L.attn_norm.kind == "layer" and L.attn_norm.b is None for L in net.layers)


def test_compass_drops_dangling_rope_keys_as_transformers_does(tmp_path):
    """The released config's rope_parameters beside its per-layer-type entries (transformers pops them)."""
    d = tmp_path / "c"
    shutil.copytree(COMPASS, d)
    cfg = json.loads((COMPASS / "config.json").read_text())
    cfg["rope_parameters"].update(rope_theta=1.0, rope_type="default")
    (d / "config.json").write_text(json.dumps(cfg))
    ids = np.load(COMPASS / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(COMPASS).logits(ids))


def _compass(**changes):
    return _config(COMPASS, **changes)


def test_compass_defaults_are_transformers():
    d = _compass(logit_scale=None, num_hidden_layers=4, rope_parameters={"full_attention": {"rope_theta": 1e4}})
    del d["layer_types"]
    cfg = cohere_compass_text.Config.from_dict(d)
    assert cfg.types() == ["full_attention"] * 4 and cfg.logit_scale == 1.0 and cfg.rope_layer_types == [
        "full_attention"] and cfg.rope_theta == 1e4
    assert cohere_compass_text.Config.from_dict(cfg.to_dict()) == cfg       # a converted file's config


ROPE = {"rope_type": "default", "rope_theta": 5e4}


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters=ROPE), "rope_parameters must be keyed by layer type"),
    (dict(rope_parameters=None), r"rope_parameters \(keyed by layer type\) is missing"),
    (dict(rope_parameters={"sliding_attention": ROPE}), "no entry for the layer type.s. full_attention"),
    (dict(rope_parameters={"sliding_attention": ROPE, "full_attention": dict(ROPE, rope_theta=1e6)}),
     "different RoPEs; the cohere_compass_text family uses one RoPE for all its layers"),
    (dict(head_dim=32), r"head_dim 32 is not hidden_size // num_attention_heads \(16\)"),
    (dict(sliding_window=0), "sliding layers need a positive sliding_window"),
])
def test_compass_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        cohere_compass_text.Config.from_dict(_compass(**changes))


# ---- minimax_m3_vl_text ----

def _vp(a):
    return ffi.cast("void *", ffi.from_buffer(a))


def _mm3_index(fn, iq, ik, cache, scales, pos0, block, top_k, local):
    T, H, D = iq.shape
    sel, n_sel = np.full((T, H, top_k), -1, np.int32), np.zeros((T, H), np.int32)
    assert fn(_f(iq), _f(ik), _vp(cache), ffi.NULL if scales is None else _f(scales), int(scales is not None),
              cache.shape[0], T, pos0, H, D, block, top_k, local, _i32(sel), _i32(n_sel)) == 0
    return sel, n_sel


def _mm3_attention(fn, q, kv, n_idx, pos0, block, top_k, sel, n_sel):
    (k, ks), (v, vs) = kv
    T, H, hd = q.shape
    out = np.zeros_like(q)
    assert fn(_f(q), _vp(k), ffi.NULL if ks is None else _f(ks), _vp(v), ffi.NULL if vs is None else _f(vs),
              int(ks is not None), k.shape[1], T, pos0, H, k.shape[0], hd, 0.3, n_idx, block, top_k, _i32(sel),
              _i32(n_sel), _f(out)) == 0
    return out


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("pos0, T, n_idx, dim, block, top_k, local, kv, heads, hd", [
    (7, 29, 3, 13, 5, 3, 1, 3, 6, 11),         # odd everything, prefill after a cached prefix
    (0, 97, 2, 17, 7, 4, 2, 2, 4, 19),         # a whole prompt, runs of 64 positions inside 7-wide blocks
    (300, 1, 1, 9, 70, 3, 1, 1, 3, 9),         # decode: 70-wide blocks, more than one run each
    (3, 5, 2, 6, 4, 64, 0, 2, 2, 5),           # top_k above every block: all of them, no local boost
])
def test_mm3_kernels_match_their_scalar_reference_and_float64(pos0, T, n_idx, dim, block, top_k, local, kv, heads,
                                                              hd, int8):
    """The drivers (the active path's products and attention runs, over the pool) against the plain reference
    beside them at odd sizes, float and int8 caches: the same stored keys and choice of blocks, the outputs within
    float rounding; and both against float64: the choice (largest score a block, the local blocks first, the best
    others, ties to the earlier block) and the softmax over the chosen blocks' visible positions."""
    rng = np.random.default_rng(pos0 * 7 + T)
    n_ctx = pos0 + T + 2
    keys = rng.standard_normal((pos0 + T, dim)).astype(np.float32)
    iq = rng.standard_normal((T, n_idx, dim)).astype(np.float32)
    caches = []
    for fn in (lib.pt_mm3_index, lib.pt_mm3_index_ref):
        cache = np.zeros((n_ctx, dim), np.int8 if int8 else np.float32)
        scales = np.zeros(n_ctx, np.float32) if int8 else None
        if pos0:                                    # the prefix stored by an earlier step
            _mm3_index(fn, np.zeros((pos0, n_idx, dim), np.float32), keys[:pos0], cache, scales, 0, block, top_k,
                       local)
        caches.append((cache, scales, *_mm3_index(fn, iq, keys[pos0:], cache, scales, pos0, block, top_k, local)))
    (cache, scales, sel, n_sel), (cache_r, scales_r, sel_r, n_r) = caches
    np.testing.assert_array_equal(cache, cache_r)
    np.testing.assert_array_equal(sel, sel_r)
    np.testing.assert_array_equal(n_sel, n_r)
    stored = cache.astype(np.float64) * (scales[:, None] if int8 else 1.0)
    if int8:
        q8, s8 = _int8_rows(keys)
        np.testing.assert_array_equal(cache[:pos0 + T], q8)
        np.testing.assert_array_equal(scales[:pos0 + T], s8)
    else:
        np.testing.assert_array_equal(cache[:pos0 + T], keys)
    for t in range(T):
        p = pos0 + t
        qb = p // block
        for h in range(n_idx):
            s = stored[:p + 1] @ iq[t, h].astype(np.float64)
            best = np.array([s[b * block:(b + 1) * block].max() for b in range(qb + 1)])
            best[[max(qb - j, 0) for j in range(local)]] = np.inf
            want = np.sort(np.argsort(-best, kind="stable")[:top_k])
            assert sel[t, h, :n_sel[t, h]].tolist() == want.tolist(), (t, h)
    rows = [rng.standard_normal((kv, n_ctx, hd)).astype(np.float32) for _ in range(2)]
    cache_kv = [_int8_rows(r.reshape(-1, hd)) for r in rows] if int8 else [(r, None) for r in rows]
    cache_kv = [(a.reshape(kv, n_ctx, hd), None if b is None else b.reshape(kv, n_ctx)) for a, b in cache_kv]
    q = rng.standard_normal((T, heads, hd)).astype(np.float32)
    got = _mm3_attention(lib.pt_mm3_attention, q, cache_kv, n_idx, pos0, block, top_k, sel, n_sel)
    ref = _mm3_attention(lib.pt_mm3_attention_ref, q, cache_kv, n_idx, pos0, block, top_k, sel, n_sel)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)
    k64, v64 = (a.astype(np.float64) * (1.0 if b is None else b[..., None]) for a, b in cache_kv)
    for t in range(T):
        p = pos0 + t
        for h in range(heads):
            g, hi = h // (heads // kv), h // (heads // n_idx)
            at = [s for b in sel[t, hi, :n_sel[t, hi]] for s in range(b * block, min((b + 1) * block, p + 1))]
            x = k64[g, at] @ q[t, h] * 0.3
            e = np.exp(x - x.max())
            np.testing.assert_allclose(got[t, h], e @ v64[g, at] / e.sum(), rtol=0, atol=2e-5)


def test_mm3_kernels_refuse_bad_arguments():
    cache, iq, ik = np.zeros((8, 4), np.float32), np.zeros((2, 1, 4), np.float32), np.zeros((2, 4), np.float32)
    sel, n_sel = np.zeros((2, 1, 3), np.int32), np.zeros((2, 1), np.int32)
    for fn in (lib.pt_mm3_index, lib.pt_mm3_index_ref):
        assert fn(_f(iq), _f(ik), _vp(cache), ffi.NULL, 0, 8, 2, 7, 1, 4, 2, 3, 1, _i32(sel), _i32(n_sel)) == -1
        assert fn(_f(iq), _f(ik), _vp(cache), ffi.NULL, 0, 8, 2, 0, 1, 4, 2, 3, 4, _i32(sel), _i32(n_sel)) == -1
    kv = np.zeros((1, 8, 4), np.float32)
    q = np.zeros((2, 2, 4), np.float32)
    sel[:, 0, :2] = [[0, 1], [0, 1]]
    n_sel[:] = 2
    for fn in (lib.pt_mm3_attention, lib.pt_mm3_attention_ref):     # block 1 is after query 0 (position 0, block 2)
        assert fn(_f(q), _vp(kv), ffi.NULL, _vp(kv), ffi.NULL, 0, 8, 2, 0, 2, 1, 4, 1.0, 1, 2, 3, _i32(sel),
                  _i32(n_sel), _f(q)) == -1
        assert fn(_f(q), _vp(kv), ffi.NULL, _vp(kv), ffi.NULL, 0, 8, 2, 2, 3, 1, 4, 1.0, 2, 2, 3, _i32(sel),
                  _i32(n_sel), _f(q)) == -1                                         # 3 heads, 2 indexer heads


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
def test_mm3_decodes_a_token_at_a_time_as_it_prefills(kv_type):
    """A query's choice and attention read its own row and the cached rows only: token by token gives the prefill's
    bits (float and int8 caches: the rows are stored alike)."""
    model = _load(MM3)
    ids = np.load(MM3 / "reference.npz")["input_ids"]
    full = np.empty((len(ids), model.vocab_size), np.float32)
    model.net.forward(ids.tolist(), model.new_cache(64, kv_type), full)
    cache, steps = model.new_cache(64, kv_type), []
    for t in ids:
        out = np.empty((1, model.vocab_size), np.float32)
        model.net.forward([int(t)], cache, out)
        steps.append(out[0])
    np.testing.assert_array_equal(np.stack(steps), full)


def test_mm3_reads_each_layers_kinds():
    model = _load(MM3)
    net, raw = model.net, _read_safetensors(MM3 / "model.safetensors")
    assert net.arch.cache_slots == 5 and model.new_cache(16).layout == (5, 2, 16, 16)
    assert [L.sparse is not None for L in net.layers] == [True, False, True]
    assert [L.sparse.slot for L in net.layers if L.sparse] == [3, 4] and net.layers[0].pre_store is net.layers[0].sparse
    sp = net.layers[0].sparse
    assert (sp.n_idx, sp.dim, sp.block, sp.top_k, sp.local) == (2, 16, 4, 3, 1) and sp.rope is net.layers[0].rope
    assert net.layers[0].rope.dim == 8 and net.arch.act == "swiglu_oai"
    assert [L.moe is not None for L in net.layers] == [False, True, True]
    m = net.layers[1].moe
    assert m.scoring == "sigmoid" and m.norm_topk and m.routed_scale == 2.0 and m.act == "swiglu_oai"
    np.testing.assert_array_equal(np.asarray(m.sel_bias.a), raw["model.layers.1.mlp.gate.e_score_correction_bias"])
    np.testing.assert_allclose(np.asarray(net.layers[0].q_norm.w.a),
                               raw["model.layers.0.self_attn.q_norm.weight"] + 1.0, rtol=0, atol=0)
    gu = raw["model.layers.1.mlp.experts.gate_up_proj"]                     # [E, 2F, D]
    np.testing.assert_array_equal(np.frombuffer(m.up[4].raw, np.float32).reshape(32, 64), gu[4, 32:])
    assert "cache's layers are not the model's" in shift_refusal(model, model.new_cache(16))


def _mm3(**changes):
    return _config(MM3, **changes)


def test_mm3_reads_the_legacy_keys_as_transformers():
    d = _mm3(sparse_attention_config={"sparse_attention_freq": [1, 0, 0], "sparse_block_size": 8,
                                      "sparse_topk_blocks": 5, "sparse_num_index_heads": 1},
             moe_layer_freq=[0, 0, 1], num_experts=6, num_local_experts=None)
    del d["layer_types"], d["mlp_layer_types"]
    cfg = minimax_m3_vl_text.Config.from_dict(d)
    assert cfg.layer_types == ["minimax_m3_sparse", "full_attention", "full_attention"]
    assert cfg.mlp_layer_types == ["dense", "dense", "sparse"] and cfg.num_local_experts == 6
    assert (cfg.index_block_size, cfg.index_topk_blocks, cfg.index_n_heads, cfg.index_head_dim) == (8, 5, 1, 16)
    with pytest.warns(UserWarning, match="sparse_attention_config.use_index_value"):
        minimax_m3_vl_text.Config.from_dict(_mm3(sparse_attention_config={"use_index_value": False}))


def test_mm3_reports_a_rotary_dim_transformers_does_not_read():
    with pytest.warns(UserWarning, match=r"rotary_dim 16 is not read: transformers 5.25 rotates head_dim x "
                                         r"partial_rotary_factor = 8 values"):
        cfg = minimax_m3_vl_text.Config.from_dict(_mm3(rotary_dim=16))
    assert cfg.rot == 8


@pytest.mark.parametrize("changes, message", [
    (dict(swiglu_limit=10.0), "the clamped SwiGLU runs with 1.702 / 7.0 only"),
    (dict(index_n_heads=3), "num_attention_heads 4 is not a multiple of index_n_heads 3"),
    (dict(index_head_dim=4), "index_head_dim 4 must be at least the 8 rotated values"),
    (dict(index_head_dim=40), r"at most num_key_value_heads x head_dim 32"),
    (dict(index_local_blocks=4), "index_local_blocks 4 must be between 0 and index_topk_blocks 3"),
    (dict(layer_types=["sparse"] * 3), "layer_types must list 3 values of full_attention / minimax_m3_sparse"),
    (dict(mlp_layer_types=["dense"]), "mlp_layer_types must list 3 values of dense / sparse"),
    (dict(num_experts_per_tok=7), "exceeds num_local_experts"),
])
def test_mm3_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        minimax_m3_vl_text.Config.from_dict(_mm3(**changes))


# ---- beam ----

@pytest.mark.parametrize("T, pos0, H, KV, hd, window", [(7, 0, 4, 2, 16, 0), (3, 4093, 6, 3, 11, 0),
                                                        (5, 9000, 2, 1, 9, 50)])
def test_beam_query_scale_is_the_scalable_softmax_at_every_position(T, pos0, H, KV, hd, window):
    """Attention mode 2: the scores of the query at p x (1 + (p + 1) / 2048) ** 0.1, against float64 (positions
    near 4096 and past 8192, where the scale is 1.07-1.17)."""
    rng = np.random.default_rng(T + pos0)
    n = pos0 + T
    k, v = (rng.standard_normal((KV, n, hd)).astype(np.float32) for _ in range(2))
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    got = attention(q, k, v, pos0, 0.3, window=window, temperature=beam.SSMAX)
    for t in range(T):
        p = pos0 + t
        lo = p + 1 - window if window else 0
        for h in range(H):
            g = h // (H // KV)
            s = k[g, lo:p + 1].astype(np.float64) @ q[t, h] * 0.3 * (1 + (p + 1) / 2048) ** 0.1
            e = np.exp(s - s.max())
            np.testing.assert_allclose(got[t, h], e @ v[g, lo:p + 1] / e.sum(), rtol=0, atol=2e-5)


def test_beam_reads_each_layers_kinds():
    net = _load(BEAM).net
    raw = _read_safetensors(BEAM / "model.safetensors")
    L0, L1, L2 = net.layers
    assert [L.window for L in net.layers] == [8, 0, 8] and L0.rope is L2.rope and L1.rope is None
    assert L1.temperature == (2048.0, 0.1, 2) and L0.temperature is None is L2.temperature
    assert [L.moe is not None for L in net.layers] == [False, True, True] and net.arch.logit_softcap == 30.0
    m = L1.moe
    assert (m.scoring, m.n_group, m.topk_group, m.group_score, m.routed_scale, m.norm_eps) == (
        "sigmoid", 4, 2, "top2_sum", 2.5, 1e-20) and m.shared is None
    np.testing.assert_array_equal(L2.attn_gate_b.a, np.repeat(raw["model.layers.2.self_attn.gate_bias"], 16))
    assert [(L.attn_norm.eps, L.mlp_norm.eps) for L in net.layers] == [(1e-6 * (2 * i + 1), 1e-6 * (2 * i + 2))
                                                                       for i in range(3)]
    assert net.final_norm.eps == 7e-6 and all(L.post_attn_norm and L.post_mlp_norm and L.q_norm for L in net.layers)


def _beam(**changes):
    return _config(BEAM, **changes)


def test_beam_defaults_are_transformers():
    d = _beam(num_hidden_layers=8, n_group=None, topk_group=None, num_experts=16, rope_parameters=None)
    for k in ("layer_types", "mlp_layer_types"):
        del d[k]
    cfg = beam.Config.from_dict(d)
    assert cfg.types() == ["sliding_attention"] * 5 + ["full_attention", "sliding_attention", "full_attention"]
    assert cfg.mlp_layer_types == ["dense"] * 3 + ["sparse"] * 5 and cfg.rope_layer_types == ["sliding_attention"]
    assert (cfg.n_group, cfg.topk_group, cfg.rope_theta, cfg.final_logit_softcapping) == (8, 4, 10000.0, 30.0)
    assert beam.Config.from_dict(cfg.to_dict()) == cfg          # a converted file's config


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4}), "rope_parameters must be keyed by layer"),
    (dict(rope_parameters={"full_attention": None}), "no entry for the layer type.s. sliding_attention"),
    (dict(n_group=3), "8 experts in n_group 3 groups of at least two"),
    (dict(topk_group=5), "topk_group 5 of them"),
    (dict(final_logit_softcapping=-1.0), "final_logit_softcapping must be positive or null"),
    (dict(mlp_layer_types=["dense", "moe", "sparse"]), "mlp_layer_types must list 3 values of dense / sparse"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu' is not supported by the beam family"),
])
def test_beam_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        beam.Config.from_dict(_beam(**changes))


@pytest.mark.parametrize("wrapper, text", [("aria", "aria_text"), ("cohere_compass", "cohere_compass_text"),
                                           ("minimax_m3_vl", "minimax_m3_vl_text")])
def test_the_multimodal_checkpoints_run_their_text_model_as_rows_of_the_table(wrapper, text):
    """Refused by name until the multimodal table (tests/test_mm5.py, tests/fixtures/hf5_mm) read them."""
    from petit.models import get_family
    assert get_family(wrapper).ROW.text == text
