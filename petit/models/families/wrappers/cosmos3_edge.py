"""Cosmos3 Edge as released (`cosmos3_edge`, Cosmos3EdgeForConditionalGeneration: nvidia/Cosmos3-Edge): a SigLIP 2
vision model (`model.visual.*`) and its projector (`model.projector.*`) beside a `cosmos3_edge_text` model, whose
config is `text_config` and whose weights the release keeps at the top (petit/models/families/dense/cosmos3_edge_text.py
reads both spellings). Petit runs the text model alone and says once that the vision tower is not run
(petit/models/blocks/wrapper.py). The head is tied by the wrapper's `tie_word_embeddings` alone (default false), unless
the checkpoint stores one."""
from dataclasses import dataclass

from petit.models.families.dense import cosmos3_edge_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("model.visual.", "model.projector.")
OWN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
            "projector_hidden_size")


@dataclass(kw_only=True)
class Cosmos3EdgeConfig(cosmos3_edge_text.Cosmos3EdgeTextConfig):
    model_type: str = "cosmos3_edge"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "cosmos3_edge", OWN_KEYS, top=False, text=None,
                                                      text_types=("cosmos3_edge_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    tower = {n: e for n, e in wrapper.hf_tensors(cfg, ckpt, TOWER, prefixes=()).items() if n.startswith(TOWER)}
    return cosmos3_edge_text.hf_tensors(cfg, ckpt) | tower


build = cosmos3_edge_text.build
Config = Cosmos3EdgeConfig
