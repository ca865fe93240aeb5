"""Param2 (BharatGen's Param2-17B-A2.4B, `param2moe`): transformers 5.25 runs it as Glm4MoeForCausalLM, and its
checkpoints and remote config use Sarvam-30B's names (transformers maps param2moe with sarvam_moe's conversion), so
this family is petit/models/families/moe/sarvam_moe.py's with transformers' Param2 defaults: tied embeddings, RoPE theta
5e5, 8 kv heads of 64, 32768 positions, 64 experts of 2048, top 6, two shared experts."""
from dataclasses import dataclass

from petit.models.families.moe import sarvam_moe


@dataclass(kw_only=True)
class Param2MoeConfig(sarvam_moe.SarvamMoeConfig):
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 32768
    rope_theta: float = 500000.0
    tie_word_embeddings: bool = True
    moe_intermediate_size: int = 2048
    n_routed_experts: int = 64
    n_shared_experts: int = 2
    model_type: str = "param2moe"


hf_tensors = sarvam_moe.hf_tensors
build = sarvam_moe.build
Config = Param2MoeConfig
