"""PaddleOCR-VL as released (`paddleocr_vl`, PaddleOCRVLForConditionalGeneration): a SigLIP-style vision model
(`visual.*`) and its projector (`mlp_AR.*`) beside a `paddleocr_vl_text` model stored at the top (`model.*`,
`lm_head.weight`), as save_pretrained writes it (transformers' conversion_mapping moves them under
model.language_model / model.visual / model.projector when read, and back when written). Petit runs the text model
alone and says once that the vision tower is not run (petit/models/wrapper.py).

The released config.json is flat: the text model's keys at the top beside `vision_config` (PaddleOCRVLConfig takes
them as text_config); transformers 5 writes them under `text_config`. Both are read. The head is tied by the
wrapper's `tie_word_embeddings` (default true), which a text_config that ties (its default) turns on too
(PaddleOCRVLConfig's __post_init__), unless the checkpoint stores a head."""
from dataclasses import dataclass

from petit.models import paddleocr_vl_text, wrapper

TOWER = ("visual.", "mlp_AR.", "model.visual.", "model.projector.")
OWN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")


def nested(d: dict, model_type: str, own_keys, towers=("vision_config",)) -> dict:
    """A released flat config (the text model's keys beside the tower's config) as transformers reads it: the text
    keys under `text_config`; any other dict as it is."""
    if not isinstance(d, dict) or "text_config" in d or not any(d.get(k) for k in towers):
        return d
    keep = set(own_keys) | set(towers) | {"model_type", "tie_word_embeddings", "architectures",
                                          "transformers_version"}
    return {**{k: v for k, v in d.items() if k in keep},
            "text_config": {k: v for k, v in d.items() if k not in keep or k == "tie_word_embeddings"}}


def flatten(d, model_type: str, own_keys, text_tie: bool = True):
    """wrapper.flatten of a nested or flat wrapper config whose head the wrapper ties when either it or its
    text_config does (text_config's own default: `text_tie`)."""
    d = nested(d, model_type, own_keys)
    text = d.get("text_config") if isinstance(d, dict) else None
    flat = wrapper.flatten(d, model_type, own_keys, tie=True)
    if isinstance(text, dict):
        flat["tie_word_embeddings"] = bool(flat["tie_word_embeddings"] or text.get("tie_word_embeddings", text_tie))
    return flat


@dataclass(kw_only=True)
class PaddleOCRVLConfig(paddleocr_vl_text.PaddleOCRTextConfig):
    model_type: str = "paddleocr_vl"

    @classmethod
    def from_dict(cls, d):
        text = d.get("text_config") if isinstance(d, dict) else None
        if isinstance(text, dict) and text.get("model_type", "paddleocr_vl_text") != "paddleocr_vl_text":
            raise ValueError(f"config: paddleocr_vl's text_config has model_type {text['model_type']!r}; the "
                             f"paddleocr_vl family runs a paddleocr_vl_text model (PaddleOCRVLConfig's only one)")
        return super().from_dict(flatten(d, "paddleocr_vl", OWN_KEYS))


def hf_tensors(cfg, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = paddleocr_vl_text.build
Config = PaddleOCRVLConfig
