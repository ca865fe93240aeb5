"""The latent-attention (mla) group of issue 30 (tests/fixtures/hf5_mla: families transformers 5 added around
DeepSeek's multi-head latent attention): what tests/test_hf_parity.py, test_moe.py, test_verify_families.py and the
app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The forward plan equals the per-op path bit for bit on these families' blocks (tests/test_plan.py's check).
- Each family's particulars (GLM-4.7-Flash's mlp_layer_types, ...).
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.native import ffi, lib

from test_plan import _assert_same
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_mla"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


def _with_config(tmp_path, case: str, **change) -> Path:
    d = tmp_path / case
    shutil.copytree(FOLDERS[case], d)
    cfg = _config(case)
    for k, v in change.items():
        if v is ...:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("weights, kv_type", [("f32", "f32"), ("q8_0", "f32"), ("q8_0", "int8")])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights, kv_type):
    _assert_same(_load(FOLDERS[case], weights), kv_type)


@pytest.mark.parametrize("oracle", [False, True])
@pytest.mark.parametrize("case", ["deepseek_v32", "glm_moe_dsa"])
def test_sparse_attention_runs_sequences_together_as_alone(case, oracle):
    """Two sequences in one step (one prefilling, one past its first 12 positions) each get their bits alone: the
    indexer's choice and the attention read each sequence's own rows, cache and positions."""
    model = _load(FOLDERS[case])
    ids = np.load(FOLDERS[case] / "reference.npz")["input_ids"]
    a, b = ids[:20], ids[5:35]
    V = model.vocab_size
    alone = []
    for seq in (a, b):
        out = np.empty((len(seq), V), np.float32)
        model.net.forward(seq, model.new_cache(64), out, oracle=oracle)
        alone.append(out)
    ca, cb = model.new_cache(64), model.new_cache(64)
    model.net.forward(b[:17], cb, None, oracle=oracle)            # b has 17 positions cached, a none
    both = np.empty((len(a) + len(b) - 17, V), np.float32)
    model.net.forward_batch([(a, ca, len(a)), (b[17:], cb, len(b) - 17)], both, oracle=oracle)
    np.testing.assert_array_equal(both[:len(a)], alone[0])
    np.testing.assert_array_equal(both[len(a):], alone[1][17:])


def test_glm4_moe_lite_routes_where_mlp_layer_types_says(tmp_path):
    """[dense, sparse, sparse] as written; without the key, transformers' default (the same here); another list moves
    the experts (and a layer with no experts stored is refused by its missing tensors)."""
    net = _load(FOLDERS["glm4_moe_lite"]).net
    assert [L.moe is not None for L in net.layers] == [False, True, True]
    m = net.layers[1].moe
    assert (m.top_k, m.scoring, m.routed_scale, m.sel_bias is not None) == (2, "sigmoid", 1.8, True)
    d = _with_config(tmp_path, "glm4_moe_lite", mlp_layer_types=..., first_k_dense_replace=...)
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("change, message", [
    ({"mlp_layer_types": ["dense", "sparse"]}, r"mlp_layer_types must list 3 values, each 'dense' or 'sparse'"),
    ({"mlp_layer_types": ["dense", "moe", "sparse"]}, "mlp_layer_types must list 3 values"),
    ({"first_k_dense_replace": 2}, r"first_k_dense_replace 2 contradicts mlp_layer_types"),
    ({"attention_bias": True}, "attention_bias / mlp_bias are not supported by the glm4_moe_lite family"),
    ({"scoring_func": "softmax"}, "scoring_func 'softmax' is not glm4_moe_lite's"),
])
def test_glm4_moe_lite_refuses_what_it_cannot_run(tmp_path, change, message):
    d = _with_config(tmp_path, "glm4_moe_lite", **change)
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


# ---- DeepSeek Sparse Attention (kernels/dsa.c): the drivers against their scalar reference ----
def _f(a):
    return ffi.cast("float *", ffi.from_buffer(a))


def _i32(a):
    return ffi.cast("int32_t *", ffi.from_buffer(a))


def _int8_rows(rows):
    """An int8 cache of float rows: one scale (amax / 127) a row, as pt_rope_store_q8 stores them."""
    scale = np.abs(rows).max(axis=1) / 127.0
    q = np.rint(rows / scale[:, None]).astype(np.int8)
    return q, scale.astype(np.float32)


def _dsa_index(fn, q, w, cache, scales, stride, k_off, pos0, T, top_k):
    n_ctx, H, D = cache.shape[0], q.shape[1], q.shape[2]
    sel, n_sel = np.full((T, top_k), -1, np.int32), np.zeros(T, np.int32)
    rc = fn(_f(q), _f(w), ffi.cast("void *", ffi.from_buffer(cache)), ffi.NULL if scales is None else _f(scales),
            int(scales is not None), stride, k_off, n_ctx, T, pos0, H, D, D ** -0.5, H ** -0.5, top_k, _i32(sel),
            _i32(n_sel))
    assert rc == 0
    return sel, n_sel


def _dsa_attention(fn, q, cache, scales, pos0, hd, sel, n_sel, top_k, sinks=None):
    T, H, stride = q.shape
    out = np.zeros_like(q)
    rc = fn(_f(q), ffi.cast("void *", ffi.from_buffer(cache)), ffi.NULL if scales is None else _f(scales),
            int(scales is not None), stride, cache.shape[0], T, pos0, H, hd, 0.3, _i32(sel), _i32(n_sel), top_k,
            ffi.NULL if sinks is None else _f(sinks), _f(out))
    assert rc == 0
    return out


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("n_ctx, pos0, T, heads, dim, stride, k_off, top_k, hd", [
    (53, 7, 29, 3, 13, 41, 27, 11, 23),        # odd everything, prefill after a cached prefix
    (97, 0, 97, 5, 17, 77, 59, 31, 57),         # a whole prompt, more than one attention block of 64 chosen rows
    (301, 300, 1, 7, 9, 19, 9, 129, 9),         # decode: one query over 301 positions, 129 of them chosen
    (40, 3, 5, 2, 6, 11, 5, 64, 5),             # top_k above every position: all of them, no scoring
])
def test_dsa_kernels_match_their_scalar_reference(n_ctx, pos0, T, heads, dim, stride, k_off, top_k, hd, int8):
    """The drivers (the active path's products and attention blocks, over the pool) against the plain reference
    beside them, at odd sizes, float and int8 caches: the same choice of positions, the outputs within float
    rounding; and the choice against a float64 computation of the scores."""
    rng = np.random.default_rng(n_ctx + T)
    rows = rng.standard_normal((n_ctx, stride)).astype(np.float32)
    cache, scales = _int8_rows(rows) if int8 else (rows, None)
    q = rng.standard_normal((T, heads, dim)).astype(np.float32)
    w = rng.standard_normal((T, heads)).astype(np.float32)
    sel, n_sel = _dsa_index(lib.pt_dsa_index, q, w, cache, scales, stride, k_off, pos0, T, top_k)
    ref_sel, ref_n = _dsa_index(lib.pt_dsa_index_ref, q, w, cache, scales, stride, k_off, pos0, T, top_k)
    np.testing.assert_array_equal(n_sel, ref_n)
    np.testing.assert_array_equal(sel, ref_sel)
    keys = (cache.astype(np.float64) * (scales[:, None] if int8 else 1.0))
    for t in range(T):
        n = pos0 + t + 1
        s = np.einsum("hd,sd->hs", q[t].astype(np.float64), keys[:n, k_off:k_off + dim]) * dim ** -0.5
        score = (np.maximum(s, 0.0) * (w[t].astype(np.float64) * heads ** -0.5)[:, None]).sum(0)
        want = np.sort(np.argsort(-score, kind="stable")[:min(n, top_k)])
        assert n_sel[t] == len(want) and sel[t, :n_sel[t]].tolist() == want.tolist(), t
    qa = rng.standard_normal((T, heads, stride)).astype(np.float32)
    got = _dsa_attention(lib.pt_dsa_attention, qa, cache, scales, pos0, hd, sel, n_sel, top_k)
    ref = _dsa_attention(lib.pt_dsa_attention_ref, qa, cache, scales, pos0, hd, sel, n_sel, top_k)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)
    assert not got[:, :, hd:].any()               # only the attended width is written
    for t in range(T):                            # and the float64 attention over the chosen rows
        r = keys[sel[t, :n_sel[t]], :hd]
        for h in range(heads):
            e = np.exp(r @ qa[t, h, :hd] * 0.3 - (r @ qa[t, h, :hd] * 0.3).max())
            np.testing.assert_allclose(got[t, h, :hd], e @ r / e.sum(), rtol=0, atol=1e-5)


def test_dsa_kernels_refuse_bad_arguments():
    rows = np.zeros((8, 10), np.float32)
    q, w = np.zeros((2, 1, 4), np.float32), np.zeros((2, 1), np.float32)
    sel, n_sel = np.zeros((2, 3), np.int32), np.zeros(2, np.int32)
    for fn in (lib.pt_dsa_index, lib.pt_dsa_index_ref):
        assert fn(_f(q), _f(w), ffi.cast("void *", ffi.from_buffer(rows)), ffi.NULL, 0, 10, 7, 8, 2, 0, 1, 4, 1.0, 1.0,
                  3, _i32(sel), _i32(n_sel)) == -1             # the key past the row
        assert fn(_f(q), _f(w), ffi.cast("void *", ffi.from_buffer(rows)), ffi.NULL, 0, 10, 0, 8, 2, 7, 1, 4, 1.0, 1.0,
                  3, _i32(sel), _i32(n_sel)) == -1             # positions past the cache
    sel[:] = [[0, 1, 5], [0, 1, 2]]
    n_sel[:] = 3
    qa = np.zeros((2, 1, 10), np.float32)
    for fn in (lib.pt_dsa_attention, lib.pt_dsa_attention_ref):      # position 5 is after query 0 (position 1)
        assert fn(_f(qa), ffi.cast("void *", ffi.from_buffer(rows)), ffi.NULL, 0, 10, 8, 2, 0, 1, 6, 1.0, _i32(sel),
                  _i32(n_sel), 3, ffi.NULL, _f(qa)) == -1


@pytest.mark.parametrize("kv_type", ["f32", "int8"])
def test_deepseek_v32_decodes_a_token_at_a_time_as_it_prefills(kv_type):
    """Each query's choice depends on its own row and the cached keys only: one token at a time gives the prefill's
    bits (float cache); an int8 cache (the indexer's keys rounded with each row's scale) stays near the float one
    wherever the rounding leaves the choice as it was (measured: 32 of 35 positions within 0.017 of the range, the
    three others, whose chosen positions changed, 0.07-0.15)."""
    model = _load(FOLDERS["deepseek_v32"])
    ids = np.load(FOLDERS["deepseek_v32"] / "reference.npz")["input_ids"]
    T, V = len(ids), model.vocab_size
    full = np.empty((T, V), np.float32)
    model.net.forward(ids, model.new_cache(T), full)
    cache = model.new_cache(T, kv_type=kv_type)
    steps = np.empty((T, V), np.float32)
    for t in range(T):
        model.net.forward(ids[t:t + 1], cache, steps[t:t + 1])
    if kv_type == "f32":
        np.testing.assert_array_equal(steps, full)
    else:
        assert np.mean(rel_err(steps, full) < 0.02) >= 0.85


def test_deepseek_v32_reads_its_indexer():
    net = _load(FOLDERS["deepseek_v32"]).net
    assert net.arch.head_dim == 16 + 32 + 64               # a cache row: k_pe, the latent, the indexer's key
    for L in net.layers:
        d = L.mla.dsa
        assert (d.n_heads, d.dim, d.top_k, d.shared, d.rope.interleaved, L.rope.interleaved) == \
            (16, 64, 12, False, False, True)
        assert d.w_proj.dtype == "f32"                     # the head weights stay float, as transformers keeps them
    q8 = _load(FOLDERS["deepseek_v32"], "q8_0").net.layers[0].mla.dsa
    assert (q8.wq_b.dtype, q8.wk.dtype, q8.w_proj.dtype) == ("q8_0", "q8_0", "f32")


@pytest.mark.parametrize("change, message", [
    ({"layer_types": ["indexed_attention", "full_attention"]}, "layer_types must list 2 values, each indexed_attention"),
    ({"index_head_dim": 8}, "index_head_dim 8 is smaller than qk_rope_head_dim 16"),
    ({"index_topk": 0}, "index_topk must be a positive integer"),
    ({"q_lora_rank": None}, "q_lora_rank must be set for deepseek_v32"),
])
def test_deepseek_v32_refuses_what_it_cannot_run(tmp_path, change, message):
    d = _with_config(tmp_path, "deepseek_v32", **change)
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def test_glm_moe_dsa_shares_the_first_layers_choice():
    """indexer_types [full, shared]: layer 1 has no indexer and reuses layer 0's choice; its indexer turns adjacent
    pairs, as the attention's rope part."""
    net = _load(FOLDERS["glm_moe_dsa"]).net
    d0, d1 = (L.mla.dsa for L in net.layers)
    assert (d0.shared, d1.shared) == (False, True) and d1.source is d0 and d1.wq_b is None
    assert d0.rope is net.layers[0].rope and d0.rope.interleaved


@pytest.mark.parametrize("change", [
    {"indexer_types": ..., "index_topk_pattern": "FS"},
    {"indexer_types": ..., "index_topk_freq": 2, "index_skip_topk_offset": 1},    # full when i is even
])
def test_glm_moe_dsa_derives_indexer_types_as_transformers(tmp_path, change):
    d = _with_config(tmp_path, "glm_moe_dsa", **change)
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("change, message", [
    ({"indexer_types": ["shared", "full"]}, "indexer_types\\[0\\] is 'shared'"),
    ({"indexer_types": ["full", "dense"]}, "indexer_types must list 2 values, each 'full' or 'shared'"),
])
def test_glm_moe_dsa_refuses_what_it_cannot_run(tmp_path, change, message):
    d = _with_config(tmp_path, "glm_moe_dsa", **change)
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


# ---- GGUF: llama.cpp's own conversions of these folders (tests/fixtures/gguf5_mla, its README says how) ----
GGUF = Path(__file__).parent / "fixtures" / "gguf5_mla"
GGUF_READ = sorted(p.name for p in GGUF.iterdir() if (p / "q8_0.gguf").is_file())


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    ref = np.load(GGUF / case / "q8_0.npz")
    model = _gguf(case)
    got = model.logits(ref["input_ids"])
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(got, ref["exact_logits"]), _scaled(ref["logits"], ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_glm4_moe_lite_gguf_is_deepseek2_with_the_files_latent_eps():
    """llama.cpp converts GLM-4.7-Flash as deepseek2, whose graph takes the file's RMS eps (1e-5) for the latent
    norms too, where transformers keeps 1e-6: Petit follows the file (its exact logits above)."""
    net = _gguf("glm4_moe_lite", weights="f32").net
    m = net.layers[1].mla
    assert np.float32(m.kv_norm.eps) == np.float32(m.q_a_norm.eps) == np.float32(net.layers[1].attn_norm.eps) == \
        np.float32(1e-5)
    assert [L.moe is not None for L in net.layers] == [False, True, True]
    assert _load(FOLDERS["glm4_moe_lite"]).net.layers[1].mla.kv_norm.eps == 1e-6


def test_minicpm3_reads_its_scales_and_turns_its_rope_by_halves(tmp_path):
    net = _load(FOLDERS["minicpm3"]).net
    a = net.arch
    assert (a.embed_scale, a.logit_scale) == (12.0, 0.25) and abs(a.residual_scale - 0.5 / 2 ** 0.5) < 1e-12
    assert not net.layers[0].rope.interleaved and all(L.moe is None for L in net.layers)
    d = _with_config(tmp_path, "minicpm3", scale_depth=None, dim_model_base=None)      # transformers: no scaling
    a = _load(d).net.arch
    assert (a.residual_scale, a.logit_scale) == (1.0, 1.0)


def test_minicpm3_refuses_experts(tmp_path):
    d = _with_config(tmp_path, "minicpm3", n_routed_experts=8)
    with pytest.raises(ValueError, match="n_routed_experts is not a minicpm3 key"):
        petit.load(d, weights="f32")


def test_glm_moe_dsa_gguf_reads_which_layers_share():
    """glm-dsa's attention.indexer.types (one bool a layer) is the folder's indexer_types; deepseek32's indexer turns
    halves, glm-dsa's adjacent pairs, as the folders'."""
    glm = _gguf("glm_moe_dsa", weights="f32").net
    assert [L.mla.dsa.shared for L in glm.layers] == [False, True] and glm.layers[0].mla.dsa.rope.interleaved
    ds = _gguf("deepseek_v32", weights="f32").net
    assert [L.mla.dsa.shared for L in ds.layers] == [False, False] and not ds.layers[0].mla.dsa.rope.interleaved
    assert ds.layers[0].mla.dsa.w_proj.dtype == "f32"


def test_minicpm3_gguf_runs_llama_cpps_fixed_scales():
    """llama.cpp's minicpm3 fixes MiniCPM's scales in its graph (12, 1.4 / sqrt(layers), 256 / hidden) whatever the
    checkpoint said (the folder: 12, 0.5 / sqrt(2), 16 / 64), and its latent norms take the file's RMS eps."""
    net = _gguf("minicpm3", weights="f32").net
    a = net.arch
    assert (a.embed_scale, a.logit_scale) == (12.0, 4.0) and abs(a.residual_scale - 1.4 / 2 ** 0.5) < 1e-12
    assert np.float32(net.layers[0].mla.kv_norm.eps) == np.float32(1e-5) and not net.layers[0].rope.interleaved
    folder = _load(FOLDERS["minicpm3"]).net
    for h in range(4):                # W_uk^T computed at load from the q8_0 attn_kv_b: the folder's, to q8_0's steps
        got, want = net.layers[0].mla.k_absorb[h].dequantize(), folder.layers[0].mla.k_absorb[h].dequantize()
        assert got.shape == want.shape == (32, 32) and np.abs(got - want).max() <= np.abs(want).max() / 127


@pytest.mark.parametrize("case", ["glm4_moe_lite", "deepseek_v32", "glm_moe_dsa"])
def test_the_hubs_extra_routing_keys_are_read_silently(tmp_path, case):
    """Keys of the released config.json that transformers reads not (its router is always noaux_tc)."""
    d = _with_config(tmp_path, case, topk_method="noaux_tc", scoring_func="sigmoid", num_nextn_predict_layers=1,
                     ep_size=1)
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL
