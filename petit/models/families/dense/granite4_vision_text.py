"""Granite 4 Vision's language model (transformers' `granite4_vision_text`, Granite4VisionTextModel): Granite's block
and config as they are (GraniteConfig's defaults). Its forward adds DeepStack features to the image tokens' hidden
states before the layers `deepstack_layer_map` names; a text-only prompt has no image token and no features, so it
is Granite's forward."""
from dataclasses import dataclass

from petit.models.families.dense import granite


@dataclass(kw_only=True)
class Granite4VisionTextConfig(granite.GraniteConfig):
    model_type: str = "granite4_vision_text"


build = granite.build
Config = Granite4VisionTextConfig
