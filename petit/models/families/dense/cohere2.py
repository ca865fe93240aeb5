"""Cohere 2 (Command R7B): Cohere's parallel block where sliding-window layers use RoPE and full-attention layers
use no position encoding; by default every sliding_window_pattern-th layer (4) is full."""
from dataclasses import dataclass

from petit.models.families.dense import cohere
from petit.models.blocks.common import default_rope, layer_types, window_of
from petit.models.blocks.config import positive_int


@dataclass(kw_only=True)
class Cohere2Config(cohere.CohereConfig):
    sliding_window: int | None = 4096
    layer_types: list | None = None
    sliding_window_pattern: int = 4
    model_type: str = "cohere2"

    _IGNORED = frozenset({"_sliding_window_pattern"})
    _ROPE_LAYER_TYPES = ("sliding_attention",)     # the full-attention layers have no position encoding

    def _validate(self):
        super()._validate()
        positive_int(self, "sliding_window_pattern")
        if self.use_qk_norm:
            raise ValueError("config: use_qk_norm is not part of cohere2")

    def types(self):
        p = self.sliding_window_pattern
        return layer_types(self, lambda i: "sliding_attention" if (i + 1) % p else "full_attention")


def build(cfg: Cohere2Config, t):
    rope, types = default_rope(cfg, interleaved=True), cfg.types()
    return cohere.build(cfg, t, rope_for=lambda i: rope if types[i] == "sliding_attention" else None,
                        window_for=window_of(cfg, types))


Config = Cohere2Config
