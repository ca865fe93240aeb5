"""The qwenvl group of issue 36: the language models of the Qwen-VL checkpoints, as Petit converts them (the text model
alone: a flat config with the wrapper's or the text model's model_type, the text model's tensor names;
petit/models/blocks/qwen_vl.py). A text-only prompt gives every M-RoPE section the token's position, so each is its text
family's reference with plain RoPE (mrope_section is not read) and its transformers config's defaults filled in for
keys a file leaves out: qwen2_vl / qwen2_5_vl (qwen2 under Qwen2VLTextConfig's defaults), qwen3_vl (qwen3 under
Qwen3VLTextConfig's, no sliding window) and qwen3_vl_moe (qwen3_moe under Qwen3VLMoeTextConfig's, the chosen experts'
weights always renormalised: its router has no norm_topk_prob); glm4v (glm4 under Glm4vTextConfig's defaults, q / k / v
biases always), glm4v_moe (glm4_moe under Glm4vMoeTextConfig's, no q / k norms), and glm46v / glmga, whose text model
is either (the file's `text_model_type`, glm4v_text by default); cosmos3_omni (Qwen3-VL's text model); the Omni
thinkers: qwen2_5_omni_thinker (qwen2 under Qwen2_5OmniTextConfig's defaults) and qwen3_omni_moe_thinker (qwen3_moe
under Qwen3OmniMoeTextConfig's, norm_topk_prob read, default true), and the full qwen2_5_omni / qwen3_omni_moe
models, whose files are their thinkers' text models."""
from trainer.reference.families.common import under
from trainer.reference.families.llama import qwen2, qwen3
from trainer.reference.families.llama_variants import glm4
from trainer.reference.families.moe import glm4_moe, qwen3_moe

QWEN2_VL = dict(rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=4096, max_window_layers=80)
QWEN3_VL = dict(num_key_value_heads=32, head_dim=128, max_position_embeddings=128000, rope_theta=5e5)
QWEN3_VL_MOE = dict(num_key_value_heads=16, max_position_embeddings=128000, rope_theta=5e5, num_experts=60,
                    num_experts_per_tok=4, moe_intermediate_size=1408, norm_topk_prob=True)

GLM4V = dict(num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-5, partial_rotary_factor=1.0,
             attention_bias=True)
GLM4V_MOE = dict(max_position_embeddings=65536, attention_bias=True, use_qk_norm=False)
QWEN2_5_OMNI = dict(num_key_value_heads=4, rope_theta=1e6, sliding_window=32768, max_window_layers=28)
QWEN3_OMNI = dict(num_key_value_heads=4, max_position_embeddings=32768, rope_theta=1e6, num_experts=128,
                  num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True)


def _heads(defaults: dict):
    """defaults with head_dim hidden_size / num_attention_heads (GLM-4V's text configs have no head_dim default)."""
    def fill(cfg, names, parent, kind):
        return under(kind, parent, dict(defaults, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"]))(
            cfg, names)
    return fill


def _glm(kind: str, text_type: str = "glm4v_text"):
    def spec(cfg, names):
        moe = cfg.get("text_model_type", text_type) == "glm4v_moe_text"
        return _heads(GLM4V_MOE if moe else GLM4V)(cfg, names, glm4_moe if moe else glm4, kind)
    return spec


def _moe(kind: str, tie: bool):
    def spec(cfg, names):
        if cfg.get("norm_topk_prob") is False:
            raise ValueError(f"the reference does not model norm_topk_prob=False of {kind}")
        return under(kind, qwen3_moe, dict(QWEN3_VL_MOE, tie_word_embeddings=tie))(cfg, names)
    return spec


FAMILIES = {"qwen2_vl_text": under("qwen2_vl_text", qwen2, QWEN2_VL), "qwen2_vl": under("qwen2_vl", qwen2, QWEN2_VL),
            "qwen2_5_vl_text": under("qwen2_5_vl_text", qwen2, QWEN2_VL),
            "qwen2_5_vl": under("qwen2_5_vl", qwen2, QWEN2_VL),
            "qwen3_vl_text": under("qwen3_vl_text", qwen3, QWEN3_VL), "qwen3_vl": under("qwen3_vl", qwen3, QWEN3_VL),
            "cosmos3_omni": under("cosmos3_omni", qwen3, QWEN3_VL),
            "qwen2_5_omni_text": under("qwen2_5_omni_text", qwen2, dict(QWEN2_5_OMNI, tie_word_embeddings=True)),
            "qwen2_5_omni_thinker": under("qwen2_5_omni_thinker", qwen2,
                                          dict(QWEN2_5_OMNI, tie_word_embeddings=False)),
            "qwen3_omni_moe_text": under("qwen3_omni_moe_text", qwen3_moe, QWEN3_OMNI),
            "qwen3_omni_moe_thinker": under("qwen3_omni_moe_thinker", qwen3_moe, QWEN3_OMNI),
            "qwen2_5_omni": under("qwen2_5_omni", qwen2, dict(QWEN2_5_OMNI, tie_word_embeddings=False)),
            "qwen3_omni_moe": under("qwen3_omni_moe", qwen3_moe, QWEN3_OMNI),
            "qwen3_vl_moe_text": _moe("qwen3_vl_moe_text", True), "qwen3_vl_moe": _moe("qwen3_vl_moe", False),
            **{k: _glm(k) for k in ("glm4v_text", "glm4v", "glm46v", "glmga")},
            **{k: _glm(k, "glm4v_moe_text") for k in ("glm4v_moe_text", "glm4v_moe")}}
