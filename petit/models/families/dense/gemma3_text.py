"""Gemma 3 (text): Gemma 2's block with RMSNorm (1 + w) on each head of q and k, and two RoPEs: sliding layers use
rope_local_base_freq without scaling, full layers rope_theta with rope_scaling. By default every
sliding_window_pattern-th layer is full, the others sliding. No soft-capping unless the config sets it."""
from dataclasses import dataclass

from petit.models.families.dense import gemma2
from petit.models.blocks.common import default_rope, layer_types
from petit.models.blocks.config import positive_int, positive_number


@dataclass(kw_only=True)
class Gemma3TextConfig(gemma2.Gemma2Config):
    rope_theta: float = 1_000_000.0             # transformers' default for the full layers
    rope_local_base_freq: float = 10000.0       # transformers 5: rope_parameters["sliding_attention"]["rope_theta"]
    sliding_window_pattern: int = 6
    final_logit_softcapping: float | None = None
    attn_logit_softcapping: float | None = None
    model_type: str = "gemma3_text"

    _IGNORED = frozenset({"_sliding_window_pattern"})
    _ROPE_LOCAL_THETA = True

    def _validate(self):
        super()._validate()
        positive_number(self, "rope_local_base_freq")
        positive_int(self, "sliding_window_pattern")

    def types(self):
        p = self.sliding_window_pattern
        return layer_types(self, lambda i: "sliding_attention" if (i + 1) % p else "full_attention")


def build(cfg: Gemma3TextConfig, t):
    full, local = default_rope(cfg), default_rope(cfg, base=cfg.rope_local_base_freq, scaling=None)
    types = cfg.types()
    return gemma2.build(cfg, t, qk_norm="head", context_length=full.context_length,
                        rope_for=lambda i: local if types[i] == "sliding_attention" else full)


Config = Gemma3TextConfig
