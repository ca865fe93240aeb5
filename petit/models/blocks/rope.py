"""Rotary position embedding tables, with the scalings Hugging Face defines (`rope_scaling` / `rope_type`):
default, linear, dynamic (NTK), llama3, yarn and longrope. A table is cos/sin [n_pos, rot_dim / 2], already multiplied
by the scaling's attention factor, as `pt_rope_store` reads it.

Frequencies follow transformers' float32 arithmetic: inv_freq in float32, angle = float32(position * inv_freq).
Dynamic NTK and longrope depend on the sequence length a forward pass reaches, exactly as in transformers: the
table is chosen per forward call from `seq_len` = the last position + 1.
"""
import math

import numpy as np

SCALINGS = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")
_KEYS = {"default": set(), "linear": {"factor"}, "dynamic": {"factor"},
         "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
         "yarn": {"factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                  "original_max_position_embeddings", "truncate"},
         "longrope": {"factor", "attention_factor", "long_factor", "short_factor", "original_max_position_embeddings"}}
_REQUIRED = {"linear": {"factor"}, "dynamic": {"factor"}, "yarn": {"factor"},
             "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
             "longrope": {"long_factor", "short_factor"}}


def scaling_type(rope_scaling: dict | None, where: str = "rope_scaling") -> str:
    """The scaling's name, validated ("default" for None); `where` names it in errors (rope_parameters when it came
    from a transformers 5 config)."""
    if not rope_scaling:
        return "default"
    if not isinstance(rope_scaling, dict):
        raise ValueError(f"config: {where} must be an object, got {rope_scaling!r}")
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind == "su":                # the early name of longrope (Phi-3)
        kind = "longrope"
    if kind not in SCALINGS:
        raise ValueError(f"config: {where} type {kind!r} is not supported (supported: {', '.join(SCALINGS)})")
    missing = _REQUIRED.get(kind, set()) - set(rope_scaling)
    if missing:
        raise ValueError(f"config: {where} {kind} needs {', '.join(sorted(missing))}")
    unknown = set(rope_scaling) - _KEYS[kind] - {"rope_type", "type"}
    if unknown:
        raise ValueError(f"config: {where} {kind}: unsupported key(s) {', '.join(sorted(unknown))}")
    return kind


class Rope:
    """The RoPE of one kind of layer.

    Args:
        dim: values rotated per head (head_dim x partial_rotary_factor), even.
        base: rope_theta.
        scaling: the config's rope_scaling dict, or None.
        max_position_embeddings: the config's value.
        original_max_position_embeddings: a top-level config value some families carry (Phi-3's longrope).
        interleaved: rotate pairs (2i, 2i+1) instead of halves (i, i + dim/2).
    """

    def __init__(self, dim: int, base: float, scaling: dict | None = None, max_position_embeddings: int = 2048,
                 original_max_position_embeddings: int | None = None, interleaved: bool = False):
        if dim <= 0 or dim % 2:
            raise ValueError(f"config: the rotary dimension {dim} must be a positive even number")
        self.dim, self.base, self.interleaved = dim, float(base), interleaved
        self.kind = scaling_type(scaling)
        self.s = dict(scaling or {})
        self.max_pos = max_position_embeddings
        self.orig_max = original_max_position_embeddings
        if self.kind == "longrope":
            for name in ("long_factor", "short_factor"):
                if len(self.s[name]) != dim // 2:
                    raise ValueError(f"config: rope_scaling {name} has {len(self.s[name])} values, expected "
                                     f"{dim // 2} (rotary dimension / 2)")
        self._key, self._n, self.cos, self.sin = None, 0, None, None

    @property
    def context_length(self) -> int:
        """The positions this RoPE is meant for: linear scaling stretches max_position_embeddings by its factor;
        dynamic NTK adapts its base to whatever length is reached (transformers sets no limit), so Petit allows
        the stretched length but at least 4096 positions."""
        if self.kind == "linear":
            return int(self.max_pos * float(self.s["factor"]))
        if self.kind == "dynamic":
            return max(int(self.max_pos * float(self.s["factor"])), 4096)
        return self.max_pos

    def _exponents(self) -> np.ndarray:
        return np.arange(0, self.dim, 2, dtype=np.int64).astype(np.float32) / np.float32(self.dim)

    def _default(self, base: float) -> np.ndarray:
        return (np.float32(1.0) / np.power(np.float32(base), self._exponents())).astype(np.float32)

    def inv_freq(self, seq_len: int) -> tuple[np.ndarray, float]:
        """(inv_freq float32 [dim/2], attention factor) for a forward pass reaching seq_len positions."""
        k, s = self.kind, self.s
        if k == "default":
            return self._default(self.base), 1.0
        if k == "linear":
            return (self._default(self.base) / np.float32(s["factor"])).astype(np.float32), 1.0
        if k == "dynamic":
            f, n = float(s["factor"]), max(seq_len, self.max_pos)
            base = self.base * ((f * n / self.max_pos) - (f - 1)) ** (self.dim / (self.dim - 2))
            return self._default(base), 1.0
        if k == "llama3":
            return self._llama3(), 1.0
        if k == "yarn":
            return self._yarn()
        return self._longrope(seq_len)

    def _llama3(self) -> np.ndarray:
        s = self.s
        inv = self._default(self.base)
        factor, lo, hi, old = (float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"]),
                               float(s["original_max_position_embeddings"]))
        wavelen = (2 * math.pi / inv).astype(np.float32)
        scaled = np.where(wavelen > old / lo, inv / np.float32(factor), inv).astype(np.float32)
        # hi == lo (Llama 4): the smooth band is empty, and transformers never uses the formula that divides by 0
        smooth = ((old / wavelen - lo) / (hi - lo) if hi != lo else np.zeros_like(wavelen)).astype(np.float32)
        smoothed = ((1 - smooth) * scaled / np.float32(factor) + smooth * scaled).astype(np.float32)
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(medium, smoothed, scaled).astype(np.float32)

    def _yarn(self) -> tuple[np.ndarray, float]:
        s, dim, base = self.s, self.dim, self.base
        factor = float(s["factor"])
        orig = s.get("original_max_position_embeddings") or self.max_pos

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        att = s.get("attention_factor")
        if att is None:
            m, m_all = s.get("mscale"), s.get("mscale_all_dim")
            att = float(mscale(factor, m) / mscale(factor, m_all)) if m and m_all else mscale(factor)
        beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

        def correction_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low)) / np.float32(high - low), 0, 1)
        extra = (1 - ramp).astype(np.float32)
        pos_freqs = np.power(np.float32(base), self._exponents()).astype(np.float32)
        inv = (1.0 / (np.float32(factor) * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
        return inv.astype(np.float32), float(att)

    def _longrope(self, seq_len: int) -> tuple[np.ndarray, float]:
        s = self.s
        factor, att = s.get("factor"), s.get("attention_factor")
        orig = self.orig_max or s.get("original_max_position_embeddings")
        if self.orig_max:
            factor = self.max_pos / self.orig_max
        else:
            orig = orig or self.max_pos
        if att is None:
            att = 1.0 if not factor or factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        ext = np.asarray(s["long_factor"] if seq_len > orig else s["short_factor"], np.float32)
        base_pow = np.power(np.float32(self.base), self._exponents()).astype(np.float32)
        return (np.float32(1.0) / (ext * base_pow)).astype(np.float32), float(att)

    def tables(self, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin [n, dim/2] (n >= seq_len) for a forward pass that ends at position seq_len - 1."""
        if self.kind == "dynamic":
            key = max(seq_len, self.max_pos) if seq_len > self.max_pos else 0
        elif self.kind == "longrope":
            key = seq_len > (self.orig_max or self.s.get("original_max_position_embeddings") or self.max_pos)
        else:
            key = 0
        if key != self._key or seq_len > self._n:
            n = max(seq_len, 2 * self._n if key == self._key else seq_len, 256)
            inv, att = self.inv_freq(seq_len)
            ang = np.arange(n, dtype=np.float32)[:, None] * inv[None, :]          # float32 as transformers
            self.cos = (np.cos(ang.astype(np.float64)) * att).astype(np.float32)
            self.sin = (np.sin(ang.astype(np.float64)) * att).astype(np.float32)
            self._key, self._n = key, n
        return self.cos, self.sin


class ProportionalRope(Rope):
    """transformers' `proportional` RoPE (Gemma 4's and LFM3's full layers): the whole head's pairs (i, i + head_dim
    / 2), the first `pairs` turning at the default frequencies base^(-2i / head_dim), the others not at all
    (frequency 0: cos 1, sin 0)."""

    def __init__(self, head_dim: int, base: float, pairs: int, max_position_embeddings: int):
        super().__init__(head_dim, base, None, max_position_embeddings)
        self.pairs = pairs

    def inv_freq(self, seq_len: int):
        inv = self._default(self.base).copy()
        inv[self.pairs:] = 0.0
        return inv, 1.0
