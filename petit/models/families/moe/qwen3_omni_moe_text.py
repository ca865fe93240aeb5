"""Qwen3-Omni's language model (`qwen3_omni_moe_text`; the thinker's `text_config`): Qwen3-VL-MoE's (petit/models/
qwen3_vl_moe_text.py: Qwen3-MoE's block, interleaved M-RoPE, plain RoPE for text, no sliding window) under transformers'
Qwen3OmniMoeTextConfig: norm_topk_prob read (default true), its defaults (4 kv heads, 32768 positions, 128 experts
of 768, top 8, RoPE base 1e6), and `interleaved` read beside mrope_interleaved."""
from dataclasses import dataclass

from petit.models.families.moe import qwen3_moe, qwen3_vl_moe_text

from petit.models.families.dense import qwen3_vl_text

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Qwen3OmniMoeTextConfig(qwen3_vl_moe_text.Qwen3VLMoeTextConfig):
    intermediate_size: int = 18944
    num_hidden_layers: int = 28
    num_attention_heads: int = 28
    num_key_value_heads: int | None = 4
    max_position_embeddings: int = 32768
    rope_theta: float = 1e6
    num_experts: int = 128
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 768
    tie_word_embeddings: bool = False
    model_type: str = "qwen3_omni_moe_text"

    @classmethod
    def from_dict(cls, d):
        d = qwen_vl.not_read(d, qwen3_vl_text.NO_WINDOW, f"{cls.model_type}'s attention has no sliding window")
        return super(qwen3_vl_moe_text.Qwen3VLMoeTextConfig, cls).from_dict(qwen_vl.read_mrope(d, interleaved=True))

    def to_dict(self) -> dict:
        return {k: v for k, v in super(qwen3_vl_moe_text.Qwen3VLMoeTextConfig, self).to_dict().items()
                if k not in qwen3_vl_text.NO_WINDOW}


hf_tensors = qwen3_vl_moe_text.hf_tensors
build = qwen3_moe.build
Config = Qwen3OmniMoeTextConfig
