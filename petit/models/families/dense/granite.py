"""Granite: Llama with four multipliers: embeddings x embedding_multiplier, attention scale attention_multiplier
(instead of 1/sqrt(head_dim)), each residual branch x residual_multiplier, logits / logits_scaling."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import positive_number
from petit.models.families.dense.llama import LlamaConfig


@dataclass(kw_only=True)
class GraniteConfig(LlamaConfig):
    embedding_multiplier: float = 1.0
    attention_multiplier: float = 1.0
    residual_multiplier: float = 1.0
    logits_scaling: float = 1.0
    model_type: str = "granite"

    def _validate(self):
        super()._validate()
        positive_number(self, "embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")


def build(cfg: GraniteConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope, context_length=rope.context_length,
                      embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                      residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling)


Config = GraniteConfig
