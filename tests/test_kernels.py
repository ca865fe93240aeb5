"""Every kernel path against the scalar C reference and against the NumPy oracles in tests/oracles.py.

Tolerances: integer results (quantized bytes, activation quants, block sums) must be exact. Float results are
compared relative to the size of the sum they come from: |y - ref| <= 2e-5 * sum_k |w_k x_k| + 1e-6, i.e. float32
rounding of a differently ordered sum, never a loose "close enough".
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from petit import native as K
from petit.models.blocks.rope import Rope   # the tables the model hands to pt_rope_store
from petit.native import ISAS, lib

import oracles

PATHS = [pytest.param(isa, marks=pytest.mark.skipif(not lib.pt_isa_supported(code),
                                                    reason=f"this CPU cannot run the {isa} path"))
         for isa, code in ISAS.items()]
ALL_DTYPES = ["f32", "f16", "bf16", "q8_0", "q4_0"]


@pytest.fixture(autouse=True)
def restore_default_path():
    yield
    K.configure()


def _bound(raw, dtype, shape, x):
    """Per output, the sum of |terms|: the scale float32 rounding errors are measured against."""
    w = np.abs(oracles.dequantize(raw, dtype, shape).astype(np.float64))
    xa = np.abs(x.astype(np.float64))
    if dtype in ("q8_0", "q4_0"):
        q, d, _ = oracles.quantize_act(x)
        xa = np.abs(q.astype(np.float64)) * np.repeat(d, 32, axis=1)
    return xa @ w.T


# ---- conversions and weight quantization -------------------------------------------------------------------

def test_f16_conversion_matches_numpy_bit_for_bit():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(5000) * 10 ** rng.uniform(-9, 5, 5000),
                        [0.0, -0.0, 65504, 65520, 1e6, -1e6, 5.96e-8, 2.98e-8, 6.1e-5, np.inf, -np.inf]])
    x = x.astype(np.float32)[None, :]
    x = x[:, : x.shape[1] // 32 * 32]
    got = K.quantize(x, "f16").view(np.uint16)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    assert np.array_equal(got, expected.view(np.uint16))
    assert np.array_equal(K.dequantize(got.view(np.uint8), "f16", x.shape), expected.astype(np.float32))


def test_bf16_conversion_rounds_to_nearest_even():
    x = np.array([[1.0, 1.00390625, 1.01171875, -3.5, 1e-30, 3e38] + [0.0] * 26], np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    expected = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(K.quantize(x, "bf16").view(np.uint16), expected)


@pytest.mark.parametrize("dtype,oracle", [("q8_0", oracles.quantize_q8_0), ("q4_0", oracles.quantize_q4_0)])
@pytest.mark.parametrize("shape", [(1, 32), (31, 64), (33, 96), (7, 8192)])
def test_weight_quantization_is_byte_exact(dtype, oracle, shape):
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, :32] = 0.0                                   # an all-zero block must not divide by zero
    got = K.quantize(x, dtype)
    assert np.array_equal(got, oracle(x))
    assert np.array_equal(K.dequantize(got, dtype, shape), oracles.dequantize(got, dtype, shape))


@pytest.mark.parametrize("threads", [1, 3])
def test_weight_quantization_split_between_threads_changes_no_byte(threads):
    """A matrix large enough for the pool (rows in chunks of about 64K values), with q4_0 blocks whose largest
    magnitude comes with both signs (the first one sets d's sign, as in GGML's loop)."""
    K.configure(threads=threads)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((301, 544)).astype(np.float32)
    x[5, :32] = [3.0, -3.0] + [1.0] * 30              # +3 first: d = -3/8
    x[6, :32] = [1.0, -3.0, 3.0] + [0.5] * 29         # -3 first: d = +3/8
    x[7, 32:64] = [-2.0] * 16 + [2.0] * 16
    for dtype, oracle in (("q8_0", oracles.quantize_q8_0), ("q4_0", oracles.quantize_q4_0)):
        got = K.quantize(x, dtype)
        assert np.array_equal(got, oracle(x)), dtype
        assert np.array_equal(K.dequantize(got, dtype, x.shape), oracles.dequantize(got, dtype, x.shape)), dtype
    assert K.quantize(x, "q4_0")[5, :2].view(np.float16)[0] == np.float16(-0.375)
    assert K.quantize(x, "q4_0")[6, :2].view(np.float16)[0] == np.float16(0.375)
    assert np.array_equal(K.quantize(x, "f16").view(np.uint16), x.astype(np.float16).view(np.uint16))
    u = x.view(np.uint32).astype(np.uint64)
    assert np.array_equal(K.quantize(x, "bf16").view(np.uint16), ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16))
    for dtype in ("f16", "bf16"):
        raw = K.quantize(x, dtype)
        assert np.array_equal(K.dequantize(raw, dtype, x.shape), oracles.dequantize(raw, dtype, x.shape))


def test_q4_0_block_layout_is_ggml():
    # element j in the low nibble of byte j, element j+16 in its high nibble; value = (nibble - 8) * d
    x = np.array([[-8.0] + list(range(-7, 8)) + list(range(7, -9, -1))], np.float32)   # max magnitude -8 -> d = 1
    raw = K.quantize(x, "q4_0")[0]
    assert raw[:2].view(np.float16)[0] == 1.0
    nib = np.concatenate([raw[2:] & 0xF, raw[2:] >> 4]).astype(int) - 8
    assert list(nib) == list(x[0].astype(int))


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
def test_quantize_rejects_rows_not_a_multiple_of_32(dtype):
    with pytest.raises(ValueError, match=rf"shape \(4, 33\) to {dtype}.*multiple of 32"):
        K.quantize(np.zeros((4, 33), np.float32), dtype)


def test_get_rows_dequantizes_only_the_requested_rows():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((50, 64)).astype(np.float32)
    W = K.Weight.from_float(w, "q8_0")
    ids = np.array([49, 0, 7, 7], np.int32)
    out = np.empty((4, 64), np.float32)
    assert lib.pt_get_rows(W.c, K.ffi.cast("int32_t *", K.ffi.from_buffer(ids)), 4, K.ffi.cast("float *", K.ffi.from_buffer(out))) == 0
    assert np.array_equal(out, W.dequantize()[ids])
    bad = np.array([50], np.int32)
    assert lib.pt_get_rows(W.c, K.ffi.cast("int32_t *", K.ffi.from_buffer(bad)), 1, K.ffi.cast("float *", K.ffi.from_buffer(out))) == -1


# ---- activation quantization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("K_", [32, 96, 4096, 8192])
def test_activation_quantization_is_exact_on_every_path(isa, K_):
    K.configure(isa=isa)
    rng = np.random.default_rng(K_)
    x = (rng.standard_normal((3, K_)) * rng.uniform(0.01, 100)).astype(np.float32)
    x[1, :32] = 0.0
    x[2, -32:] = np.arange(32, dtype=np.float32) - 15.5          # exact .5 ties: round half to even ...
    x[2, -1] = 127.0                                              # ... with d = 1 in this block
    q, d, s = K.quantize_act(x)
    eq, ed, es = oracles.quantize_act(x)
    assert np.array_equal(q, eq) and np.array_equal(d, ed) and np.array_equal(s, es)


# ---- matrix products ------------------------------------------------------------------------------------------

SHAPES = [(1, 32), (31, 64), (33, 96), (4097, 256), (5, 4096), (3, 8192)]


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("cols", [32, 96, 128, 416])
def test_a_token_gets_the_same_bits_in_any_batch(isa, dtype, cols):
    """The 4-token q8_0 / q4_0 loop summed a token's blocks in another order than the one-token loop, so a token's
    product changed by an ulp with its place in the batch; an int8 activation rounding downstream turned that into
    0.05 in the bundled model's logits when a reused KV cache split the prompt at another token."""
    _every_split_gives_the_whole_batchs_bits(isa, dtype, cols)


