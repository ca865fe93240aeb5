"""RoPE frequencies for every `rope_scaling` transformers defines, computed here in float64 from the definitions
(transformers' modeling_rope_utils): default, linear, dynamic (NTK), llama3, yarn, longrope ("su")."""
import math

import numpy as np

SCALINGS = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")


def scaling_kind(scaling) -> str:
    if not scaling:
        return "default"
    kind = scaling.get("rope_type", scaling.get("type"))
    kind = "longrope" if kind == "su" else kind
    if kind not in SCALINGS:
        raise ValueError(f"the reference does not model rope_scaling type {kind!r} (it models: {', '.join(SCALINGS)})")
    return kind


def rope_freqs(dim: int, theta: float, scaling: dict | None, max_pos: int, top_original_max: int | None = None):
    """freqs(seq_len) -> (inv_freq [dim/2] float64, attention factor) for a forward over seq_len positions."""
    kind, s = scaling_kind(scaling), dict(scaling or {})
    base_inv = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)

    if kind == "default":
        return lambda seq_len: (base_inv, 1.0)
    if kind == "linear":
        return lambda seq_len: (base_inv / float(s["factor"]), 1.0)
    if kind == "dynamic":
        def dynamic(seq_len):
            f = float(s["factor"])
            if seq_len <= max_pos:
                return base_inv, 1.0
            base = theta * (f * seq_len / max_pos - (f - 1)) ** (dim / (dim - 2))
            return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim), 1.0
        return dynamic
    if kind == "llama3":
        f, lo, hi, old = (float(s[k]) for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                 "original_max_position_embeddings"))
        wavelen = 2 * math.pi / base_inv
        smooth = (old / wavelen - lo) / (hi - lo) if hi != lo else np.zeros_like(wavelen)    # Llama 4: an empty band
        inv = np.where(wavelen > old / lo, base_inv / f,                       # long waves: divided by factor
                       np.where(wavelen < old / hi, base_inv,                  # short waves: kept
                                (1 - smooth) * base_inv / f + smooth * base_inv))
        return lambda seq_len: (inv, 1.0)
    if kind == "yarn":
        f = float(s["factor"])
        orig = s.get("original_max_position_embeddings") or max_pos

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        att = s.get("attention_factor")
        if att is None:
            m, m_all = s.get("mscale"), s.get("mscale_all_dim")
            att = mscale(f, m) / mscale(f, m_all) if m and m_all else mscale(f)
        fast, slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

        def corr(rotations):                  # the dimension index that turns `rotations` times over orig positions
            return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low, high = corr(fast), corr(slow)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        high = high + 0.001 if low == high else high
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        inv = base_inv / f * ramp + base_inv * (1 - ramp)       # interpolated where ramp 1, extrapolated where 0
        return lambda seq_len: (inv, float(att))
    # longrope: short or long factors by the length reached; with a top-level original_max_position_embeddings the
    # factor is max_pos / original (rope_scaling's own factor is then ignored)
    orig, f = top_original_max or s.get("original_max_position_embeddings") or max_pos, s.get("factor")
    if top_original_max:
        f = max_pos / top_original_max
    att = s.get("attention_factor")
    if att is None:
        att = 1.0 if not f or f <= 1.0 else math.sqrt(1 + math.log(f) / math.log(orig))
    for key in ("long_factor", "short_factor"):
        if len(s[key]) != dim // 2:
            raise ValueError(f"rope_scaling {key} has {len(s[key])} values, the rotary dimension needs {dim // 2}")
    long_f, short_f = np.asarray(s["long_factor"], np.float64), np.asarray(s["short_factor"], np.float64)
    return lambda seq_len: (base_inv / (long_f if seq_len > orig else short_f), float(att))
