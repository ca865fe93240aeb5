"""The wrap group of issue 30: the multimodal wrappers, as Petit converts them (the text model alone: a flat config
with the wrapper's model_type, the text model's tensor names; petit/models/blocks/wrapper.py), and the text families
that come with them. gemma3 (Gemma3ForConditionalGeneration's language model: gemma3_text, whose final soft-capping the
wrapper's forward does not apply); ministral3 (Mistral's block, yarn RoPE by default, every query after RoPE x
(1 + beta ln(1 + floor(p / n))), llama_4_scaling [beta, n]); mistral3 (ministral3 or, text_model_type "mistral",
Mistral); llama4 (its llama4_text model); exaone (Llama under EXAONE's names, stored as Llama's in a file);
solar_open (glm4_moe's experts in every layer, whole-head RoPE, no q / k norms)."""
from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.gemma import gemma3_text
from trainer.reference.families.llama import llama, llama_like, mistral
from trainer.reference.families.moe import glm4_moe, llama4_text


def gemma3(cfg, names):
    spec = gemma3_text(dict(cfg, final_logit_softcapping=None), names)
    spec.family = "gemma3"
    return spec


def ministral3(cfg, names, family="ministral3"):
    scaling = cfg.get("rope_scaling", {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384,
                                       "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0})
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 1e6), rope_scaling=scaling,
                  max_position_embeddings=get(cfg, "max_position_embeddings", 262144)), heads(cfg)[2])
    w = cfg.get("sliding_window") or 0
    spec = llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-5), rope_of=lambda i: r,
                      window_of=lambda i: w)
    beta, n = cfg.get("llama_4_scaling") or (0.1, 16384)
    if beta:
        for L in spec.layers:
            L.temperature = (float(n), float(beta), 1)
    return spec


def mistral3(cfg, names):
    if cfg.get("text_model_type", "ministral3") == "mistral":
        spec = mistral(cfg, names)
        spec.family = "mistral3"
        return spec
    return ministral3(cfg, names, "mistral3")


def llama4(cfg, names):
    spec = llama4_text(cfg, names)
    spec.family = "llama4"
    return spec


def exaone(cfg, names):
    """Llama, as Petit converts it (Llama's keys and names; EXAONE's defaults written out)."""
    spec = llama(dict(cfg, rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5)), names)
    spec.family = "exaone"
    return spec


def solar_open(cfg, names):
    """GLM-4.5's experts in every layer under Llama's attention (whole-head RoPE, no q / k norms)."""
    spec = glm4_moe(dict(cfg, first_k_dense_replace=0, partial_rotary_factor=1.0, use_qk_norm=False,
                         rope_theta=get(cfg, "rope_theta", 1e6)), names)
    spec.family = "solar_open"
    return spec


FAMILIES = {"gemma3": gemma3, "ministral3": ministral3, "mistral3": mistral3, "llama4": llama4, "exaone": exaone,
            "solar_open": solar_open}
