"""The recurrent mixers' chunked scans (kernels/kern_scan.h, kernels/deltanet.c) against their recurrent forms:
Gated DeltaNet's delta rule, chunked in PT_SCAN_CHUNK = 64 tokens (the WY form), over odd sizes and prompts shorter
than a chunk, of one chunk and one token more, and of several chunks; a chunked prefill's state continues in a
second prefill and in decode. The two forms sum in other orders, so they agree to float32 rounding, not to the bit:
within 1e-5 of the largest output (measured at most 3.8e-6), and both within 1e-5 of a float64 recurrence (measured:
the chunked form 3.8e-6, the recurrent one 2.1e-7)."""
import numpy as np
import pytest

from petit.native import ffi, lib

CHUNK = 64
P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
MODES = {"auto": 0, "recurrent": 1, "chunked": 2}


def _inputs(T, H, dk, dv, seed):
    """q, k l2-normed (q times dk^-1/2), v, log decays g <= 0 (some strong), beta in (0, 1): [T][H][...]"""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((T, H, dk))
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) / np.sqrt(dk)
    k = rng.standard_normal((T, H, dk))
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((T, H, dv))
    g = -rng.exponential(0.3, (T, H)) * (rng.uniform(size=(T, H)) < 0.9) - 8.0 * (rng.uniform(size=(T, H)) < 0.02)
    beta = rng.uniform(0, 1, (T, H))
    return [a.astype(np.float32) for a in (q, k, v, g, beta)]


def _rule(inp, mode, S):
    """pt_delta_rule from state S (copied): (o, S)"""
    q, k, v, g, beta = inp
    T, H, dk = q.shape
    S = np.array(S, np.float32)
    o = np.full((T, H, v.shape[2]), np.nan, np.float32)
    assert lib.pt_delta_rule(P(q), P(k), P(v), P(g), P(beta), T, H, dk, v.shape[2], P(S), P(o), MODES[mode]) == 0
    return o, S


def _rule_f64(inp, S):
    q, k, v, g, beta = (a.astype(np.float64) for a in inp)
    S = np.array(S, np.float64)
    o = np.empty(v.shape)
    for t in range(len(q)):
        S = S * np.exp(g[t])[:, None, None]
        delta = (v[t] - np.einsum("hij,hi->hj", S, k[t])) * beta[t][:, None]
        S = S + k[t][:, :, None] * delta[:, None, :]
        o[t] = np.einsum("hij,hi->hj", S, q[t])
    return o, S


def _close(got, want, tol=1e-5):
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("T", [1, 5, 8, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 37])
@pytest.mark.parametrize("H,dk,dv", [(1, 7, 5), (3, 17, 33), (5, 32, 16)])
def test_the_chunked_delta_rule_is_the_recurrence(T, H, dk, dv):
    inp = _inputs(T, H, dk, dv, seed=T * 31 + dk)
    S0 = np.random.default_rng(T).standard_normal((H, dk, dv)).astype(np.float32) * 0.5
    o1, S1 = _rule(inp, "recurrent", S0)
    o2, S2 = _rule(inp, "chunked", S0)
    o64, S64 = _rule_f64(inp, S0)
    for o, S in ((o1, S1), (o2, S2)):
        _close(o, o64)
        _close(S, S64)
    _close(o2, o1)
    _close(S2, S1)


def test_the_chunked_delta_rule_at_qwen3_next_sizes():
    """16 heads of 128 x 128 over two chunks and a part: the sizes bench/bench_scan.py times"""
    inp = _inputs(2 * CHUNK + 9, 16, 128, 128, seed=7)
    S0 = np.zeros((16, 128, 128), np.float32)
    o1, S1 = _rule(inp, "recurrent", S0)
    o2, S2 = _rule(inp, "chunked", S0)
    _close(o2, o1)
    _close(S2, S1)


@pytest.mark.parametrize("A,B", [(70, 59), (CHUNK, 3), (5, CHUNK + 1)])
def test_a_chunked_prefills_state_continues_in_a_second_prefill_and_in_decode(A, B):
    H, dk, dv = 3, 24, 19
    inp = _inputs(A + B, H, dk, dv, seed=A + B)
    S0 = np.zeros((H, dk, dv), np.float32)
    _check_continuation(_rule, lambda t0, t1: [a[t0:t1] for a in inp], S0, A, B)


