"""GLM-4.1V as released (`glm4v`, Glm4vForConditionalGeneration: GLM-4.1V-9B): a vision tower (`visual`) beside a
`glm4v_text` model, its config under `text_config`, its weights `model.language_model.*`, `model.visual.*` and
`lm_head.weight` (or `visual.*`). Petit runs the text model alone and says once that the vision tower is not run; the
head is tied when the wrapper's tie_word_embeddings or text_config's is true (Glm4vConfig.__post_init__ forwards a
true one). Its M-RoPE gives a text-only prompt the token's position in every section, as Qwen2-VL's does."""
from dataclasses import dataclass

from petit.models.families.dense import glm4, glm4v_text

from petit.models.blocks import qwen_vl

OWN_KEYS = ("image_token_id", "video_token_id", "image_start_token_id", "image_end_token_id", "video_start_token_id",
            "video_end_token_id")


@dataclass(kw_only=True)
class Glm4vConfig(glm4v_text.Glm4vTextConfig):
    model_type: str = "glm4v"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, "glm4v_text", either_tie=True,
                                                     own_keys=OWN_KEYS))


def hf_tensors(cfg: Glm4vConfig, ckpt) -> dict:
    return qwen_vl.hf_tensors(cfg, ckpt, text_tensors=glm4.hf_tensors)


build = glm4.build
Config = Glm4vConfig
