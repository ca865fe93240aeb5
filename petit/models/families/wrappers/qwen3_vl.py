"""Qwen3-VL as released (`qwen3_vl`, Qwen3VLForConditionalGeneration): a vision tower (`visual`, with DeepStack
mergers) beside a `qwen3_vl_text` model, its config under `text_config`, its weights `model.language_model.*` and
`lm_head.weight` (the releases and transformers 5 alike). Petit runs the text model alone and says once that the
vision tower is not run (DeepStack adds the tower's features to the first layers' image positions: nothing for
text); the head is tied by the wrapper's tie_word_embeddings alone (Qwen3VLConfig's, default false: transformers
ties by it and, unlike Qwen2-VL's, does not forward text_config's)."""
from dataclasses import dataclass

from petit.models.families.dense import qwen3, qwen3_vl_text

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Qwen3VLConfig(qwen3_vl_text.Qwen3VLTextConfig):
    model_type: str = "qwen3_vl"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.text_config(d, cls.model_type, cls.model_type + "_text"))


hf_tensors = qwen_vl.hf_tensors
build = qwen3.build
Config = Qwen3VLConfig
