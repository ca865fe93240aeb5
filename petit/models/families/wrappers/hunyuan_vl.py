"""HunyuanOCR as released (`hunyuan_vl`, HunYuanVLForConditionalGeneration: tencent/HunyuanOCR): a vision tower and
patch merger beside a `hunyuan_vl_text` model. Its released config.json is flat (the text model's keys at the top
beside `vision_config`, which HunYuanVLConfig folds into text_config); transformers 5 writes `text_config`. Both are
read. Petit runs the text model alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py).
The head is tied by the wrapper's `tie_word_embeddings` (default true) or by text_config's (default true), unless the
checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.dense import hunyuan_vl_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("vit.", "model.vit.", "model.visual.", "visual.")
OWN_KEYS = ("image_token_id", "im_start_id", "im_end_id", "im_newline_id")


@dataclass(kw_only=True)
class HunYuanVLConfig(hunyuan_vl_text.HunYuanVLTextConfig):
    model_type: str = "hunyuan_vl"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "hunyuan_vl", OWN_KEYS, top=True, text=True,
                                                      text_types=("hunyuan_vl_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = hunyuan_vl_text.build
Config = HunYuanVLConfig
