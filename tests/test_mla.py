"""DeepSeek's multi-head latent attention beyond f32 parity with transformers (tests/test_hf_parity.py on
tests/fixtures/hf_moe/deepseek_v2 and deepseek_v3): the KV cache holds the compressed latent (one row of rope + rank
values a position, its values the keys' rows, not full keys and values per head), int8 caches and multi-turn reuse
work on it, a convert to .petit runs the same numbers, and the two ops it adds to the forward step (kernels/mla.c:
per-head products and strided copies) equal NumPy over odd sizes."""
import json
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native
from petit.cli import main
from petit.native import Weight, ffi, lib, quantize

FIX = Path(__file__).parent / "fixtures" / "hf_moe"


def _ref(case):
    r = np.load(FIX / case / "reference.npz")
    return r["input_ids"], r["logits"]


@pytest.mark.parametrize("case", ["deepseek_v2", "deepseek_v3"])
def test_the_cache_holds_the_latent_once(case):
    cfg = json.loads((FIX / case / "config.json").read_text())
    m = petit.load(FIX / case, weights="q8_0")
    cache = m.new_cache(100)
    row = cfg["qk_rope_head_dim"] + cfg["kv_lora_rank"]
    assert cache.k.shape == (cfg["num_hidden_layers"], 1, 100, row) and cache.v is cache.k
    assert cache.nbytes == cfg["num_hidden_layers"] * 100 * row * 4
    full = cfg["num_attention_heads"] * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"] + cfg["v_head_dim"])
    assert (full, row) == (320, 48)      # 4 heads of 48-wide keys and 32-wide values, against one 48-wide row: 6.7x
    ids, _ = _ref(case)
    m.forward(ids[:10].tolist(), cache)
    c = m.net.layers[0].mla
    assert np.abs(cache.k[0, 0, :10]).max() > 0 and not cache.k[0, 0, 10:].any()
    assert c.rope + c.rank == row


@pytest.mark.parametrize("case", ["deepseek_v2", "deepseek_v3"])
def test_an_int8_latent_cache_and_a_reused_cache_give_the_fresh_logits(case):
    ids, ref = _ref(case)
    m = petit.load(FIX / case, weights="f32")
    out = np.empty((1, m.vocab_size), np.float32)
    m.net.forward(ids.tolist(), m.new_cache(64, kv_type="int8"), out)
    assert np.abs(out[0] - ref[-1]).max() / np.ptp(ref[-1]) <= 0.05
    cache = m.new_cache(64)                       # turn 1, then turn 2 after a rewind into turn 1
    m.forward(ids[:20].tolist(), cache)
    cache.rewind(15)
    again = m.forward(ids[15:].tolist(), cache)
    np.testing.assert_allclose(again, ref[-1], rtol=0, atol=1e-4 * float(np.ptp(ref)))


def test_convert_writes_the_derived_matrices_and_runs_the_same_numbers(tmp_path):
    out = tmp_path / "m.petit"
    assert main(["convert", str(FIX / "deepseek_v3"), "-o", str(out), "--q8"]) == 0
    ids, _ = _ref("deepseek_v3")
    converted = petit.load(out)
    names = set(converted.tensors)
    assert {"model.layers.1.self_attn.k_absorb.3.weight", "model.layers.1.self_attn.v_absorb.0.weight",
            "model.layers.2.self_attn.kv_c.weight", "model.layers.2.mlp.gate.e_score_correction_bias"} <= names
    assert not any("kv_b_proj" in n for n in names)
    np.testing.assert_array_equal(converted.logits(ids), petit.load(FIX / "deepseek_v3", weights="q8_0").logits(ids))


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
@pytest.mark.parametrize("T,H,K,N,xs,xo,ys,yo", [(1, 1, 32, 7, 32, 0, 7, 0), (5, 3, 64, 33, 80, 16, 40, 7),
                                                  (13, 4, 32, 96, 33, 1, 100, 4)])
def test_per_head_products_are_numpys(dtype, T, H, K, N, xs, xo, ys, yo):
    rng = np.random.default_rng(T * H)
    Ws = [rng.standard_normal((N, K)).astype(np.float32) for _ in range(H)]
    weights = [Weight(quantize(w, dtype) if dtype != "f32" else w.view(np.uint8).reshape(N, -1), dtype, (N, K))
               for w in Ws]
    x = rng.standard_normal((T, H, xs)).astype(np.float32)
    y = rng.standard_normal((T, H, ys)).astype(np.float32)
    keep = y.copy()
    gin, gout = np.zeros((T, K), np.float32), np.zeros((T, N), np.float32)
    P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
    arr = ffi.new("const pt_tensor *[]", [w.c for w in weights])
    assert lib.pt_heads(arr, H, P(x), xs, xo, P(y), ys, yo, T, P(gin), P(gout)) == 0
    for h in range(H):
        want = np.stack([native.matmul(weights[h], x[t:t + 1, h, xo:xo + K])[0] for t in range(T)])
        np.testing.assert_array_equal(y[:, h, yo:yo + N], want)     # one matmul per head: the same bits
        if dtype == "f32":
            np.testing.assert_allclose(want, x[:, h, xo:xo + K] @ Ws[h].T, rtol=1e-5, atol=1e-4)
    outside = np.ones(ys, bool)
    outside[yo:yo + N] = False
    np.testing.assert_array_equal(y[:, :, outside], keep[:, :, outside])       # nothing written outside its slice
    assert lib.pt_heads(arr, H, P(x), xs, xs - K + 1, P(y), ys, yo, T, P(gin), P(gout)) == -1


@pytest.mark.parametrize("rows,width,xs,xo,ys,yo", [(1, 1, 1, 0, 1, 0), (7, 16, 48, 32, 48, 0), (33, 5, 9, 3, 11, 6)])
def test_strided_copies_are_numpys(rows, width, xs, xo, ys, yo):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, xs)).astype(np.float32)
    y = rng.standard_normal((rows, ys)).astype(np.float32)
    want = y.copy()
    want[:, yo:yo + width] = x[:, xo:xo + width]
    P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
    assert lib.pt_copy_rows(P(x), xs, xo, P(y), ys, yo, rows, width) == 0
    np.testing.assert_array_equal(y, want)
    assert lib.pt_copy_rows(P(x), xs, xs, P(y), ys, yo, rows, 1) == -1
