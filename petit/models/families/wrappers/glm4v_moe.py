"""GLM-4.5V as released (`glm4v_moe`, Glm4vMoeForConditionalGeneration): GLM-4.1V's wrapper
(petit/models/families/wrappers/glm4v.py: the vision tower `visual` not run, the head tied by either
tie_word_embeddings) around a `glm4v_moe_text` model, its experts one tensor each as the releases store them
(transformers 5 fuses them at load and splits them at save)."""
from dataclasses import dataclass

from petit.models.families.wrappers import glm4v

from petit.models.families.moe import glm4_moe, glm4v_moe_text

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Glm4vMoeConfig(glm4v_moe_text.Glm4vMoeTextConfig):
    model_type: str = "glm4v_moe"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, "glm4v_moe_text", either_tie=True,
                                                     own_keys=glm4v.OWN_KEYS))


def hf_tensors(cfg: Glm4vMoeConfig, ckpt) -> dict:
    return qwen_vl.hf_tensors(cfg, ckpt, text_tensors=glm4v_moe_text.hf_tensors)


build = glm4_moe.build
Config = Glm4vMoeConfig
