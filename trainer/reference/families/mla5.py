"""The latent-attention (mla) group of issue 30, transformers 5's definitions: glm4_moe_lite (GLM-4.7-Flash:
DeepSeek-V3's latent attention and router, the routed layers where mlp_layer_types says "sparse", by default every
layer but the first)."""
from trainer.reference.families.common import get
from trainer.reference.families.deepseek import _deepseek


def glm4_moe_lite(cfg, names):
    n = cfg["num_hidden_layers"]
    types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    return _deepseek(dict(cfg, mlp_layer_types=types, n_group=get(cfg, "n_group", 1),
                          topk_group=get(cfg, "topk_group", 1),
                          routed_scaling_factor=get(cfg, "routed_scaling_factor", 1.8),
                          rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5)), names, "glm4_moe_lite", v3=True)


FAMILIES = {"glm4_moe_lite": glm4_moe_lite}
