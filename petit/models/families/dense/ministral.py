"""Ministral: Mistral with a per-layer choice of sliding-window or full attention (`layer_types`, by default every
layer sliding when `sliding_window` is set)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class MinistralConfig(DecoderConfig):
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-6
    sliding_window: int | None = 4096
    layer_types: list | None = None
    model_type: str = "ministral"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "ministral", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        self.types = layer_types(self, lambda i: "sliding_attention" if self.sliding_window else "full_attention")


def build(cfg: MinistralConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=window_of(cfg, cfg.types),
                      context_length=rope.context_length)


Config = MinistralConfig
