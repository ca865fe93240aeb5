"""The reference's float64 building blocks: norms, activations, RoPE rotation, causal attention."""
import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def glu(name: str, g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """act(gate) * up; "swiglu_oai": gpt-oss's clamped form (clamp(up, -7, 7) + 1) * g sigmoid(1.702 g), g =
    min(gate, 7)."""
    if name == "swiglu_oai":
        g, u = np.minimum(g, 7.0), np.clip(u, -7.0, 7.0)
        return (u + 1.0) * g * (0.5 + 0.5 * np.tanh(0.5 * 1.702 * g))
    return act(name, g) * u


def glu_clamped(name: str, g: np.ndarray, u: np.ndarray, limit: float, after: bool) -> np.ndarray:
    """act(gate) * up with SwiGLU's clamp (issue 36, fam36m): limit > 0 takes up to [-limit, limit] and the gate to
    <= limit before the activation (DeepSeek-V4, HY-V4), or act(gate) to <= limit after it (`after`: Ling 3)."""
    if limit <= 0:
        return glu(name, g, u)
    u = np.clip(u, -limit, limit)
    return np.minimum(act(name, g), limit) * u if after else act(name, np.minimum(g, limit)) * u


def act(name: str, x: np.ndarray) -> np.ndarray:
    if name == "silu":
        return x * (0.5 + 0.5 * np.tanh(0.5 * x))                     # x * sigmoid(x), no overflow
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "relu2":
        return np.maximum(x, 0.0) ** 2
    if name == "sigmoid":
        return 0.5 + 0.5 * np.tanh(0.5 * x)
    raise ValueError(f"activation {name!r} is not modelled by the reference")


def _bf16(x: float) -> float:
    """x rounded to the nearest bfloat16 (ties to even): 8 significant bits."""
    if x == 0 or not np.isfinite(x):
        return x
    m, e = np.frexp(x)                       # x = m 2^e, 0.5 <= |m| < 1
    return float(np.ldexp(np.round(m * 256.0), e - 8))     # np.round: half to even


def xielu(x: np.ndarray, alpha_p: float, alpha_n: float, beta: float, eps: float, bf16: bool = True) -> np.ndarray:
    """xIELU (Apertus) from its raw parameters: a_p = softplus(alpha_p), a_n = beta + softplus(alpha_n), each
    rounded to bfloat16 as transformers computes them (it keeps these parameters in bfloat16; bf16=False: not
    rounded, as llama.cpp computes them); a_p x^2 + beta x for x > 0, else (expm1(min(x, eps)) - x) a_n + beta x."""
    r = _bf16 if bf16 else float
    a_p, a_n = r(np.logaddexp(0.0, alpha_p)), r(beta + r(np.logaddexp(0.0, alpha_n)))
    return np.where(x > 0, a_p * x * x + beta * x, (np.expm1(np.minimum(x, eps)) - x) * a_n + beta * x)


def norm(x: np.ndarray, kind: str, eps: float, w: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """Normalise the last axis; w / b broadcast against x (a [heads, n] weight over x [T, heads, n])."""
    if kind == "rms":
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    else:
        c = x - x.mean(axis=-1, keepdims=True)
        y = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def rotate(x: np.ndarray, dim: int, inv_freq: np.ndarray, factor: float, interleaved: bool) -> np.ndarray:
    """x [T, heads, hd] with its first `dim` values of each head rotated by position t * inv_freq."""
    T = x.shape[0]
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]            # [T, dim/2]
    cos, sin = (np.cos(angle) * factor)[:, None, :], (np.sin(angle) * factor)[:, None, :]
    out = x.copy()
    r = x[..., :dim]
    a, b = (r[..., 0::2], r[..., 1::2]) if interleaved else (r[..., :dim // 2], r[..., dim // 2:])
    ra, rb = a * cos - b * sin, b * cos + a * sin
    if interleaved:
        out[..., 0:dim:2], out[..., 1:dim:2] = ra, rb
    else:
        out[..., :dim // 2], out[..., dim // 2:dim] = ra, rb
    return out


def attention_values(q, k, v, scale: float, window: int = 0) -> np.ndarray:
    """Causal attention with one key and one value per head (q, k [T, H, dk], v [T, H, dv]): [T, H * dv]; window > 0:
    query i sees keys i - window < j <= i."""
    T, H, _ = q.shape
    s = np.einsum("thd,shd->hts", q, k) * scale
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    s[:, (j > i) | ((i - j >= window) if window else False)] = -np.inf
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(T, -1)


def attention(q, k, v, scale: float, softcap: float, window: int, sinks=None, chunk: int = 0,
              temperature=None, alibi=None, key_bias=None, keep=None) -> np.ndarray:
    """Causal softmax attention of q [T, H, hd] over k, v [T, KV, hd]; query head h reads kv head h // (H / KV).
    softcap > 0: scores -> softcap * tanh(scores / softcap); window > 0: query i sees keys i - window < j <= i;
    sinks [H]: one more logit per head in the softmax, whose share is dropped; chunk > 0: query i sees keys of its
    chunk only (j // chunk == i // chunk); temperature (f, a): query i's scores x (1 + a ln(1 + floor((i + 1) / f)))
    ((f, a, 1): floor(i / f));
    alibi [H]: slope_h * (j - i) added to the scores (BLOOM, MPT, Falcon); key_bias [KV, T]: key j's bias added to
    its scores in every query head reading kv head h (SmallDoge); keep [H, T, T] bool: the keys each query head may
    see besides the causal mask (MiniMax-M3's chosen blocks)."""
    T, H, hd = q.shape
    kv_of = np.arange(H) // (H // k.shape[1])
    s = np.einsum("thd,shd->hts", q, k[:, kv_of]) * scale                        # [H, T, T]
    if temperature is not None:         # (f, a) or (f, a, at_p): at_p 1 floors i / f (Ministral 3), 2: a power
        f, a = temperature[:2]
        at_p = temperature[2] if len(temperature) > 2 else 0
        if at_p == 2:                   # Beam's scalable softmax: (1 + (i + 1) / f) ** a (issue 36, fam36i)
            s = s * ((1.0 + (np.arange(T) + 1.0) / f) ** a)[None, :, None]
        else:
            s = s * (1.0 + a * np.log(np.floor((np.arange(T) + (0.0 if at_p else 1.0)) / f) + 1.0))[None, :, None]
    if alibi is not None:
        s = s + np.asarray(alibi, np.float64)[:, None, None] * (np.arange(T)[None, :] - np.arange(T)[:, None])
    if key_bias is not None:
        s = s + np.asarray(key_bias, np.float64)[kv_of][:, None, :]
    if softcap:
        s = softcap * np.tanh(s / softcap)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    hidden = (j > i) | ((i - j >= window) if window else False) | ((j // chunk != i // chunk) if chunk else False)
    s[:, hidden] = -np.inf
    if keep is not None:
        s[~keep] = -np.inf
    m = s.max(axis=-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, np.asarray(sinks, np.float64)[:, None, None])
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(np.asarray(sinks, np.float64)[:, None, None] - m)
    p /= total
    return np.einsum("hts,shd->thd", p, v[:, kv_of]).reshape(T, H * hd)
