"""The ops the families beyond Llama need, against float64 NumPy: LayerNorm / RMSNorm with per-head weights and
bias, activations, gated activations (all on every path this CPU has: each path compiles its own copy of them),
partial and absent RoPE, soft-capped and sliding-window attention."""
import math

import numpy as np
import pytest

import petit.native as K
from petit.models.blocks.rope import Rope   # the tables the model hands to pt_rope_store
from petit.native import ISAS, lib
from tests import oracles

PATHS = [isa for isa, code in ISAS.items() if lib.pt_isa_supported(code)]


@pytest.fixture(autouse=True)
def _restore_path():
    yield
    K.configure(isa=None)


def _ref_norm(x, w, b, eps, kind):
    x = x.astype(np.float64)
    if kind == "layer":
        x = x - x.mean(axis=-1, keepdims=True)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("rows,D,w_rows,bias", [(1, 7, 1, False), (5, 64, 1, True), (12, 16, 4, True),
                                                (3, 33, 0, False), (2, 897, 1, True), (4, 45, 2, False)])
def test_norm_matches_float64(isa, kind, rows, D, w_rows, bias):
    K.configure(isa=isa)
    rng = np.random.default_rng(rows * D)
    x = (rng.standard_normal((rows, D)) * 3 + 1).astype(np.float32)
    w = None if w_rows == 0 else rng.standard_normal((w_rows, D) if w_rows > 1 else (D,)).astype(np.float32)
    b = rng.standard_normal(w.shape).astype(np.float32) if bias else None
    got = K.norm(x, w, b, 1e-5, kind)
    if w is not None and w.ndim == 2:       # per-head weights: row r uses w[r % w_rows]
        w, b = np.tile(w, (rows // w_rows, 1)), None if b is None else np.tile(b, (rows // w_rows, 1))
    np.testing.assert_allclose(got, _ref_norm(x, w, b, 1e-5, kind), rtol=2e-5, atol=2e-5)


ACTS = {"none": lambda x: x, "silu": lambda x: x / (1 + np.exp(-x)),
        "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
        "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
        "relu": lambda x: np.maximum(x, 0), "relu2": lambda x: np.maximum(x, 0) ** 2}


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_a_row_gets_the_same_bits_alone_in_place_and_at_any_alignment(isa, kind):
    """A token's norm must not depend on the batch it comes in, nor on where its row sits in memory (a reused KV
    cache must give the logits a fresh prefill gives): the sums run in a fixed order, never the vectoriser's."""
    K.configure(isa=isa)
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 203)) * 2 + 0.5).astype(np.float32)
    w, b = rng.standard_normal(203).astype(np.float32), rng.standard_normal(203).astype(np.float32)
    batch = K.norm(x, w, b, 1e-6, kind)
    for r in range(6):
        for shift in range(5):               # the row at every float offset within a 16-byte line and beyond
            buf = np.zeros(203 + shift, np.float32)
            buf[shift:] = x[r]
            assert np.array_equal(K.norm(buf[shift:][None], w, b, 1e-6, kind)[0], batch[r]), (r, shift)
    inplace = x.copy()
    code = {"rms": 0, "layer": 1}[kind]
    assert lib.pt_norm(code, K._ptr(inplace), K._ptr(w), K._ptr(b), 1e-6, 6, 203, 1, K._out(inplace)) == 0
    assert np.array_equal(inplace, batch)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("act", list(ACTS))
