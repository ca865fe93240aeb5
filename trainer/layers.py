"""Forward/backward pairs for every layer of the Llama-style model, in plain NumPy.

Each ``*_forward`` returns ``(out, cache)``; the matching ``*_backward`` takes the gradient of the output
and that cache and returns the gradients of the inputs and parameters. This is llm.c's layout, without
the C. Shapes: B batch, T time, D hidden, V vocab, H query heads, KV key/value heads, G = H // KV query
heads per kv head, hd head_dim, F intermediate (ffn) size, N = B * T rows.

Everything works in the dtype of its inputs (float32 for training, float64 for the gradient check);
Python scalars never upcast under NumPy 2's promotion rules.
"""

from __future__ import annotations

import functools

import numpy as np

# ----------------------------------------------------------------------------- embedding


def embedding_forward(ids, weight):
    """ids (B, T) int, weight (V, D) -> out (B, T, D)."""
    return weight[ids], (ids, weight.shape)


def embedding_backward(dout, cache):
    """dout (B, T, D) -> dweight (V, D). Rows of repeated ids accumulate."""
    ids, (V, D) = cache
    dweight = np.zeros((V, D), dtype=dout.dtype)
    np.add.at(dweight, ids.reshape(-1), dout.reshape(-1, D))
    return dweight


# ----------------------------------------------------------------------------- rmsnorm


def rmsnorm_forward(x, weight, eps):
    """x (..., D), weight (D,) -> out (..., D) = x / sqrt(mean(x**2) + eps) * weight."""
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # (..., 1)
    xhat = x / rms  # (..., D)
    return xhat * weight, (xhat, rms, weight)


def rmsnorm_backward(dout, cache):
    """dout (..., D) -> dx (..., D), dweight (D,)."""
    xhat, rms, weight = cache
    D = xhat.shape[-1]
    dweight = np.sum((dout * xhat).reshape(-1, D), axis=0)  # (D,)
    dxhat = dout * weight  # (..., D)
    # d/dx of x / rms: (dxhat - xhat * mean(dxhat * xhat)) / rms
    dx = (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)) / rms
    return dx, dweight


# ----------------------------------------------------------------------------- linear


def linear_forward(x, weight):
    """x (..., in), weight (out, in) -> y (..., out) = x @ weight.T (no bias, as in Llama)."""
    x2 = x.reshape(-1, x.shape[-1])  # (N, in): one 2-D GEMM instead of a batched loop
    y = x2 @ weight.T  # (N, out)
    return y.reshape(*x.shape[:-1], weight.shape[0]), (x2, x.shape, weight)


def linear_backward(dout, cache):
    """dout (..., out) -> dx (..., in), dweight (out, in)."""
    x2, x_shape, weight = cache
    d2 = dout.reshape(-1, weight.shape[0])  # (N, out)
    dx = (d2 @ weight).reshape(x_shape)  # (..., in)
    dweight = d2.T @ x2  # (out, in)
    return dx, dweight


# ----------------------------------------------------------------------------- rope


@functools.lru_cache(maxsize=16)
def _rope_tables(T: int, head_dim: int, theta: float, dtype_name: str):
    # Computed in float64 and rounded once, so float32 and float64 runs see the same angles.
    half = head_dim // 2
    inv_freq = theta ** (-2.0 * np.arange(half, dtype=np.float64) / head_dim)  # (hd/2,)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]  # (T, hd/2)
    emb = np.concatenate([angle, angle], axis=-1)  # (T, hd)
    cos, sin = np.cos(emb).astype(dtype_name), np.sin(emb).astype(dtype_name)
    cos.flags.writeable = False
    sin.flags.writeable = False
    return cos, sin