def _every_split_gives_the_whole_batchs_bits(isa, dtype, cols):
    """37 random rows against 11 tokens, then every run of consecutive tokens on its own: the same bits. Returns
    (W, w, x, the whole batch's products)."""
    K.configure(isa=isa)
    rng = np.random.default_rng(cols)
    w = rng.standard_normal((37, cols)).astype(np.float32)
    W = K.Weight(w if dtype == "f32" else K.quantize(w, dtype), dtype, w.shape)
    x = rng.standard_normal((11, cols)).astype(np.float32)
    whole = K.matmul(W, x)
    for start in range(11):
        for stop in range(start + 1, 12):
            assert np.array_equal(K.matmul(W, x[start:stop]), whole[start:stop]), (start, stop)
    return W, w, x, whole


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("cols", [8, 40, 45, 1031, 2075])
def test_float_weights_give_a_token_the_same_bits_in_any_batch_and_float64_within_rounding(isa, dtype, cols):
    """Float rows against a few tokens convert each 16 weights once for up to 4 tokens and carry the sums over spans
    of 1,024 values (speculative decoding's check passes): the tails of 8 and of single values, several spans and
    every batch split must give each token its one-token bits, and the sums stay float64's within float32
    rounding."""
    W, w, x, whole = _every_split_gives_the_whole_batchs_bits(isa, dtype, cols)
    exact = x.astype(np.float64) @ K.dequantize(W.raw, dtype, w.shape).astype(np.float64).T
    bound = 4 * cols * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(w).T * 1.01)
    assert np.all(np.abs(whole - exact) <= bound)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("cols", [96, 1056, 16416])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_prefill_gives_each_token_the_bits_it_gets_alone(isa, dtype, cols, threads):
    """A prefill runs the x86 paths' token tiles (5 tokens against each weight block) and splits its tokens between
    chunks of the pool; every token must still get the bits of a one-token call, wherever the tiles and chunks cut:
    on rows that fill no chunk evenly, and on rows too long for the tiles' scale buffers (16416 columns)."""
    K.configure(isa=isa, threads=threads)
    rng = np.random.default_rng(cols)
    rows = 19 if cols > 4096 else 83
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    W = K.Weight(K.quantize(w, dtype), dtype, w.shape)
    x = rng.standard_normal((97, cols)).astype(np.float32)
    whole = K.matmul(W, x)
    alone = np.concatenate([K.matmul(W, x[t:t + 1]) for t in range(len(x))])
    assert np.array_equal(whole, alone)
    assert np.array_equal(K.matmul(W, x[3:90]), whole[3:90])
    ref = oracles.matmul(W.raw, dtype, w.shape, x)
    assert (np.abs(whole - ref) <= 2e-5 * _bound(W.raw, dtype, w.shape, x) + 1e-6).all()


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("T", [1, 4, 7])
def test_matmul_matches_numpy_oracle(isa, dtype, shape, T):
    K.configure(isa=isa)
    rng = np.random.default_rng(hash((dtype, shape, T)) % 2**32)
    W = K.Weight.from_float(rng.standard_normal(shape).astype(np.float32), dtype)
    x = rng.standard_normal((T, shape[1])).astype(np.float32)
    y = K.matmul(W, x)
    ref = oracles.matmul(W.raw, dtype, shape, x)
    err = np.abs(y - ref)
    tol = 2e-5 * _bound(W.raw, dtype, shape, x) + 1e-6
    assert (err <= tol).all(), f"{isa} {dtype} {shape} T={T}: maxdiff {err.max():.3g}, worst ratio {(err / tol).max():.3g}"


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_simd_paths_match_the_scalar_reference(dtype):
    rng = np.random.default_rng(11)
    shape = (129, 1024)
    W = K.Weight.from_float(rng.standard_normal(shape).astype(np.float32), dtype)
    x = rng.standard_normal((6, shape[1])).astype(np.float32)
    K.configure(isa="scalar")
    ref = K.matmul(W, x)
    tol = 2e-5 * _bound(W.raw, dtype, shape, x) + 1e-6
    for isa in ("avx2", "avxvnni", "avx512"):
        if not lib.pt_isa_supported(ISAS[isa]):
            continue
        K.configure(isa=isa)
        assert (np.abs(K.matmul(W, x) - ref) <= tol).all(), isa


