"""Qwen2.5-VL's language model (`qwen2_5_vl_text`): Qwen2-VL's (transformers' Qwen2_5_VLTextConfig and text model are
Qwen2-VL's under another name: the same defaults, M-RoPE in consecutive sections, default [16, 24, 24])."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2, qwen2_vl_text


@dataclass(kw_only=True)
class Qwen25VLTextConfig(qwen2_vl_text.Qwen2VLTextConfig):
    model_type: str = "qwen2_5_vl_text"


build = qwen2.build
Config = Qwen25VLTextConfig