def rope_tables(T, head_dim, theta, dtype=np.float32):
    """Return (cos, sin), each (T, hd), for positions 0..T-1 (Hugging Face Llama layout).

    inv_freq[j] = theta ** (-2j / hd) for j < hd/2; angle[p, j] = p * inv_freq[j]; the tables
    concatenate [angle, angle] so element i pairs with element i + hd/2 ("rotate_half").
    """
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    return _rope_tables(int(T), int(head_dim), float(theta), np.dtype(dtype).name)


def rope_forward(x, cos, sin):
    """x (B, T, nh, hd), cos/sin (T, hd) -> x * cos + rotate_half(x) * sin, same shape.

    rotate_half(x) = concat(-x[..., hd/2:], x[..., :hd/2]); since both halves of the tables hold the
    same angles, each half is written directly: out1 = x1*c - x2*s, out2 = x2*c + x1*s.
    """
    half = x.shape[-1] // 2
    c, s = cos[:, None, :half], sin[:, None, :half]  # (T, 1, hd/2): broadcast over heads
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty_like(x)
    np.multiply(x1, c, out=out[..., :half])
    out[..., :half] -= x2 * s
    np.multiply(x2, c, out=out[..., half:])
    out[..., half:] += x1 * s
    return out, (cos, sin)


def rope_backward(dout, cache):
    """dout (B, T, nh, hd) -> dx (B, T, nh, hd). RoPE is a rotation: dx1 = d1*c + d2*s, dx2 = d2*c - d1*s."""
    cos, sin = cache
    half = dout.shape[-1] // 2
    c, s = cos[:, None, :half], sin[:, None, :half]
    d1, d2 = dout[..., :half], dout[..., half:]
    dx = np.empty_like(dout)
    np.multiply(d1, c, out=dx[..., :half])
    dx[..., :half] += d2 * s
    np.multiply(d2, c, out=dx[..., half:])
    dx[..., half:] -= d1 * s
    return dx


# ----------------------------------------------------------------------------- attention


@functools.lru_cache(maxsize=16)
def _causal_bias(T: int, G: int, dtype_name: str):
    # (G*T, T): 0 where key <= query position, -inf above the diagonal; the G query heads that share
    # one kv head are stacked along the rows, so row g*T + t is query position t.
    bias = np.triu(np.full((T, T), -np.inf, dtype=dtype_name), k=1)
    bias = np.tile(bias, (G, 1))
    bias.flags.writeable = False
    return bias


def attention_forward(q, k, v):
    """Causal grouped-query attention.

    q (B, T, H, hd), k/v (B, T, KV, hd), RoPE already applied -> out (B, T, H*hd).
    Query head h reads kv head h // G. The G heads of a group are stacked into one (G*T, hd) matrix
    so each (batch, kv head) is a single GEMM against its keys: no loop over heads.
    """
    B, T, H, hd = q.shape
    KV = k.shape[2]
    G = H // KV
    scale = 1.0 / np.sqrt(hd)
    qg = q.reshape(B, T, KV, G, hd).transpose(0, 2, 3, 1, 4).reshape(B, KV, G * T, hd)  # (B, KV, G*T, hd)
    kt = np.ascontiguousarray(k.transpose(0, 2, 1, 3))  # (B, KV, T, hd)
    vt = np.ascontiguousarray(v.transpose(0, 2, 1, 3))  # (B, KV, T, hd)
    att = np.matmul(qg, kt.transpose(0, 1, 3, 2))  # (B, KV, G*T, T)
    att *= att.dtype.type(scale)
    att += _causal_bias(T, G, att.dtype.name)
    att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(axis=-1, keepdims=True)  # softmax over keys
    y = np.matmul(att, vt)  # (B, KV, G*T, hd)
    out = y.reshape(B, KV, G, T, hd).transpose(0, 3, 1, 2, 4).reshape(B, T, H * hd)  # (B, T, H*hd)
    return out, (qg, kt, vt, att, scale, (B, T, H, KV, hd))


