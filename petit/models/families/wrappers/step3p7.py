"""Step 3.7 as released (`step3p7`, Step3p7ForConditionalGeneration: Step-3.7-Flash): a vision model (a SigLIP-like
encoder, two downsampling convolutions) and its linear projector beside a `step3p5` text model
(petit/models/families/moe/step3p5.py), whose config is `text_config`. save_pretrained writes the release's layout: the
text model at the top (`model.embed_tokens`, `model.layers.*`, `model.norm`, `lm_head`), the tower as `vision_model.*`
and `vit_large_projector.*` (transformers' module names, `model.language_model.*` / `model.vision_model.*` /
`model.multi_modal_projector.*`, are read too). Petit runs the text model alone and says once that the vision tower
is not run (petit/models/blocks/wrapper.py); transformers forces text_config's model_type to step3p5 whatever it says,
and so does Petit. A converted file is the text model's, its config flat with model_type step3p7."""
from dataclasses import dataclass

from petit.models.families.moe import step3p5

from petit.models.blocks import wrapper

TOWER = ("vision_model.", "vit_large_projector.", "model.vision_model.", "model.multi_modal_projector.")
OWN_KEYS = ("image_token_id", "projector_bias")


@dataclass(kw_only=True)
class Step3p7Config(step3p5.Step3p5Config):
    model_type: str = "step3p7"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and isinstance(d.get("text_config"), dict):
            d = dict(d, text_config={k: v for k, v in d["text_config"].items() if k != "model_type"})
        return super().from_dict(wrapper.flatten(d, "step3p7", OWN_KEYS))


def hf_tensors(cfg: Step3p7Config, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, step3p5.hf_tensors)


build = step3p5.build
Config = Step3p7Config
