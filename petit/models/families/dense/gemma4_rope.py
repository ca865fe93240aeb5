"""Gemma 4's RoPE (the family: gemma4_text.py): transformers 5's rope_parameters per layer type read into the
config's fields (the full layers' "proportional" kind among them, which blocks/rope_config.py does not know), and each
layer's RoPE: default on the sliding layers, proportional (or default) on the full ones, or llama.cpp's factor form
of it from a GGUF file's rope_freqs table."""
import numpy as np

from petit.models.blocks.common import LAYER_TYPES
from petit.models.blocks.rope import ProportionalRope, Rope


class FactorRope(Rope):
    """llama.cpp's form of the full layers' RoPE in a gemma4 GGUF file: the whole head in halves at base^(-2i /
    head_dim), each frequency divided by its `rope_freqs` factor (1e30 for the pairs proportional RoPE leaves)."""

    def __init__(self, head_dim: int, base: float, factors, max_pos: int):
        super().__init__(head_dim, base, None, max_pos)
        self.factors = np.asarray(factors, np.float32)
        if self.factors.shape != (head_dim // 2,):
            raise ValueError(f"rope_freqs has {self.factors.size} factors, expected {head_dim // 2} (the full "
                             f"layers' head_dim / 2)")

    def inv_freq(self, seq_len: int):
        return (self._default(self.base) / self.factors).astype(np.float32), 1.0


def read_rope_parameters(d):
    """A config dict with its rope_parameters read into Gemma 4's fields: transformers 5's per-layer-type entries,
    the full layers' "proportional" kind among them, which the shared RoPE reader does not know."""
    if isinstance(d, dict) and isinstance(d.get("rope_parameters"), dict):
        d = dict(d)
        rp = d.pop("rope_parameters")
        for kind, entry in rp.items():
            if kind not in LAYER_TYPES or not isinstance(entry, dict):
                raise ValueError(f"config: rope_parameters.{kind}: Gemma 4 has full_attention and "
                                 f"sliding_attention entries, got {entry!r}")
            rope_type = entry.get("rope_type", "default")
            extra = sorted(set(entry) - {"rope_type", "rope_theta", "partial_rotary_factor"})
            if extra or rope_type not in (("default", "proportional") if kind == "full_attention" else
                                          ("default",)):
                raise ValueError(f"config: rope_parameters.{kind}: a {rope_type!r} RoPE with "
                                 f"{', '.join(extra) or 'no other keys'} is not supported by gemma4 (it runs the "
                                 f"default RoPE, and proportional RoPE on full layers, without scaling)")
            if "rope_theta" in entry:
                d["rope_theta" if kind == "full_attention" else "rope_local_base_freq"] = entry["rope_theta"]
            if kind == "full_attention":
                d["full_rope_type"] = rope_type
                d["partial_rotary_factor"] = entry.get("partial_rotary_factor", 1.0)
            elif "partial_rotary_factor" in entry and entry["partial_rotary_factor"] != 1.0:
                raise ValueError("config: rope_parameters.sliding_attention: a partial_rotary_factor is not "
                                 "supported by gemma4 (its sliding layers rotate the whole head)")
    return d


def layer_ropes(cfg):
    """The RoPE of a layer of the given kind and head_dim, made once per pair."""
    ropes = {}

    def rope_of(kind, hd):
        key = (kind, hd)
        if key not in ropes:
            if kind == "sliding_attention":
                ropes[key] = Rope(hd, cfg.rope_local_base_freq, None, cfg.max_position_embeddings)
            elif (cfg.rope_scaling or {}).get("rope_type") == "longrope":     # a GGUF file's rope_freqs table
                ropes[key] = FactorRope(hd, cfg.rope_theta, cfg.rope_scaling["long_factor"],
                                        cfg.max_position_embeddings)
            elif cfg.full_rope_type == "proportional":
                ropes[key] = ProportionalRope(hd, cfg.rope_theta, int(cfg.partial_rotary_factor * hd // 2),
                                              cfg.max_position_embeddings)
            else:
                ropes[key] = Rope(hd, cfg.rope_theta, None, cfg.max_position_embeddings)
        return ropes[key]

    return rope_of
