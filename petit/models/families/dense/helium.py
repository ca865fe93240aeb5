"""Helium (Kyutai): Llama with RoPE on interleaved pairs (2i, 2i+1) and optional q/k/v and MLP biases (o_proj has
none)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class HeliumConfig(DecoderConfig):
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-8
    rope_theta: float = 100000.0
    attention_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "helium"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "helium", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "mlp_bias"))


def build(cfg: HeliumConfig, t):
    rope = default_rope(cfg, interleaved=True)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length)


Config = HeliumConfig
