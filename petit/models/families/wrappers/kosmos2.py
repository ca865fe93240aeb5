"""Kosmos-2 as released (`kosmos-2`, Kosmos2ForConditionalGeneration: microsoft/kosmos-2-patch14-224): a CLIP-style
vision model (`vision_model.*`) and its latent-query projection (`image_to_text_projection.*`) beside a
`kosmos_2_text_model`, whose config is `text_config` and whose weights are `text_model.model.*` (its head
`text_model.lm_head.weight`, tied by the wrapper's `tie_word_embeddings` alone, default true). Its forward needs an
image, but its generate runs the text model alone when given none (text_model.generate without image_embeds): that is
the text-only path Petit runs (checked against transformers: the wrapper's generate and its text model's logits equal
Kosmos2TextForCausalLM's to the bit on tests/fixtures/hf5_vlnew/kosmos_2_text_model's weights). The vision tower is
not run (said once: petit/models/blocks/wrapper.py)."""
from dataclasses import dataclass

from petit.models.families.classic import kosmos_2_text_model as text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("vision_model.", "image_to_text_projection.")
OWN_KEYS = ("latent_query_num",)
PREFIXES, HEADS = ("text_model.model.",), ("text_model.lm_head.weight",)


@dataclass
class Kosmos2Config(text.Kosmos2TextConfig):
    model_type: str = "kosmos-2"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "kosmos-2", OWN_KEYS, top=True, text=None,
                                                      text_types=("kosmos_2_text_model",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, text.hf_tensors, prefixes=PREFIXES, heads=HEADS)


build = text.build
Config = Kosmos2Config