def test_bias_act_and_glu_match_float64(isa, act):
    K.configure(isa=isa)
    rng = np.random.default_rng(3)
    y = (rng.standard_normal((3, 37)) * 4).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    y64 = y.astype(np.float64) + b
    np.testing.assert_allclose(K.bias_act(y, b, act), ACTS[act](y64), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(K.bias_act(y, None, act), ACTS[act](y.astype(np.float64)), rtol=2e-6, atol=2e-6)
    u = rng.standard_normal((3, 37)).astype(np.float32)
    np.testing.assert_allclose(K.glu(y, u, act), ACTS[act](y.astype(np.float64)) * u, rtol=2e-6, atol=2e-6)


# the same functions in forms that stay accurate in float64 far into the negative tail, where 1 + tanh(u) and
# 1 + erf(z) cancel to 0: x / (1 + e^-2u) is 0.5 x (1 + tanh u), 0.5 x erfc(-z) is 0.5 x (1 + erf z)
TAILS = {"silu": ACTS["silu"],
         "gelu_tanh": lambda x: x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
         "gelu": lambda x: 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2))}


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("act", list(TAILS))
def test_activations_are_accurate_over_the_whole_float_range(isa, act):
    """The vectorised forms (the kernels' own exp; GELU-tanh as x / (1 + e^-2u), GELU-erf through a fitted erfc)
    against float64 from -60 to 60: within 3e-6 relative wherever |act(x)| >= 1e-6; in the tail, where e^-x^2 makes
    the float rounding of x^2 count, within 2e-5 relative down to where a float cannot hold the value; infinities,
    zeros and NaN as the formulas give them."""
    K.configure(isa=isa)
    x = np.linspace(-60, 60, 480_001).astype(np.float32)
    with np.errstate(over="ignore"):
        want = TAILS[act](x.astype(np.float64))
    big = np.abs(want) >= 1e-6
    for got in (K.bias_act(x[None], None, act)[0], K.glu(x, np.ones_like(x), act)):
        np.testing.assert_allclose(got[big], want[big], rtol=3e-6, atol=0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-33)
    special = np.array([np.inf, 1e30, 0.0, -0.0, -1e30], np.float32)
    got = K.bias_act(special[None], None, act)[0]
    assert got[0] == np.inf and got[1] == np.float32(1e30) and got[2] == 0 and got[3] == 0 and got[4] == 0
    assert np.isnan(K.bias_act(np.array([[np.nan]], np.float32), None, act)).all()


def test_activations_with_parameters_match_float64():
    """OLMo's clip_qkv clamp and Apertus's xIELU (transformers' XIELUActivation: alpha_p x^2 + beta x above 0,
    (expm1(min(x, eps)) - x) alpha_n + beta x below), over an odd number of values including 0 and the far tails."""
    x = np.concatenate([np.linspace(-30, 30, 1001), [0.0, -1e-7, 1e-7, -80.0]]).astype(np.float32)
    assert np.array_equal(K.param_act(x, "clamp", (-2.5, 2.5)), np.clip(x, -2.5, 2.5))
    ap, an, beta, eps = 0.9, 1.3, 0.5, -1e-6
    x64 = x.astype(np.float64)
    want = np.where(x64 > 0, ap * x64 * x64 + beta * x64, (np.expm1(np.minimum(x64, eps)) - x64) * an + beta * x64)
    np.testing.assert_allclose(K.param_act(x, "xielu", (ap, an, beta, eps)), want, rtol=2e-6, atol=1e-7)
    p = np.zeros(4, np.float32)
    assert lib.pt_param_act(3, K._ptr(x.copy()), x.size, K._ptr(p)) == -1      # an unknown kind is refused (2: tanh)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("T,pos0,hd", [(1, 40, 16), (9, 0, 16), (70, 3, 40), (5, 130, 64)])
def test_alibi_attention_matches_float64_and_decode_equals_prefill(isa, T, pos0, hd):
    """ALiBi (BLOOM, MPT, Falcon): slope_h * (j - i) added to the scaled score of key j for the query at i, with
    BLOOM's slopes for 6 heads (not a power of two) over 2 kv heads; a prefill is within the float64 oracle's bound
    and decoding its last token alone gives the same bits."""
    K.configure(isa=isa)
    rng = np.random.default_rng(T * 31 + pos0)
    H, KV = 6, 2
    n_ctx = pos0 + T + 2
    slopes = np.array([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3], np.float32)
    q = (rng.standard_normal((T, H, hd)) * 2).astype(np.float32)
    kc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    vc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    kc[:, pos0 + T:] = 1e4
    got = K.attention(q, kc, vc, pos0, hd ** -0.5, alibi=slopes)
    want = oracles.attention(q, kc, vc, pos0, hd ** -0.5, alibi=slopes)
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5)
    assert not np.allclose(got, oracles.attention(q, kc, vc, pos0, hd ** -0.5), atol=1e-3)   # the bias matters
    last = K.attention(q[T - 1:], kc, vc, pos0 + T - 1, hd ** -0.5, alibi=slopes)
    assert np.array_equal(last[0], got[T - 1])


