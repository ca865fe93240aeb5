"""The fam36c group of issue 36, written from transformers 5.25's definitions: its auto classes run `sarvam_moe`
(Sarvam-30B) and `param2moe` (Param2) as Glm4MoeForCausalLM and `sarvam_mla` (Sarvam-105B) as DeepseekV3ForCausalLM,
each under a config class of its own whose defaults differ from GLM-4.5's and DeepSeek-V3's. Each function here is
its parent's reference (moe.glm4_moe, deepseek._deepseek) with that config class's defaults filled in for the keys
a file leaves out. The tensors are read under GLM's and DeepSeek's names, as a `.petit` file holds them (the
engine's hf_tensors renames Sarvam's stored ones)."""
from trainer.reference.families.common import filled, under
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.moe import glm4_moe

# transformers 5.25's SarvamMoEConfig / Param2MoeConfig defaults where GLM-4.5's differ (Glm4MoeConfig)
SARVAM_MOE = dict(num_key_value_heads=4, head_dim=64, rope_theta=8000000.0, partial_rotary_factor=1.0,
                  rms_norm_eps=1e-6, use_qk_norm=True, moe_intermediate_size=1024, n_routed_experts=128,
                  n_shared_experts=1, num_experts_per_tok=6, routed_scaling_factor=2.5,
                  max_position_embeddings=131072)
PARAM2 = dict(SARVAM_MOE, num_key_value_heads=8, rope_theta=500000.0, tie_word_embeddings=True,
              moe_intermediate_size=2048, n_shared_experts=2, n_routed_experts=64, max_position_embeddings=32768)
# SarvamMLAConfig's where DeepSeek-V3's differ (the reference's _deepseek reads the rest with V3's)
SARVAM_MLA = dict(q_lora_rank=None, n_group=1, topk_group=1, first_k_dense_replace=1, n_routed_experts=128,
                  n_shared_experts=1, num_experts_per_tok=8, moe_intermediate_size=2048, routed_scaling_factor=2.5,
                  norm_topk_prob=True, rms_norm_eps=1e-6, max_position_embeddings=4096)


def sarvam_mla(cfg, names):
    return _deepseek(filled(cfg, SARVAM_MLA), names, "sarvam_mla", v3=True)


FAMILIES = {"sarvam_moe": under("sarvam_moe", glm4_moe, SARVAM_MOE),
            "param2moe": under("param2moe", glm4_moe, PARAM2), "sarvam_mla": sarvam_mla}