def attention_backward(dout, cache):
    """dout (B, T, H*hd) -> dq (B, T, H, hd), dk (B, T, KV, hd), dv (B, T, KV, hd)."""
    qg, kt, vt, att, scale, (B, T, H, KV, hd) = cache
    G = H // KV
    dy = dout.reshape(B, T, KV, G, hd).transpose(0, 2, 3, 1, 4).reshape(B, KV, G * T, hd)  # (B, KV, G*T, hd)
    dv = np.matmul(att.transpose(0, 1, 3, 2), dy)  # (B, KV, T, hd)
    datt = np.matmul(dy, vt.transpose(0, 1, 3, 2))  # (B, KV, G*T, T)
    # softmax backward: ds = p * (dp - sum(dp * p)); masked entries have p = 0 and get no gradient
    datt -= np.sum(datt * att, axis=-1, keepdims=True)
    datt *= att
    datt *= datt.dtype.type(scale)
    dqg = np.matmul(datt, kt)  # (B, KV, G*T, hd)
    dk = np.matmul(datt.transpose(0, 1, 3, 2), qg)  # (B, KV, T, hd)
    dq = dqg.reshape(B, KV, G, T, hd).transpose(0, 3, 1, 2, 4).reshape(B, T, H, hd)
    return dq, dk.transpose(0, 2, 1, 3), dv.transpose(0, 2, 1, 3)


# ----------------------------------------------------------------------------- swiglu


def swiglu_forward(gate, up):
    """gate, up (..., F) -> silu(gate) * up, (..., F)."""
    sig = np.negative(gate)
    np.exp(sig, out=sig)
    sig += 1.0
    np.reciprocal(sig, out=sig)  # sigmoid(gate)
    act = gate * sig  # silu(gate)
    return act * up, (gate, up, sig, act)


def swiglu_backward(dout, cache):
    """dout (..., F) -> dgate, dup (..., F)."""
    gate, up, sig, act = cache
    dup = dout * act
    # silu'(g) = sig * (1 + g * (1 - sig))
    dsilu = 1.0 - sig
    dsilu *= gate
    dsilu += 1.0
    dsilu *= sig
    dgate = dout * up
    dgate *= dsilu
    return dgate, dup


# ----------------------------------------------------------------------------- cross-entropy


def cross_entropy_forward(logits, targets, mask=None, denom=None):
    """Mean next-token negative log-likelihood.

    logits (B, T, V), targets (B, T) int, mask (B, T) of 0/1 or None (= all ones) -> scalar loss
    = sum(mask * nll) / denom, where denom defaults to sum(mask) (B * T without a mask). Passing the
    whole batch's denom for a slice of it makes the slices' losses and gradients add up to the batch's.
    An all-zero mask gives loss 0 and zero gradient.
    """
    B, T, V = logits.shape
    z = logits - logits.max(axis=-1, keepdims=True)  # (B, T, V), stable
    z_target = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]  # (B, T)
    np.exp(z, out=z)
    sums = z.sum(axis=-1, keepdims=True)  # (B, T, 1)
    probs = z / sums  # (B, T, V) softmax
    nll = np.log(sums[..., 0]) - z_target  # (B, T) = logsumexp - logit[target]
    m = np.ones((B, T), dtype=logits.dtype) if mask is None else np.asarray(mask, dtype=logits.dtype)
    if denom is None:
        denom = float(m.sum())
    weights = m / logits.dtype.type(max(float(denom), 1.0))  # (B, T)
    loss = float(np.sum(nll.astype(np.float64) * weights))
    return loss, (probs, targets, weights)


def cross_entropy_backward(cache, dloss=1.0):
    """-> dlogits (B, T, V) = (softmax - onehot(target)) * weight per position."""
    probs, targets, weights = cache
    dlogits = probs * weights[..., None]
    np.put_along_axis(dlogits, targets[..., None],
                      np.take_along_axis(dlogits, targets[..., None], axis=-1) - weights[..., None], axis=-1)
    if dloss != 1.0:
        dlogits *= dloss
    return dlogits