@pytest.mark.parametrize("rot,interleaved", [(8, False), (4, True), (0, False)])
def test_partial_rope_rotates_only_the_leading_values(rot, interleaved):
    rng = np.random.default_rng(rot)
    T, H, KV, hd, pos0, n_ctx = 4, 4, 2, 16, 2, 8
    q = rng.standard_normal((T, H, hd)).astype(np.float32)
    k = rng.standard_normal((T, KV, hd)).astype(np.float32)
    v = rng.standard_normal((T, KV, hd)).astype(np.float32)
    kc, vc = np.zeros((KV, n_ctx, hd), np.float32), np.zeros((KV, n_ctx, hd), np.float32)
    q0, pos = q.copy(), np.arange(pos0, pos0 + T)
    tables = Rope(rot, 500.0).tables(16) if rot else (None, None)
    K.rope_store(q, k, v, pos0, *tables, interleaved, kc, vc)
    want_q, want_k = q0.astype(np.float64), k.astype(np.float64)
    if rot:
        want_q[..., :rot] = oracles.rope(q0[..., :rot], pos, 500.0, interleaved)
        want_k[..., :rot] = oracles.rope(k[..., :rot], pos, 500.0, interleaved)
    np.testing.assert_allclose(q, want_q, rtol=0, atol=2e-5)
    np.testing.assert_allclose(kc[:, pos0:pos0 + T].transpose(1, 0, 2), want_k, rtol=0, atol=2e-5)
    assert np.array_equal(vc[:, pos0:pos0 + T].transpose(1, 0, 2), v)


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("T,pos0,window,softcap", [(1, 20, 4, 0.0), (9, 3, 5, 0.0), (6, 0, 1, 0.0),
                                                   (5, 7, 0, 2.0), (7, 2, 3, 1.5), (3, 1, 100, 0.0)])
def test_attention_window_and_softcap(isa, T, pos0, window, softcap):
    K.configure(isa=isa)
    rng = np.random.default_rng(T + pos0 + window)
    H, KV, hd = 4, 2, 16
    n_ctx = pos0 + T + 2
    q = (rng.standard_normal((T, H, hd)) * 2).astype(np.float32)
    kc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    vc = rng.standard_normal((KV, n_ctx, hd)).astype(np.float32)
    kc[:, pos0 + T:] = 1e4
    got = K.attention(q, kc, vc, pos0, 0.25, softcap=softcap, window=window)
    np.testing.assert_allclose(got, oracles.attention(q, kc, vc, pos0, 0.25, softcap, window), rtol=0, atol=5e-5)


BLOCK = 64     # PT_ATTN_BLOCK in kernels/internal.h: attention cuts a query's positions into blocks this long


def _attend(q, kv, pos0, scale, softcap, window):
    """attention of q [T, H, hd] at positions pos0.. over kv = (k, v) float caches or (k8, ks, v8, vs) int8 ones"""
    if len(kv) == 2:
        return K.attention(q, *kv, pos0, scale, softcap=softcap, window=window)
    k8, ks, v8, vs = kv
    (T, H, hd), (KV, n_ctx) = q.shape, ks.shape
    out = np.empty_like(q)
    P = lambda a, t="float *": K.ffi.cast(t, K.ffi.from_buffer(a))   # noqa: E731
    assert lib.pt_attention_q8(P(q), P(k8, "int8_t *"), P(ks), P(v8, "int8_t *"), P(vs), n_ctx, T, H, KV, hd, pos0,
                               scale, softcap, window, K.ffi.NULL, P(out)) == 0
    return out


