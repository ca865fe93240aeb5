"""ERNIE 4.5 VL as released (`ernie4_5_vl_moe`, Ernie4_5_VLMoeForConditionalGeneration: ERNIE-4.5-VL-28B-A3B,
-424B-A47B): a vision transformer (`model.vision_model.*`) and its variable-resolution resampler
(`model.resampler_model.*`) beside an `ernie4_5_vl_moe_text` model stored at `model.*` (its vision experts inside its
layers: petit/models/families/moe/ernie4_5_vl_moe_text.py), as save_pretrained writes it. Petit runs the text model
alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's
`tie_word_embeddings` alone (default true), unless the checkpoint stores one.

transformers 5's module names (model.language_model.*, text_moe / vision_moe with fused 3-D experts) are what its
conversion_mapping makes of the stored layout when loading; a checkpoint under those names is refused by name."""
from dataclasses import dataclass

from petit.models.families.moe import ernie4_5_vl_moe_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.vision_model.", "model.resampler_model.", "vision_model.", "resampler_model.", "model.vision_tower.")
OWN_KEYS = ("image_token_id", "video_token_id", "image_start_token_id", "image_end_token_id", "video_start_token_id",
            "video_end_token_id")


@dataclass(kw_only=True)
class Ernie45VLMoeConfig(ernie4_5_vl_moe_text.Ernie45VLMoeTextConfig):
    model_type: str = "ernie4_5_vl_moe"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "ernie4_5_vl_moe", OWN_KEYS, top=True, text=None,
                                                      text_types=("ernie4_5_vl_moe_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    fused = next((n for n in ckpt.names() if ".text_moe." in n or ".vision_moe." in n), None)
    if fused is not None:
        raise ValueError(f"checkpoint: {fused} is transformers 5's module name for ERNIE 4.5 VL's experts (fused, "
                         f"split by modality); Petit reads the layout save_pretrained writes and the release has "
                         f"(mlp.experts.N.*, mlp.gate.weight / weight_1)")
    return wrapper.hf_tensors(cfg, ckpt, TOWER, ernie4_5_vl_moe_text.hf_tensors)


build = ernie4_5_vl_moe_text.build
Config = Ernie45VLMoeConfig
