"""Qwen2.5-VL as released (`qwen2_5_vl`, Qwen2_5_VLForConditionalGeneration): Qwen2-VL's wrapper (petit/models/
qwen2_vl.py: text_config or transformers 4's flat file, the vision tower `visual` not run, the head tied by either
tie_word_embeddings) around a `qwen2_5_vl_text` model; its tower (windowed attention) is another, not run either."""
from dataclasses import dataclass

from petit.models.families.wrappers import qwen2_vl

from petit.models.families.dense import qwen2

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Qwen25VLConfig(qwen2_vl.Qwen2VLConfig):
    model_type: str = "qwen2_5_vl"


hf_tensors = qwen_vl.hf_tensors
build = qwen2.build
Config = Qwen25VLConfig