@pytest.mark.parametrize("isa", PATHS)
@pytest.mark.parametrize("kv_type", ["f32", "int8"])
@pytest.mark.parametrize("n,hd,window,softcap", [(BLOCK - 1, 64, 0, 0.0), (BLOCK, 64, 0, 20.0),
                                                 (BLOCK * 7 // 2, 64, 0, 0.0), (BLOCK * 7 // 2, 40, 0, 0.0),
                                                 (BLOCK * 7 // 2 + 3, 64, BLOCK + 5, 0.0),
                                                 (BLOCK * 3 + 1, 32, 2 * BLOCK, 15.0), (BLOCK * 2 + 9, 64, 7, 0.0)])
def test_attention_over_several_blocks_gives_the_same_bits_any_way_it_is_split(isa, kv_type, n, hd, window, softcap):
    """Contexts of 1 block - 1, 1 block and up to 3.5 blocks of positions, with sliding windows that start inside a
    block and soft-capping, grouped-query (6 heads over 2 kv heads): a prefill of n tokens is within the float64
    oracle's bound (5e-5 over the float cache, 2e-5 over the dequantized int8 cache, outputs of size ~0.1-1), gives
    the same bits on 1, 2 and 3 threads, and so does decoding one token at each position and a short chunk of the
    last 5 (the split over positions a decode uses), so a reused KV cache gives a fresh prefill's logits."""
    K.configure(isa=isa, threads=1)
    rng = np.random.default_rng(n * 7 + hd + window)
    H, KV, n_ctx = 6, 2, n + 2
    scale = hd ** -0.5
    q = (rng.standard_normal((n, H, hd)) * 1.5).astype(np.float32)
    if kv_type == "f32":
        kv = tuple(rng.standard_normal((KV, n_ctx, hd)).astype(np.float32) for _ in range(2))
        kv[0][:, n:] = 1e4                             # positions past the query must not be read
        kd, vd, bound = kv[0], kv[1], 5e-5
    else:
        k8, v8 = (rng.integers(-127, 128, (KV, n_ctx, hd)).astype(np.int8) for _ in range(2))
        ks, vs = (rng.uniform(0.005, 0.03, (KV, n_ctx)).astype(np.float32) for _ in range(2))
        kv, bound = (k8, ks, v8, vs), 2e-5
        kd, vd = k8.astype(np.float32) * ks[..., None], v8.astype(np.float32) * vs[..., None]
        ks[:, n:] = 1e4
    prefill = _attend(q, kv, 0, scale, softcap, window)
    np.testing.assert_allclose(prefill, oracles.attention(q, kd, vd, 0, scale, softcap, window), rtol=0, atol=bound)
    for threads in (1, 2, 3):
        K.configure(isa=isa, threads=threads)
        assert np.array_equal(_attend(q, kv, 0, scale, softcap, window), prefill), f"prefill, {threads} threads"
        assert np.array_equal(_attend(q[n - 5:], kv, n - 5, scale, softcap, window), prefill[n - 5:]), threads
        for pos in range(n) if threads == 2 else (0, n // 2, n - 1):
            one = _attend(q[pos:pos + 1], kv, pos, scale, softcap, window)
            assert np.array_equal(one[0], prefill[pos]), f"decode at {pos}, {threads} threads"


def test_bad_arguments_are_errors_not_overruns():
    with pytest.raises(ValueError, match="norm w of shape"):
        K.norm(np.zeros((2, 8), np.float32), np.ones(7, np.float32), None, 1e-5)
    with pytest.raises(ValueError, match="window -1"):
        K.attention(np.zeros((1, 2, 8), np.float32), np.zeros((1, 4, 8), np.float32), np.zeros((1, 4, 8), np.float32),
                    0, 1.0, window=-1)
    cos, sin = Rope(16, 1e4).tables(8)
    with pytest.raises(ValueError, match="rotating 16 values"):
        K.rope_store(np.zeros((1, 1, 8), np.float32), np.zeros((1, 1, 8), np.float32), np.zeros((1, 1, 8), np.float32),
                     0, cos, sin, False, np.zeros((1, 4, 8), np.float32), np.zeros((1, 4, 8), np.float32))


def test_q8_0_rounds_halves_away_from_zero_as_ggml_does():
    # amax 127 makes the scale exactly 1, so x.5 values are exact ties: GGML's roundf sends them away from zero
    x = np.zeros((1, 32), np.float32)
    x[0, :8] = [127.0, -0.5, 0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997]
    q = K.quantize(x, "q8_0")[0, 2:].view(np.int8)
    assert q[:8].tolist() == [127, -1, 1, 2, -2, 3, -3, 0]