X86_PATHS = [pytest.param(isa, marks=pytest.mark.skipif(not lib.pt_isa_supported(ISAS[isa]),
                                                         reason=f"this CPU cannot run the {isa} path"))
             for isa in ("avx2", "avxvnni", "avx512")]


@pytest.mark.parametrize("isa", X86_PATHS)
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("rows,cols,T", [(8, 32, 1), (13, 64, 3), (37, 96, 9), (64, 896, 17), (21, 4864, 5),
                                         (256, 128, 41), (7, 416, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_x86_integer_matmuls_give_the_scalar_references_bits(isa, dtype, rows, cols, T, threads):
    """The x86 q8_0 / q4_0 kernels do the scalar reference's arithmetic (whole-block integer sums, then
    sum += (dw * dx) * isum, never fused): equal bits, for groups of 8 rows and the rows left over, any T."""
    rng = np.random.default_rng(rows * cols + T)
    W = K.Weight.from_float(rng.standard_normal((rows, cols), dtype=np.float32), dtype)
    x = rng.standard_normal((T, cols), dtype=np.float32)
    K.configure(isa="scalar", threads=1)
    ref = K.matmul(W, x)
    K.configure(isa=isa, threads=threads)
    np.testing.assert_array_equal(K.matmul(W, x), ref)
    np.testing.assert_array_equal(np.concatenate([K.matmul(W, x[t:t + 1]) for t in range(T)]), ref)


def test_quantized_matmul_is_close_to_float_matmul():
    # the price of q8 activations and q8_0 / q4_0 weights on a 4096-wide dot product, stated as a relative error
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 4096)).astype(np.float32)
    x = rng.standard_normal((2, 4096)).astype(np.float32)
    exact = x.astype(np.float64) @ w.astype(np.float64).T
    scale = np.abs(exact).max()
    assert np.abs(K.matmul(K.Weight.from_float(w, "q8_0"), x) - exact).max() / scale < 0.02
    assert np.abs(K.matmul(K.Weight.from_float(w, "q4_0"), x) - exact).max() / scale < 0.15


@pytest.mark.parametrize("dtype", ["f32", "q8_0", "q4_0"])
def test_thread_count_does_not_change_results(dtype):
    rng = np.random.default_rng(2)
    W = K.Weight.from_float(rng.standard_normal((1000, 512)).astype(np.float32), dtype)
    x = rng.standard_normal((5, 512)).astype(np.float32)
    K.configure(threads=1)
    one = K.matmul(W, x)
    K.configure(threads=2)
    assert np.array_equal(one, K.matmul(W, x))
    K.configure(threads=3)
    assert np.array_equal(one, K.matmul(W, x))


def test_accumulate_adds_into_y_and_matmul3_equals_three_calls():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    Ws = [K.Weight.from_float(rng.standard_normal((r, 128)).astype(np.float32), dt)
          for r, dt in ((96, "q8_0"), (32, "q4_0"), (40, "f16"))]
    y0 = rng.standard_normal((3, 96)).astype(np.float32)
    acc = y0.copy()
    K.matmul(Ws[0], x, out=acc, accumulate=True)
    assert np.array_equal(acc, y0 + K.matmul(Ws[0], x))
    outs = [np.empty((3, W.shape[0]), np.float32) for W in Ws]
    p = [K.ffi.cast("float *", K.ffi.from_buffer(o)) for o in outs]
    assert lib.pt_matmul3(Ws[0].c, Ws[1].c, Ws[2].c, K.ffi.cast("float *", K.ffi.from_buffer(x)), 3, *p) == 0
    for W, o in zip(Ws, outs):
        assert np.array_equal(o, K.matmul(W, x))


def test_matmul_rejects_mismatched_shapes():
    W = K.Weight.from_float(np.zeros((4, 64), np.float32), "q8_0")
    with pytest.raises(ValueError, match=r"x of shape \(2, 32\) does not match a weight of shape \(4, 64\)"):
        K.matmul(W, np.zeros((2, 32), np.float32))


def test_matmul_releases_the_gil_and_is_safe_from_two_threads():
    rng = np.random.default_rng(9)
    W = K.Weight.from_float(rng.standard_normal((512, 1024)).astype(np.float32), "q4_0")
    xs = [rng.standard_normal((3, 1024)).astype(np.float32) for _ in range(2)]
    expected = [K.matmul(W, x) for x in xs]
    results, errors = [[], []], []

    def work(i):
        try:
            for _ in range(50):
                results[i].append(K.matmul(W, xs[i]))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(2):
        assert all(np.array_equal(r, expected[i]) for r in results[i])


# ---- per-layer ops --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("isa", PATHS)
def test_swiglu_exponential_is_accurate_over_the_whole_float_range(isa):
    """The kernels' own vectorised exp (not libm's expf) through SiLU: within 4e-7 relative (about 3 ulp, the exp and
    the division) of float64 from -87 to 87, where e^-g runs from 1.6e-38 to 6e37; beyond, SiLU is g or -0."""
    K.configure(isa=isa)
    g = np.linspace(-87, 87, 400_001).astype(np.float32)
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(K.glu(g, np.ones_like(g), "silu"), g64 / (1 + np.exp(-g64)), rtol=4e-7, atol=0)
    far = np.array([-200, -100, 100, 200, np.inf], np.float32)
    assert list(K.glu(far, np.ones_like(far), "silu")) == [-0.0, -0.0, 100, 200, np.inf]
    # -inf / (1 + e^inf) is NaN in IEEE arithmetic, as with libm's expf; NaN stays NaN
    assert np.isnan(K.glu(np.array([-np.inf, np.nan], np.float32), np.ones(2, np.float32), "silu")).all()


@pytest.mark.parametrize("isa", PATHS)
def test_rmsnorm_and_swiglu(isa):
    K.configure(isa=isa)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 897)).astype(np.float32)
    w = rng.standard_normal(897).astype(np.float32)
    np.testing.assert_allclose(K.norm(x, w, None, 1e-5), oracles.rmsnorm(x, w, 1e-5), rtol=2e-6, atol=2e-6)
    g, u = rng.standard_normal(4865).astype(np.float32) * 4, rng.standard_normal(4865).astype(np.float32)
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(K.glu(g, u, "silu"), g64 / (1 + np.exp(-g64)) * u, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_store_rotates_q_and_k_and_fills_the_cache(interleaved):
    rng = np.random.default_rng(7)
    T, H, KV, hd, pos0, n_ctx = 5, 4, 2, 16, 3, 12
    cos, sin = Rope(hd, 10000.0).tables(64)
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    k = rng.standard_normal((T, KV, hd)).astype(np.float32)
    v = rng.standard_normal((T, KV, hd)).astype(np.float32)
    kc = np.zeros((KV, n_ctx, hd), np.float32)
    vc = np.zeros((KV, n_ctx, hd), np.float32)
    q0 = q.copy()
    K.rope_store(q, k, v, pos0, cos, sin, interleaved, kc, vc)
    pos = np.arange(pos0, pos0 + T)
    np.testing.assert_allclose(q, oracles.rope(q0, pos, 10000.0, interleaved), rtol=0, atol=2e-5)
    np.testing.assert_allclose(kc[:, pos0:pos0 + T].transpose(1, 0, 2), oracles.rope(k, pos, 10000.0, interleaved),
                               rtol=0, atol=2e-5)
    assert np.array_equal(vc[:, pos0:pos0 + T].transpose(1, 0, 2), v)
    assert not kc[:, :pos0].any() and not kc[:, pos0 + T:].any()
    with pytest.raises(ValueError, match="do not fit the cache"):
        K.rope_store(q, k, v, n_ctx - 2, cos, sin, interleaved, kc, vc)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("T,pos0,H,KV,hd", [(1, 0, 4, 4, 16), (1, 40, 14, 2, 64), (6, 9, 6, 2, 32), (17, 0, 2, 1, 8),
                                            (3, 70, 4, 2, 96), (2, 300, 8, 2, 128), (5, 33, 4, 1, 80)])
def test_attention_is_causal_grouped_query(isa, T, pos0, H, KV, hd):
    K.configure(isa=isa)
    rng = np.random.default_rng(T * 100 + pos0)
    n_ctx = pos0 + T + 3
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    kc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    vc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    kc[:, pos0 + T:] = 1e4                            # positions past the query must not be read
    scale = hd ** -0.5
    np.testing.assert_allclose(K.attention(q, kc, vc, pos0, scale), oracles.attention(q, kc, vc, pos0, scale),
                               rtol=0, atol=5e-5)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("T,pos0,H,KV,hd,softcap,window", [
    (1, 0, 4, 4, 16, 0.0, 0), (1, 40, 14, 2, 64, 0.0, 0), (6, 9, 6, 2, 32, 0.0, 0), (17, 0, 2, 1, 8, 0.0, 0),
    (3, 70, 4, 2, 96, 0.0, 0), (2, 300, 8, 2, 128, 30.0, 0), (5, 33, 4, 1, 80, 0.0, 7), (1, 1000, 2, 2, 64, 0.0, 0)])
def test_attention_over_the_int8_cache(isa, T, pos0, H, KV, hd, softcap, window):
    """pt_attention_q8 against float64 attention over the dequantized cache (row p of a kv head is k8[p] * scale[p]),
    with head sizes the SIMD paths split differently (8 .. 128, 80 and 96 not powers of two), soft-capping and a
    sliding window. Bound: 2e-5 on outputs of size ~0.1-1, float32 sums over up to 1,001 positions."""
    K.configure(isa=isa)
    rng = np.random.default_rng(T * 1000 + pos0 + hd)
    n_ctx = pos0 + T + 3
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    k8 = rng.integers(-127, 128, (KV, n_ctx, hd)).astype(np.int8)
    v8 = rng.integers(-127, 128, (KV, n_ctx, hd)).astype(np.int8)
    ks = rng.uniform(0.005, 0.03, (KV, n_ctx)).astype(np.float32)
    vs = rng.uniform(0.005, 0.03, (KV, n_ctx)).astype(np.float32)
    k8[:, pos0 + T:] = 127                            # positions past the query must not be read
    ks[:, pos0 + T:] = 1e4
    scale = hd ** -0.5
    out = np.empty_like(q)
    P = lambda a, t="float *": K.ffi.cast(t, K.ffi.from_buffer(a))
    rc = lib.pt_attention_q8(P(q), P(k8, "int8_t *"), P(ks), P(v8, "int8_t *"), P(vs), n_ctx, T, H, KV, hd, pos0,
                             scale, softcap, window, K.ffi.NULL, P(out))
    assert rc == 0
    kd = k8.astype(np.float32) * ks[..., None]
    vd = v8.astype(np.float32) * vs[..., None]
    expected = oracles.attention(q, kd, vd, pos0, scale, softcap, window)
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5)


