"""Molmo2 as released (`molmo2`, Molmo2ForConditionalGeneration: allenai/Molmo2): a vision transformer and its
attention-pooling / projector adapter (`model.vision_backbone.*` as stored; transformers' modules
`model.vision_tower.*`, `model.multi_modal_projector.*`) beside a `molmo2_text` model, whose config is `text_config`
(petit/models/families/dense/molmo2_text.py reads its names). Petit runs the text model alone and says once that the
vision tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's `tie_word_embeddings` alone
(default false), unless the checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.dense import molmo2_text

from petit.models.blocks import wrapper, wrapper_flat

OWN_KEYS = ("image_start_token_id", "low_res_image_start_token_id", "image_end_token_id", "image_patch_id",
            "frame_start_token_id", "frame_end_token_id", "image_token_id", "video_token_id", "adapter_config")


@dataclass(kw_only=True)
class Molmo2Config(molmo2_text.Molmo2TextConfig):
    model_type: str = "molmo2"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and d.get("vit_config") and not d.get("vision_config"):     # transformers' legacy key
            d = {("vision_config" if k == "vit_config" else k): v for k, v in d.items()}
        return super().from_dict(wrapper_flat.flatten(d, "molmo2", OWN_KEYS, top=False, text=None,
                                                      text_types=("molmo2_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    tower = {n: e for n, e in wrapper.hf_tensors(cfg, ckpt, molmo2_text.TOWER, prefixes=()).items()
             if n.startswith(molmo2_text.TOWER)}
    return molmo2_text.hf_tensors(cfg, ckpt) | tower


build = molmo2_text.build
Config = Molmo2Config
