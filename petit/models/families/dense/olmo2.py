"""OLMo 2: no pre-norms; RMSNorm after attention and after the MLP, before each residual add
(`post_attention_layernorm`, `post_feedforward_layernorm`); RMSNorm over the whole q and k rows (`q_norm`, `k_norm`)
before RoPE."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.families.dense.llama import LlamaConfig


@dataclass(kw_only=True)
class Olmo2Config(LlamaConfig):
    rms_norm_eps: float = 1e-5
    model_type: str = "olmo2"


def build(cfg: Olmo2Config, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope, context_length=rope.context_length,
                      qk_norm="full", post_only=True)


Config = Olmo2Config
