"""The qwenvl group of issue 36: the language models of the Qwen-VL checkpoints, as Petit converts them (the text model
alone: a flat config with the wrapper's or the text model's model_type, the text model's tensor names;
petit/models/qwen_vl.py). A text-only prompt gives every M-RoPE section the token's position, so each is its text
family's reference with plain RoPE (mrope_section is not read) and its transformers config's defaults filled in for
keys a file leaves out: qwen2_vl / qwen2_5_vl (qwen2 under Qwen2VLTextConfig's defaults), qwen3_vl (qwen3 under
Qwen3VLTextConfig's, no sliding window) and qwen3_vl_moe (qwen3_moe under Qwen3VLMoeTextConfig's, the chosen experts'
weights always renormalised: its router has no norm_topk_prob)."""
from trainer.reference.families.common import under
from trainer.reference.families.llama import qwen2, qwen3
from trainer.reference.families.moe import qwen3_moe

QWEN2_VL = dict(rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=4096, max_window_layers=80)
QWEN3_VL = dict(num_key_value_heads=32, head_dim=128, max_position_embeddings=128000, rope_theta=5e5)
QWEN3_VL_MOE = dict(num_key_value_heads=16, max_position_embeddings=128000, rope_theta=5e5, num_experts=60,
                    num_experts_per_tok=4, moe_intermediate_size=1408, norm_topk_prob=True)


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
            "qwen3_vl_moe_text": _moe("qwen3_vl_moe_text", True), "qwen3_vl_moe": _moe("qwen3_vl_moe", False)}
