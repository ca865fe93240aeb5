"""PaddleOCR-VL as released (`paddleocr_vl`, PaddleOCRVLForConditionalGeneration): a SigLIP-style vision model
(`visual.*`) and its projector (`mlp_AR.*`) beside a `paddleocr_vl_text` model stored at the top (`model.*`,
`lm_head.weight`), as save_pretrained writes it (transformers' conversion_mapping moves them under
model.language_model / model.visual / model.projector when read, and back when written). Petit runs the text model
alone and says once that the vision tower is not run (petit/models/blocks/wrapper.py).

The released config.json is flat: the text model's keys at the top beside `vision_config` (PaddleOCRVLConfig takes
them as text_config); transformers 5 writes them under `text_config`. Both are read. The head is tied by the
wrapper's `tie_word_embeddings` (default true), or by a text_config that ties (its default: PaddleOCRVLConfig's
__post_init__ forwards it), unless the checkpoint stores a head."""
from dataclasses import dataclass

from petit.models.families.dense import paddleocr_vl_text

from petit.models.blocks import wrapper, wrapper_flat

TOWER = ("visual.", "mlp_AR.", "model.visual.", "model.projector.")
OWN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")


@dataclass(kw_only=True)
class PaddleOCRVLConfig(paddleocr_vl_text.PaddleOCRTextConfig):
    model_type: str = "paddleocr_vl"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(wrapper_flat.flatten(d, "paddleocr_vl", OWN_KEYS, top=True, text=True,
                                                      text_types=("paddleocr_vl_text",)))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = paddleocr_vl_text.build
Config = PaddleOCRVLConfig
