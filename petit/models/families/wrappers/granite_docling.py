"""Granite Docling as released (`granite_docling`, GraniteDoclingForConditionalGeneration): Idefics3's layout, a
SigLIP-style vision model with its connector and DeepStack merger (`model.vision_model.*`) beside a
`granite_docling_text` model, whose config is `text_config` and whose weights are `model.text_model.*` (its head
`lm_head.weight`, tied by default). Petit runs the text model alone and says once that the vision tower is not run
(petit/models/blocks/wrapper.py); the DeepStack features only reach image tokens. The head is tied by the wrapper's
`tie_word_embeddings` alone (default true), unless the checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.dense import granite, granite_docling_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.vision_model.", "vision_model.")
OWN_KEYS = ("image_token_id", "density_router_hidden_size", "density_router_threshold", "density_router_loss_weight")
PREFIXES = ("model.text_model.",)


@dataclass(kw_only=True)
class GraniteDoclingConfig(granite_docling_text.GraniteDoclingTextConfig):
    model_type: str = "granite_docling"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "granite_docling", OWN_KEYS, top=True, text=None,
                                                      text_types=("granite_docling_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, prefixes=PREFIXES)


build = granite.build
Config = GraniteDoclingConfig
