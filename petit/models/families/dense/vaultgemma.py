"""VaultGemma (Google, trained with differential privacy): Gemma 2 without the sandwich's post-norms; each block
has an input norm before attention and a pre-feedforward norm before the MLP, (1 + w) RMSNorms, soft-capped
attention scores and logits, alternating sliding / full layers."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like, window_of
from petit.models.families.dense.gemma2 import Gemma2Config


@dataclass(kw_only=True)
class VaultGemmaConfig(Gemma2Config):
    model_type: str = "vaultgemma"


def build(cfg: VaultGemmaConfig, t):
    rope = default_rope(cfg)
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, norm_add=1.0, qkv_bias=cfg.attention_bias,
                     o_bias=cfg.attention_bias, rope_for=lambda i: rope, window_for=window_of(cfg, cfg.types()),
                     act=cfg.act, embed_scale=cfg.hidden_size ** 0.5, attn_scale=cfg.query_pre_attn_scalar ** -0.5,
                     attn_softcap=cfg.attn_logit_softcapping or 0.0, logit_softcap=cfg.final_logit_softcapping or 0.0,
                     context_length=rope.context_length, mlp_norm_name="pre_feedforward_layernorm")
    return dec


Config = VaultGemmaConfig
