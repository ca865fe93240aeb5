"""The newdec group of issue 36, written from transformers 5.25's modeling_mistral4.py: mistral4 (DeepSeek-V3's spec,
trainer/reference/families/deepseek.py, with the router choosing on the softmax of its logits and no correction bias,
Mistral 4's defaults, and every query x (1 + beta ln(1 + floor(p / n))), llama_4_scaling [beta, n]); mistral3 whose
text_model_type is mistral4 (Mistral Small 4's folder as Petit converts it), the other mistral3 files as the wrap
group reads them."""
from trainer.reference.families import wrap5
from trainer.reference.families.deepseek import _deepseek

M4_ROPE = {"rope_type": "yarn", "factor": 128.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0,
           "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0}
M4_DEFAULTS = {"rms_norm_eps": 1e-6, "first_k_dense_replace": 0, "n_group": 1, "topk_group": 1,
               "routed_scaling_factor": 1.0, "norm_topk_prob": True, "max_position_embeddings": 1048576,
               "rope_scaling": M4_ROPE}


def mistral4(cfg, names, family="mistral4"):
    c = {**M4_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}, "scoring_func": "softmax"}
    spec = _deepseek(c, names, family, v3=True)
    for L in spec.layers:
        if L.moe is not None:
            L.moe.sel_bias = None
    beta, n = cfg.get("llama_4_scaling") or (0.1, 8192)
    if beta:
        for L in spec.layers:
            L.temperature = (float(n), float(beta), 1)
    return spec


def mistral3(cfg, names):
    if cfg.get("text_model_type") == "mistral4":
        return mistral4(cfg, names, "mistral3")
    return wrap5.mistral3(cfg, names)


FAMILIES = {"mistral4": mistral4, "mistral3": mistral3}
