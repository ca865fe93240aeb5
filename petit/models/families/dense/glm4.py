"""GLM-4 (GLM-4-0414): GLM with two more RMSNorms, on the attention's output (`post_self_attn_layernorm`) and on
the MLP's (`post_mlp_layernorm`), each before its residual add; `post_attention_layernorm` is the MLP's input norm."""
from dataclasses import dataclass

from petit.models.families.dense import glm
from petit.models.blocks.common import norm

hf_tensors = glm.hf_tensors


@dataclass(kw_only=True)
class Glm4Config(glm.GlmConfig):
    model_type: str = "glm4"


def build(cfg: Glm4Config, t):
    dec = glm.build(cfg, t)
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        L.post_attn_norm = norm(t, p + "post_self_attn_layernorm", D, "rms", eps)
        L.post_mlp_norm = norm(t, p + "post_mlp_layernorm", D, "rms", eps)
    return dec


Config = Glm4Config