def _check_continuation(scan, span, S0, A, B):
    """scan(inputs, form, state) over A + B tokens (span(t0, t1): the inputs of tokens t0..t1) gives the same outputs
    and state chunked in one call, as a chunked prefill of A then of B, and as A then B tokens one at a time (auto
    takes the recurrent form for one token)."""
    whole, S_whole = scan(span(0, A + B), "chunked", S0)
    first, S_a = scan(span(0, A), "chunked", S0)
    second, S_ab = scan(span(A, A + B), "chunked", S_a)
    S, steps = S_a, []
    for t in range(A, A + B):
        o, S = scan(span(t, t + 1), "auto", S)
        steps.append(o)
    _close(first, whole[:A])
    _close(second, whole[A:])
    _close(np.concatenate(steps), whole[A:])
    _close(S_ab, S_whole)
    _close(S, S_whole)


def test_auto_takes_the_recurrent_form_below_8_tokens_and_the_chunked_one_from_8():
    for T, form in ((1, "recurrent"), (7, "recurrent"), (8, "chunked"), (CHUNK + 1, "chunked")):
        inp = _inputs(T, 2, 9, 11, seed=T)
        S0 = np.full((2, 9, 11), 0.1, np.float32)
        auto, S_auto = _rule(inp, "auto", S0)
        want, S_want = _rule(inp, form, S0)
        np.testing.assert_array_equal(auto, want)
        np.testing.assert_array_equal(S_auto, S_want)
    other = _rule(_inputs(CHUNK + 1, 2, 9, 11, seed=CHUNK + 1), "recurrent", np.full((2, 9, 11), 0.1, np.float32))
    assert not np.array_equal(other[0], auto)       # the two forms do differ in the last bits: the test can tell


def test_bad_arguments_are_refused():
    inp = _inputs(3, 1, 4, 4, seed=0)
    q, k, v, g, beta = inp
    S, o = np.zeros((1, 4, 4), np.float32), np.zeros((3, 1, 4), np.float32)
    assert lib.pt_delta_rule(P(q), P(k), P(v), P(g), P(beta), 3, 1, 4, 4, P(S), P(o), 3) == -1
    assert lib.pt_delta_rule(P(q), P(k), P(v), P(g), P(beta), 0, 1, 4, 4, P(S), P(o), 0) == -1
    assert lib.pt_delta_rule(P(q), P(k), P(v), P(g), P(beta), 3, 1, 513, 4, P(S), P(o), 0) == -1


def _ssd_inputs(T, H, G, P_, N, seed):
    """x, B, C, dt (softplus-like, some large), A <= 0 per head"""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, H, P_))
    B, C = rng.standard_normal((T, G, N)), rng.standard_normal((T, G, N))
    dt = rng.exponential(0.05, (T, H)) + 0.5 * (rng.uniform(size=(T, H)) < 0.03)
    A = -rng.uniform(0.5, 16, H)
    return [a.astype(np.float32) for a in (x, B, C, dt, A)]


def _ssd(inp, mode, S):
    x, B, C, dt, A = inp
    T, H, P_ = x.shape
    G, N = B.shape[1:]
    S = np.array(S, np.float32)
    y = np.full(x.shape, np.nan, np.float32)
    assert lib.pt_ssd_scan(P(x), P(B), P(C), P(dt), P(A), T, H, G, P_, N, P(S), P(y), MODES[mode]) == 0
    return y, S


def _ssd_f64(inp, S):
    x, B, C, dt, A = (a.astype(np.float64) for a in inp)
    H, G = x.shape[1], B.shape[1]
    grp = np.arange(H) // (H // G)
    S = np.array(S, np.float64)
    y = np.empty(x.shape)
    for t in range(len(x)):
        S = np.exp(dt[t] * A)[:, None, None] * S + (dt[t][:, None] * x[t])[:, :, None] * B[t][grp][:, None, :]
        y[t] = np.einsum("hpn,hn->hp", S, C[t][grp])
    return y, S


