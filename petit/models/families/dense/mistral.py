"""Mistral: Llama with sliding-window attention in every layer (`sliding_window`, null for none)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class MistralConfig(DecoderConfig):
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096 * 32
    sliding_window: int | None = 4096
    model_type: str = "mistral"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "mistral", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)


def build(cfg: MistralConfig, t):
    rope = default_rope(cfg)
    w = cfg.sliding_window or 0
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=lambda i: w,
                      context_length=rope.context_length)


Config = MistralConfig
