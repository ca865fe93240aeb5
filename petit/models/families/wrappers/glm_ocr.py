"""GLM-OCR as released (`glm_ocr`, GlmOcrForConditionalGeneration: zai-org/GLM-OCR): GLM-4.1V's vision tower and patch
merger beside a `glm_ocr_text` model, whose config is `text_config` and whose weights are `model.language_model.*`
(its head `lm_head.weight`; the tower `model.visual.*`). Petit runs the text model alone and says once that the
vision tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's `tie_word_embeddings`
(default false) or by a text_config that ties (GlmOcrConfig's __post_init__ forwards it), unless the checkpoint stores
one."""
from dataclasses import dataclass

from petit.models.families.dense import glm_ocr_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.visual.", "visual.")
OWN_KEYS = ("image_token_id", "video_token_id", "image_start_token_id", "image_end_token_id", "video_start_token_id",
            "video_end_token_id")


@dataclass(kw_only=True)
class GlmOcrConfig(glm_ocr_text.GlmOcrTextConfig):
    model_type: str = "glm_ocr"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "glm_ocr", OWN_KEYS, top=False, text=False,
                                                      text_types=("glm_ocr_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, glm_ocr_text.hf_tensors)


build = glm_ocr_text.build
Config = GlmOcrConfig
