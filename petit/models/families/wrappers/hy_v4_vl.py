"""HY-V4 VL as released (`hy_v4_vl`, HYV4VLForConditionalGeneration: tencent/Hy4): a vision tower and patch merger
(`vit.*` as stored, transformers' `model.vision_tower.*`) beside a `hy_v4_vl_text` model stored at `model.*` with the
release's names (save_pretrained writes them; petit/models/families/mla/hy_v4.py reads both spellings), whose config is
`text_config`. Petit runs the text model alone and says once that the vision tower is not run
(petit/models/blocks/wrapper.py). The head is tied by the wrapper's `tie_word_embeddings` alone (default false), unless
the checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.mla import hy_v4_vl_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("vit.", "model.vision_tower.", "model.vit.")
OWN_KEYS = ("image_token_id", "video_token_id")


@dataclass(kw_only=True)
class HYV4VLConfig(hy_v4_vl_text.HYV4VLTextConfig):
    model_type: str = "hy_v4_vl"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "hy_v4_vl", OWN_KEYS, top=False, text=None,
                                                      text_types=("hy_v4_vl_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, hy_v4_vl_text.hf_tensors, prefixes=("model.language_model.",))


build = hy_v4_vl_text.build
Config = HYV4VLConfig