@pytest.mark.parametrize("T", [1, 5, 8, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 37])
@pytest.mark.parametrize("H,G,P_,N", [(1, 1, 7, 5), (3, 3, 17, 33), (6, 2, 16, 16), (5, 1, 9, 128)])
def test_the_chunked_ssd_scan_is_the_recurrence(T, H, G, P_, N):
    """Mamba-2's scan (kernels/ssd.c): the chunked form, the recurrence and a float64 recurrence, from a state"""
    inp = _ssd_inputs(T, H, G, P_, N, seed=T * 7 + N)
    S0 = np.random.default_rng(T).standard_normal((H, P_, N)).astype(np.float32)
    y1, S1 = _ssd(inp, "recurrent", S0)
    y2, S2 = _ssd(inp, "chunked", S0)
    y64, S64 = _ssd_f64(inp, S0)
    for y, S in ((y1, S1), (y2, S2)):
        _close(y, y64)
        _close(S, S64)
    _close(y2, y1)
    _close(S2, S1)


@pytest.mark.parametrize("A,B", [(70, 59), (CHUNK, 3), (5, CHUNK + 1)])
def test_a_chunked_ssd_prefills_state_continues_in_a_second_prefill_and_in_decode(A, B):
    inp = _ssd_inputs(A + B, 3, 1, 12, 19, seed=A * B)
    S0 = np.zeros((3, 12, 19), np.float32)
    _check_continuation(_ssd, lambda t0, t1: [a[t0:t1] for a in inp[:4]] + [inp[4]], S0, A, B)   # inp[4]: per head


def test_auto_takes_the_recurrent_ssd_below_8_tokens_and_the_chunked_one_from_8():
    for T, form in ((1, "recurrent"), (7, "recurrent"), (8, "chunked"), (CHUNK + 1, "chunked")):
        inp = _ssd_inputs(T, 2, 1, 9, 11, seed=T)
        S0 = np.full((2, 9, 11), 0.1, np.float32)
        auto, S_auto = _ssd(inp, "auto", S0)
        want, S_want = _ssd(inp, form, S0)
        np.testing.assert_array_equal(auto, want)
        np.testing.assert_array_equal(S_auto, S_want)
    other = _ssd(inp, "recurrent", np.full((2, 9, 11), 0.1, np.float32))
    assert not np.array_equal(other[0], auto)


def _sel_inputs(T, di, ds, seed, gate=True):
    """Mamba-1's scan: u, dt (softplus-like, some large), A <= 0 per channel and state (S4D-real-like, -1..-ds, and
    spread), B, C, D, the gate z (or None)"""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((T, di))
    dt = rng.exponential(0.05, (T, di)) + 0.5 * (rng.uniform(size=(T, di)) < 0.03)
    A = -np.arange(1, ds + 1)[None, :] * rng.uniform(0.5, 2.0, (di, 1))
    B, C = rng.standard_normal((T, ds)), rng.standard_normal((T, ds))
    D = rng.standard_normal(di)
    z = rng.standard_normal((T, di)) * 2 if gate else None
    return [None if a is None else a.astype(np.float32) for a in (u, dt, A, B, C, D, z)]


def _sel(inp, mode, S):
    u, dt, A, B, C, D, z = inp
    T, di = u.shape
    S = np.array(S, np.float32)
    y = np.full(u.shape, np.nan, np.float32)
    zp = ffi.NULL if z is None else P(z)
    assert lib.pt_selective_scan(P(u), P(dt), P(A), P(B), P(C), P(D), zp, T, di, A.shape[1], P(S), P(y),
                                 MODES[mode]) == 0
    return y, S


def _sel_f64(inp, S):
    u, dt, A, B, C, D, z = (None if a is None else a.astype(np.float64) for a in inp)
    S = np.array(S, np.float64)
    y = np.empty(u.shape)
    for t in range(len(u)):
        S = np.exp(dt[t][:, None] * A) * S + (dt[t] * u[t])[:, None] * B[t][None, :]
        y[t] = S @ C[t] + D * u[t]
        if z is not None:
            y[t] *= z[t] / (1 + np.exp(-z[t]))
    return y, S


def _sel_sliced(inp, a, b):
    return [x if x is None or x.ndim == 1 or x is inp[2] else x[a:b] for x in inp]


SEL_CHUNK = 32


