"""Mistral 3 as released (`mistral3`, Mistral3ForConditionalGeneration: Ministral-3, Mistral Small 3.1 / 3.2,
Devstral, Magistral, Mistral Small 4): a Pixtral vision tower and its patch-merging projector beside a text model,
`ministral3` (Ministral 3), `mistral` (the Small 3 models) or `mistral4` (Mistral Small 4, issue 36: DeepSeek-V3's
latent attention and experts, petit/models/families/mla/mistral4.py), whose config is `text_config` and whose weights
are `language_model.model.*` (as save_pretrained writes them) or `model.language_model.*`. Petit runs the text model
alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's
own `tie_word_embeddings` (default true), which transformers reads instead of text_config's, unless the checkpoint
stores one (transformers' from_pretrained keeps a stored head that differs from the embeddings). A converted file
keeps the text model's type as `text_model_type`."""
from dataclasses import dataclass

from petit.models.families.mla import mistral4

from petit.models.families.dense import ministral3, mistral

from petit.models.blocks import wrapper

TOWER = ("model.vision_tower.", "model.multi_modal_projector.", "vision_tower.", "multi_modal_projector.")
OWN_KEYS = ("image_token_index", "image_token_id", "projector_hidden_act", "vision_feature_layer",
            "multimodal_projector_bias", "spatial_merge_size")
TEXT_TYPES = ("ministral3", "mistral", "mistral4")


def _flat(d):
    flat = wrapper.flatten(d, "mistral3", OWN_KEYS, tie=True, text_types=TEXT_TYPES)
    if isinstance(flat, dict) and flat.get("text_model_type", "ministral3") not in TEXT_TYPES:
        raise ValueError(f"config: text_model_type must be one of {', '.join(TEXT_TYPES)}, got "
                         f"{flat['text_model_type']!r}")
    return flat


@dataclass(kw_only=True)
class Mistral3Config(ministral3.Ministral3Config):
    """A mistral3 folder whose text model is Ministral 3's (`text_model_type` "mistral" builds Mistral3SmallConfig,
    "mistral4" Mistral3M4Config)."""
    model_type: str = "mistral3"
    text_model_type: str = "ministral3"

    @classmethod
    def from_dict(cls, d):
        flat = _flat(d)
        if isinstance(flat, dict) and flat.get("text_model_type") == "mistral":
            return Mistral3SmallConfig.from_dict(flat)
        if isinstance(flat, dict) and flat.get("text_model_type") == "mistral4":
            return Mistral3M4Config.from_dict(flat)
        return super().from_dict(flat)


@dataclass(kw_only=True)
class Mistral3SmallConfig(mistral.MistralConfig):
    """A mistral3 folder whose text model is Mistral's (Mistral Small 3.1 / 3.2)."""
    model_type: str = "mistral3"
    text_model_type: str = "mistral"


@dataclass(kw_only=True)
class Mistral3M4Config(mistral4.Mistral4Config):
    """A mistral3 folder whose text model is Mistral 4's (Mistral Small 4)."""
    model_type: str = "mistral3"
    text_model_type: str = "mistral4"


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, mistral4.hf_tensors if isinstance(cfg, Mistral3M4Config) else None)


def build(cfg, t):
    family = {Mistral3SmallConfig: mistral, Mistral3M4Config: mistral4}.get(type(cfg), ministral3)
    return family.build(cfg, t)


Config = Mistral3Config
