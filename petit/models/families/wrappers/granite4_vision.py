"""Granite 4 Vision as released (`granite4_vision`, Granite4VisionForConditionalGeneration): LLaVA-NeXT's layout with a
CLIP / SigLIP vision tower, window Q-Former projectors (`layerwise_projectors` feeding DeepStack features to chosen
text layers, `spatial_projectors`) and `image_newline`, beside a `granite4_vision_text` model, whose config is
`text_config` and whose weights are `model.language_model.*` (its head `lm_head.weight`). Petit runs the text model
alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py); the DeepStack features only reach
image tokens. The head is tied by the wrapper's `tie_word_embeddings` alone (default false), unless the checkpoint
stores one; logits / text_config's `logits_scaling`, as Granite's."""
from dataclasses import dataclass

from petit.models.families.dense import granite, granite4_vision_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.vision_tower.", "model.layerwise_projectors.", "model.spatial_projectors.", "model.image_newline",
         "vision_tower.", "layerwise_projectors.", "spatial_projectors.", "image_newline")
OWN_KEYS = ("image_token_index", "image_token_id", "image_grid_pinpoints", "image_seq_length", "vision_feature_layer",
            "vision_feature_select_strategy", "downsample_rate", "deepstack_layer_map", "spatial_vision_layer",
            "spatial_target_layers", "projector_dropout", "qformer_config")


@dataclass(kw_only=True)
class Granite4VisionConfig(granite4_vision_text.Granite4VisionTextConfig):
    model_type: str = "granite4_vision"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "granite4_vision", OWN_KEYS, top=False, text=None,
                                                      text_types=("granite4_vision_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = granite.build
Config = Granite4VisionConfig