@pytest.mark.parametrize("isa", PATHS)
def test_attention_over_the_int8_cache_passes_nan_and_infinity_on(isa):
    """A query holding NaN or infinity gives NaN in its head's output, on every path, and leaves the other heads alone."""
    K.configure(isa=isa)
    rng = np.random.default_rng(9)
    H, KV, hd, n_ctx = 4, 2, 64, 8
    k8 = rng.integers(-127, 128, (KV, n_ctx, hd)).astype(np.int8)
    ks = np.full((KV, n_ctx), 0.02, np.float32)
    P = lambda a, t="float *": K.ffi.cast(t, K.ffi.from_buffer(a))
    for bad in (np.nan, np.inf):
        q = rng.standard_normal((1, H, hd)).astype(np.float32)
        q[0, 1, 5] = bad
        out = np.empty_like(q)
        assert lib.pt_attention_q8(P(q), P(k8, "int8_t *"), P(ks), P(k8, "int8_t *"), P(ks), n_ctx, 1, H, KV, hd, 4,
                                   0.125, 0.0, 0, K.ffi.NULL, P(out)) == 0
        assert np.isnan(out[0, 1]).all() and np.isfinite(out[0, [0, 2, 3]]).all(), bad


# ---- path selection -------------------------------------------------------------------------------------------

