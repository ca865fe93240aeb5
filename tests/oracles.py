"""Plain NumPy implementations of what each kernel computes: the oracles the C paths are tested against.

They follow the same algorithm (GGML block formats, activations quantized to q8 blocks with an fp32 scale) but are
written independently of the C code, in float64 where a sum is involved.
"""
import numpy as np

QK = 32


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """GGML quantize_row_q8_0_ref: d = amax/127 (stored fp16), q = roundf(x / d) (half away from zero)."""
    rows, cols = x.shape
    b = x.reshape(rows, cols // QK, QK).astype(np.float32)
    d = (np.abs(b).max(axis=2) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * inv[..., None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.empty((rows, cols // QK, 34), np.uint8)
    out[..., :2] = d.astype(np.float16)[..., None].view(np.uint8)
    out[..., 2:] = q.view(np.uint8)
    return out.reshape(rows, -1)


def quantize_q4_0(x: np.ndarray) -> np.ndarray:
    """GGML quantize_row_q4_0_ref: d = max / -8 (the signed value of largest magnitude), n = min(15, trunc(x/d + 8.5))."""
    rows, cols = x.shape
    b = x.reshape(rows, cols // QK, QK).astype(np.float32)
    idx = np.abs(b).argmax(axis=2)
    mx = np.take_along_axis(b, idx[..., None], axis=2)[..., 0]
    d = (mx / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    n = np.clip(np.trunc((b * inv[..., None]).astype(np.float32) + np.float32(8.5)), 0, 15).astype(np.uint8)
    out = np.empty((rows, cols // QK, 18), np.uint8)
    out[..., :2] = d.astype(np.float16)[..., None].view(np.uint8)
    out[..., 2:] = n[..., :16] | (n[..., 16:] << 4)
    return out.reshape(rows, -1)


def dequantize(raw: np.ndarray, dtype: str, shape) -> np.ndarray:
    rows, cols = shape
    if dtype == "f32":
        return raw.view(np.float32).reshape(rows, cols)
    if dtype == "f16":
        return raw.view(np.float16).reshape(rows, cols).astype(np.float32)
    if dtype == "bf16":
        return (raw.view(np.uint16).reshape(rows, cols).astype(np.uint32) << 16).view(np.float32)
    bb = 34 if dtype == "q8_0" else 18
    blocks = raw.reshape(rows, cols // QK, bb)
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    if dtype == "q8_0":
        q = blocks[..., 2:].view(np.int8).astype(np.float32)
    else:
        qs = blocks[..., 2:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=2).astype(np.float32) - 8
    return (q * d[..., None]).reshape(rows, cols)


def quantize_act(x: np.ndarray):
    """Activations: fp32 d = amax/127, q = round half to even(x * (1/d)), s = sum(q) per block."""
    T, K = x.shape
    b = x.reshape(T, K // QK, QK).astype(np.float32)
    d = (np.abs(b).max(axis=2) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint((b * inv[..., None]).astype(np.float32)), -127, 127).astype(np.int8)
    return q.reshape(T, K), d, q.astype(np.int32).sum(axis=2)


def quantize_act_k(x: np.ndarray):
    """The K-quants' activations (Q8_K's rule, kernels/matmul.c pt_quant_act_k): quantize_act's over super-blocks of
    256 values; d is the super-block's scale for each of its 8 blocks of 32."""
    T, K = x.shape
    b = x.reshape(T, K // 256, 256).astype(np.float32)
    d = (np.abs(b).max(axis=2) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint((b * inv[..., None]).astype(np.float32)), -127, 127).astype(np.int8).reshape(T, K)
    return q, np.repeat(d, 8, axis=1), q.reshape(T, K // QK, QK).astype(np.int32).sum(axis=2)


def matmul(raw: np.ndarray, dtype: str, shape, x: np.ndarray) -> np.ndarray:
    """What pt_matmul computes, in float64: float weights use x as is; q8_0 / q4_0 use the quantized activations
    and exact integer dot products per block, scaled by both block scales."""
    rows, cols = shape
    if dtype in ("f32", "f16", "bf16"):
        return (x.astype(np.float64) @ dequantize(raw, dtype, shape).astype(np.float64).T)
    q, d, _ = quantize_act(x)
    nb = cols // QK
    bb = 34 if dtype == "q8_0" else 18
    blocks = raw.reshape(rows, nb, bb)
    dw = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)      # [rows, nb]
    if dtype == "q8_0":
        wq = blocks[..., 2:].view(np.int8).astype(np.int64)
    else:
        qs = blocks[..., 2:]
        wq = np.concatenate([qs & 0x0F, qs >> 4], axis=2).astype(np.int64) - 8
    xq = q.reshape(-1, nb, QK).astype(np.int64)
    isum = np.einsum("rbj,tbj->trb", wq, xq)                                    # exact integers
    return np.einsum("trb,rb,tb->tr", isum.astype(np.float64), dw, d.astype(np.float64))


def rmsnorm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def rope(x, pos, theta, interleaved):
    """x [T, H, hd] at positions pos [T]."""
    T, H, hd = x.shape
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.asarray(pos, np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x = x.astype(np.float64)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def attention(q, k, v, pos0, scale, softcap=0.0, window=0, alibi=None, bidirectional=False):
    """q [T, H, hd]; k, v [n_kv, n_ctx, hd]; causal from pos0; a window of w sees positions > pos - w; alibi [H]
    slopes add slope * (j - i) to the score of key j for the query at i; bidirectional: every query sees positions
    0..pos0+T-1 (an encoder, issue 35), under a window w those within w - 1 of it either side."""
    T, H, hd = q.shape
    group = H // k.shape[0]
    out = np.empty((T, H, hd))
    for t in range(T):
        n = pos0 + T if bidirectional else pos0 + t + 1
        first = max(0, pos0 + t + 1 - window) if window else 0
        if bidirectional and window:
            n = min(n, pos0 + t + window)
        for h in range(H):
            kh, vh = k[h // group, first:n].astype(np.float64), v[h // group, first:n].astype(np.float64)
            s = kh @ q[t, h].astype(np.float64) * scale
            if alibi is not None:
                s = s + float(alibi[h]) * (np.arange(first, n) - (pos0 + t))
            if softcap:
                s = softcap * np.tanh(s / softcap)
            p = np.exp(s - s.max())
            out[t, h] = (p / p.sum()) @ vh
    return out


def llama_logits(W: dict, cfg: dict, ids, quantized_acts: bool = False) -> np.ndarray:
    """A plain float64 Llama forward over float weights W (HF names): logits [T, vocab]. With quantized_acts,
    the input of every matrix product is rounded to q8 blocks first, as the engine does for q8_0 / q4_0 weights."""
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    KV, eps, T = cfg["num_key_value_heads"], cfg["rms_norm_eps"], len(ids)
    x = W["model.embed_tokens.weight"][ids].astype(np.float64)
    pos = np.arange(T)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = _act(rmsnorm(x, W[p + "input_layernorm.weight"], eps), quantized_acts)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
        q = rope(q, pos, cfg["rope_theta"], cfg["rope_interleaved"])
        k = rope(k, pos, cfg["rope_theta"], cfg["rope_interleaved"])
        att = attention(q, k.transpose(1, 0, 2), v.transpose(1, 0, 2), 0, hd ** -0.5)
        x = x + _act(att.reshape(T, H * hd), quantized_acts) @ W[p + "self_attn.o_proj.weight"].T
        h = _act(rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps), quantized_acts)
        g, u = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + _act(g / (1 + np.exp(-g)) * u, quantized_acts) @ W[p + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return _act(rmsnorm(x, W["model.norm.weight"], eps), quantized_acts) @ head.T


def _act(h: np.ndarray, quantized: bool) -> np.ndarray:
    if not quantized:
        return h
    q, d, _ = quantize_act(h.astype(np.float32))
    return q.astype(np.float64) * np.repeat(d.astype(np.float64), QK, axis=1)
