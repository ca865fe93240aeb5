"""Mistral 3 as released (`mistral3`, Mistral3ForConditionalGeneration: Ministral-3, Mistral Small 3.1 / 3.2,
Devstral, Magistral): a Pixtral vision tower and its patch-merging projector beside a text model, `ministral3`
(Ministral 3) or `mistral` (the Small models), whose config is `text_config` and whose weights are
`language_model.model.*` (as save_pretrained writes them) or `model.language_model.*`. Petit runs the text model alone
and says once that the vision tower is not run (petit/models/wrapper.py). The head is tied by the wrapper's own
`tie_word_embeddings` (default true), which transformers reads instead of text_config's, unless the checkpoint
stores one (transformers' from_pretrained keeps a stored head that differs from the embeddings). A converted file
keeps the text model's type as `text_model_type`."""
from dataclasses import dataclass

from petit.models import ministral3, mistral, wrapper

TOWER = ("model.vision_tower.", "model.multi_modal_projector.", "vision_tower.", "multi_modal_projector.")
OWN_KEYS = ("image_token_index", "image_token_id", "projector_hidden_act", "vision_feature_layer",
            "multimodal_projector_bias", "spatial_merge_size")
TEXT_TYPES = ("ministral3", "mistral")


def _flat(d):
    text = d.get("text_config") if isinstance(d, dict) else None
    if isinstance(text, dict) and text.get("model_type") == "mistral4":
        raise ValueError("config: mistral3's text_config is a mistral4 model (Mistral 4 / Mistral Large 3: "
                         "DeepSeek-V3's latent attention and routed experts under Mistral's names), which Petit does "
                         "not run yet")
    flat = wrapper.flatten(d, "mistral3", OWN_KEYS, tie=True, text_types=TEXT_TYPES)
    if isinstance(flat, dict) and flat.get("text_model_type", "ministral3") not in TEXT_TYPES:
        raise ValueError(f"config: text_model_type must be one of {', '.join(TEXT_TYPES)}, got "
                         f"{flat['text_model_type']!r}")
    return flat


@dataclass(kw_only=True)
class Mistral3Config(ministral3.Ministral3Config):
    """A mistral3 folder whose text model is Ministral 3's (`text_model_type` "mistral" builds Mistral3SmallConfig)."""
    model_type: str = "mistral3"
    text_model_type: str = "ministral3"

    @classmethod
    def from_dict(cls, d):
        flat = _flat(d)
        if isinstance(flat, dict) and flat.get("text_model_type") == "mistral":
            return Mistral3SmallConfig.from_dict(flat)
        return super().from_dict(flat)


@dataclass(kw_only=True)
class Mistral3SmallConfig(mistral.MistralConfig):
    """A mistral3 folder whose text model is Mistral's (Mistral Small 3.1 / 3.2)."""
    model_type: str = "mistral3"
    text_model_type: str = "mistral"


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


def build(cfg, t):
    return (mistral if isinstance(cfg, Mistral3SmallConfig) else ministral3).build(cfg, t)


Config = Mistral3Config
