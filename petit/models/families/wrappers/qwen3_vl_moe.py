"""Qwen3-VL-MoE as released (`qwen3_vl_moe`, Qwen3VLMoeForConditionalGeneration: Qwen3-VL-30B-A3B, 235B-A22B):
Qwen3-VL's wrapper (petit/models/families/wrappers/qwen3_vl.py: text_config, the vision tower `visual` not run, the head
tied by the wrapper's tie_word_embeddings alone, default false whatever text_config's default true says) around a
`qwen3_vl_moe_text` model, whose 3-D experts are read through the text model's names."""
from dataclasses import dataclass

from petit.models.families.moe import qwen3_moe, qwen3_vl_moe_text

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Qwen3VLMoeConfig(qwen3_vl_moe_text.Qwen3VLMoeTextConfig):
    tie_word_embeddings: bool = False       # Qwen3VLMoeConfig's (the text config's default true does not tie)
    model_type: str = "qwen3_vl_moe"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, cls.model_type + "_text"))


def hf_tensors(cfg: Qwen3VLMoeConfig, ckpt) -> dict:
    return qwen_vl.hf_tensors(cfg, ckpt, text_tensors=qwen3_vl_moe_text.hf_tensors)


build = qwen3_moe.build
Config = Qwen3VLMoeConfig
