"""Muse Glimmer as released (`muse_glimmer`, MuseGlimmerForConditionalGeneration: Muse-Glimmer-30B): a vision tower
(Kimi-K2.5's, patch merging), an adapter and a projection beside a `muse_glimmer_text` model
(petit/models/families/dense/muse_glimmer_text.py), whose config is `text_config` and whose weights are
`model.language_model.*` (or `language_model.model.*`), the head `lm_head.weight`. Petit runs the text model alone and
says once that the vision tower is not run (petit/models/blocks/wrapper.py); transformers builds the text model from
text_config whatever its model_type says (MuseGlimmerTextConfig), and so does Petit. The logits' multiplier and
soft-capping, which the wrapper's forward applies, are the text model's own settings (output_multiplier,
final_logit_softcapping)."""
from dataclasses import dataclass

from petit.models.families.dense import muse_glimmer_text

from petit.models.blocks import wrapper

TOWER = ("model.vision_tower.", "model.vision_adapter.", "model.vision_projection.", "vision_tower.",
         "vision_adapter.", "vision_projection.")
OWN_KEYS = ("image_token_id", "video_token_id", "out_hidden_size", "projector_hidden_size", "projector_hidden_act")


@dataclass(kw_only=True)
class MuseGlimmerConfig(muse_glimmer_text.MuseGlimmerTextConfig):
    model_type: str = "muse_glimmer"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper.flatten(d, "muse_glimmer", OWN_KEYS))


def hf_tensors(cfg: MuseGlimmerConfig, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = muse_glimmer_text.build
Config = MuseGlimmerConfig
