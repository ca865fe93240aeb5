"""GOT-OCR 2.0 as released (`got_ocr2`, GotOcr2ForConditionalGeneration: GOT-OCR-2.0-hf): a SAM vision encoder and
its convolutional projector beside a `qwen2` text model (LLaVA's layout: its config is `text_config`, its weights
`language_model.model.*` or `model.language_model.*`). Petit runs the text model alone and says once that the vision
tower is not run (petit/models/blocks/wrapper.py). The head is tied by the wrapper's own `tie_word_embeddings`
(GotOcr2Config's default true), which transformers reads instead of text_config's, unless the checkpoint stores one.

transformers builds the text model with AutoModel from text_config, so another model_type would run another family:
only qwen2 (the released checkpoints', and text_config's default) is run, another is refused by name."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2

from petit.models.blocks import wrapper

TOWER = ("model.vision_tower.", "model.multi_modal_projector.", "vision_tower.", "multi_modal_projector.")
OWN_KEYS = ("image_token_index", "image_token_id", "image_seq_length")


@dataclass(kw_only=True)
class GotOcr2Config(qwen2.Qwen2Config):
    model_type: str = "got_ocr2"

    @classmethod
    def from_dict(cls, d):
        text = d.get("text_config") if isinstance(d, dict) else None
        if isinstance(text, dict) and text.get("model_type", "qwen2") != "qwen2":
            raise ValueError(f"config: got_ocr2's text_config has model_type {text['model_type']!r}; the got_ocr2 "
                             f"family runs a qwen2 text model (GOT-OCR 2.0's)")
        return super().from_dict(wrapper.flatten(d, "got_ocr2", OWN_KEYS, tie=True))


def hf_tensors(cfg: GotOcr2Config, ckpt) -> dict:
    return wrapper.hf_tensors(cfg, ckpt, TOWER)


build = qwen2.build
Config = GotOcr2Config