def test_environment_forces_the_path_and_the_thread_count():
    env = dict(os.environ, PETIT_ISA="scalar", PETIT_THREADS="3")
    out = subprocess.run([sys.executable, "-c", "from petit.native import info; i = info(); print(i['isa'], i['threads'])"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["scalar", "3"]


def test_unknown_or_unsupported_path_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kernel path 'sve'.*scalar, avx2, avxvnni, avx512, neon"):
        K.configure(isa="sve")
    unsupported = [isa for isa, code in ISAS.items() if not lib.pt_isa_supported(code)]
    if unsupported:
        with pytest.raises(ValueError, match=f"kernel path '{unsupported[0]}' is not supported by this CPU"):
            K.configure(isa=unsupported[0])
    with pytest.raises(ValueError, match="thread count must be an integer in 1..256, got 0"):
        K.configure(threads=0)


@pytest.mark.parametrize("isa", PATHS)
def test_nan_activations_give_nan_and_tiny_blocks_give_zero(isa):
    K.configure(isa=isa)
    W = K.Weight.from_float(np.ones((2, 64), np.float32), "q8_0")
    for where in (0, 8, 31, 40):
        x = np.ones(64, np.float32)
        x[where] = np.nan
        assert np.isnan(K.matmul(W, x)).all(), where
    tiny = np.full(64, 1e-39, np.float32)          # 1/d would overflow: the block quantizes to zero
    assert np.array_equal(K.matmul(W, tiny), np.zeros(2, np.float32))


def test_wrappers_refuse_shapes_that_would_overrun_memory():
    q = np.zeros((1, 1, 64), np.float32)
    with pytest.raises(ValueError, match="bad attention shapes"):
        K.attention(q, np.zeros((1, 4, 64), np.float32), np.zeros((1, 4, 1), np.float32), 0, 1.0)
    cos, sin = Rope(64, 10000.0).tables(8)
    with pytest.raises(ValueError, match="bad rope shapes"):
        K.rope_store(q, np.zeros((1, 1, 1), np.float32), np.zeros((1, 1, 64), np.float32), 0, cos, sin, False,
                     np.zeros((1, 8, 64), np.float32), np.zeros((1, 8, 64), np.float32))
    W = K.Weight.from_float(np.ones((8, 64), np.float32), "f32")
    with pytest.raises(ValueError, match="writable"):
        K.matmul(W, np.ones(64, np.float32), out=np.frombuffer(bytes(32), np.float32), accumulate=True)