@pytest.mark.parametrize("T", [1, 3, 4, SEL_CHUNK - 1, SEL_CHUNK, SEL_CHUNK + 1, 3 * SEL_CHUNK + 13, 2 * CHUNK + 1])
@pytest.mark.parametrize("di,ds", [(1, 16), (13, 16), (37, 11), (48, 16), (21, 1), (16, 33)])
def test_the_chunked_selective_scan_is_the_recurrence(T, di, ds):
    """Mamba-1's scan (kernels/selscan.c): the chunked form, the recurrence and a float64 recurrence, from a state,
    odd channel counts (blocks of 16 and a part) and state sizes (8 partial sums and a tail), T around the chunk"""
    inp = _sel_inputs(T, di, ds, seed=T * 13 + di + ds)
    S0 = np.random.default_rng(T).standard_normal((di, ds)).astype(np.float32)
    y1, S1 = _sel(inp, "recurrent", S0)
    y2, S2 = _sel(inp, "chunked", S0)
    y64, S64 = _sel_f64(inp, S0)
    for y, S in ((y1, S1), (y2, S2)):
        _close(y, y64)
        _close(S, S64)
    _close(y2, y1)
    _close(S2, S1)


def test_the_selective_scan_without_a_gate_and_at_mamba_130m_sizes():
    """d_inner 1536, d_state 16 (what bench/bench_scan.py times) over a chunk and a part, gated and not"""
    for gate in (True, False):
        inp = _sel_inputs(SEL_CHUNK + 9, 1536, 16, seed=3, gate=gate)
        S0 = np.zeros((1536, 16), np.float32)
        y1, S1 = _sel(inp, "recurrent", S0)
        y2, S2 = _sel(inp, "chunked", S0)
        _close(y2, y1)
        _close(S2, S1)
        _close(y1, _sel_f64(inp, S0)[0])


@pytest.mark.parametrize("A,B", [(70, 59), (SEL_CHUNK, 3), (5, SEL_CHUNK + 1)])
def test_a_chunked_selective_scans_state_continues_in_a_second_prefill_and_in_decode(A, B):
    inp = _sel_inputs(A + B, 19, 16, seed=A * B)
    S0 = np.zeros((19, 16), np.float32)
    _check_continuation(_sel, lambda t0, t1: _sel_sliced(inp, t0, t1), S0, A, B)


def test_recurrent_decode_gives_a_recurrent_prefills_bits():
    """token by token, the recurrent form's bits are those of one recurrent call over the same tokens"""
    inp = _sel_inputs(23, 37, 16, seed=5)
    S0 = np.random.default_rng(1).standard_normal((37, 16)).astype(np.float32)
    whole, S_whole = _sel(inp, "recurrent", S0)
    S, steps = S0, []
    for t in range(23):
        y, S = _sel(_sel_sliced(inp, t, t + 1), "recurrent", S)
        steps.append(y)
    np.testing.assert_array_equal(np.concatenate(steps), whole)
    np.testing.assert_array_equal(S, S_whole)


def test_auto_takes_the_recurrent_selective_scan_for_one_token_and_the_chunked_one_from_2():
    for T, form in ((1, "recurrent"), (2, "chunked"), (5, "chunked"), (SEL_CHUNK + 1, "chunked")):
        inp = _sel_inputs(T, 21, 16, seed=T)
        S0 = np.full((21, 16), 0.1, np.float32)
        auto, S_auto = _sel(inp, "auto", S0)
        want, S_want = _sel(inp, form, S0)
        np.testing.assert_array_equal(auto, want)
        np.testing.assert_array_equal(S_auto, S_want)
    other = _sel(inp, "recurrent", np.full((21, 16), 0.1, np.float32))
    assert not np.array_equal(other[0], auto)


def test_the_selective_scan_refuses_bad_arguments():
    u, dt, A, B, C, D, z = _sel_inputs(3, 4, 4, seed=0)
    S, y = np.zeros((4, 4), np.float32), np.zeros((3, 4), np.float32)
    args = (P(u), P(dt), P(A), P(B), P(C), P(D), P(z))
    assert lib.pt_selective_scan(*args, 3, 4, 4, P(S), P(y), 3) == -1
    assert lib.pt_selective_scan(*args, 0, 4, 4, P(S), P(y), 0) == -1
    assert lib.pt_selective_scan(*args, 3, 0, 4, P(S), P(y), 0) == -1
    assert lib.pt_selective_scan(*args, 3, 4, 0, P(S), P(y), 0) == -1
