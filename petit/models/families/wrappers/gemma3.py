"""Gemma 3 as released (`gemma3`: Gemma-3-4B / 12B / 27B, Gemma3ForConditionalGeneration): a SigLIP vision tower and
its projector beside a `gemma3_text` model, whose config is `text_config` and whose weights are
`language_model.model.*` (as save_pretrained writes them) or `model.language_model.*`; the head is tied to
the embeddings unless the wrapper's own `tie_word_embeddings` says otherwise. Petit runs the text model alone and says
once that the vision tower is not run (petit/models/blocks/wrapper.py).

One difference from `gemma3_text` run by itself: Gemma3ForConditionalGeneration computes its logits as lm_head(h)
without the final soft-capping that Gemma3ForCausalLM applies when `final_logit_softcapping` is set, so the text
config's value is read and not applied (the released configs set it to null)."""
from dataclasses import dataclass

from petit.models.families.dense import gemma3_text

from petit.models.blocks import wrapper

TOWER = ("model.vision_tower.", "model.multi_modal_projector.", "vision_tower.", "multi_modal_projector.")
OWN_KEYS = ("mm_tokens_per_image", "boi_token_index", "eoi_token_index", "image_token_index", "boi_token_id",
            "eoi_token_id", "image_token_id")


@dataclass(kw_only=True)
class Gemma3Config(gemma3_text.Gemma3TextConfig):
    model_type: str = "gemma3"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper.flatten(d, "gemma3", OWN_KEYS, tie=True))

    def _validate(self):
        super()._validate()
        self.final_logit_softcapping = None     # the wrapper's forward does not cap (see the module's docstring)


def hf_tensors(cfg: Gemma3Config, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = gemma3_text.build
Config = Gemma3Config
