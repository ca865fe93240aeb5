"""Qwen2-VL's language model (`qwen2_vl_text`; a `qwen2_vl` config holds it as `text_config`): Qwen2's block (q / k /
v biases, none on o; optional sliding windows from max_window_layers on) with M-RoPE, which a text-only prompt runs
as plain RoPE (petit/models/blocks/qwen_vl.py). What differs from qwen2 is transformers' Qwen2VLTextConfig: its defaults
(RMSNorm eps 1e-5, RoPE base 1e6, sliding_window 4096 when use_sliding_window, max_window_layers 80), no head_dim key
(the attention's heads are hidden_size / num_attention_heads whatever a head_dim says), and mrope_section (default
[16, 24, 24]) summing to head_dim / 2."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2

from petit.models.blocks import qwen_vl
from petit.models.blocks.config import derived_head_dim

MROPE_DEFAULT = [16, 24, 24]


@dataclass(kw_only=True)
class Qwen2VLTextConfig(qwen2.Qwen2Config):
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1e6
    sliding_window: int | None = 4096
    max_window_layers: int = 80
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "qwen2_vl_text"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=False))

    def _validate(self):
        given = self.head_dim
        super()._validate()
        derived_head_dim(self, given, f"{self.model_type}'s attention")
        qwen_vl.check_mrope(self, MROPE_DEFAULT, split=True)


build = qwen2.build
Config = Qwen2VLTextConfig
