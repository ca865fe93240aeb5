"""DeepSeek-OCR-2 as released (`deepseek_ocr2`, DeepseekOcr2ForConditionalGeneration:
deepseek-community/DeepSeek-OCR-2): a SAM encoder (`model.sam_model.*`), a Qwen2-style vision encoder
(`model.qwen2_model.*`), their projector and view separator beside a `deepseek_ocr2_text` model stored at `model.*`
(save_pretrained's layout; transformers' modules are model.language_model.*, both read). Petit runs the text model
alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's
`tie_word_embeddings` alone (default false), unless the checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.moe import deepseek_ocr2_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.sam_model.", "model.qwen2_model.", "model.projector.", "model.view_seperator", "model.vision_tower.",
         "model.multi_modal_projector.", "model.view_separator")
OWN_KEYS = ("image_token_id",)


@dataclass(kw_only=True)
class DeepseekOcr2Config(deepseek_ocr2_text.DeepseekOcr2TextConfig):
    model_type: str = "deepseek_ocr2"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "deepseek_ocr2", OWN_KEYS, top=False, text=None,
                                                      text_types=("deepseek_ocr2_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, deepseek_ocr2_text.hf_tensors, prefixes=("model.language_model.",))


build = deepseek_ocr2_text.build
Config = DeepseekOcr2Config
