"""Llama 4 as released (`llama4`, Llama4ForConditionalGeneration: Llama-4-Scout / Maverick): a vision model and its
projector beside a `llama4_text` model (a Llama4ForCausalLM of its own), whose config is `text_config` and whose
weights are `language_model.model.*` and `language_model.lm_head.weight`. Petit runs the text model alone and says
once that the vision tower is not run (petit/models/blocks/wrapper.py). Unlike gemma3's and mistral3's wrappers, the
head is tied by text_config's `tie_word_embeddings`: the language model is a Llama4ForCausalLM built from text_config,
and the wrapper's own key (default false) ties nothing."""
from dataclasses import dataclass

from petit.models.families.moe import llama4_text

from petit.models.blocks import wrapper

TOWER = ("vision_model.", "multi_modal_projector.", "model.vision_model.", "model.multi_modal_projector.")
OWN_KEYS = ("boi_token_index", "eoi_token_index", "image_token_index", "boi_token_id", "eoi_token_id",
            "image_token_id")


@dataclass(kw_only=True)
class Llama4Config(llama4_text.Llama4TextConfig):
    model_type: str = "llama4"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper.flatten(d, "llama4", OWN_KEYS))


def hf_tensors(cfg: Llama4Config, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER, text_tensors=llama4_text.hf_tensors)


build = llama4_text.build
Config = Llama4Config
