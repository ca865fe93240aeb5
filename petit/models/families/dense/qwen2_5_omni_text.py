"""Qwen2.5-Omni's language model (`qwen2_5_omni_text`; the thinker's `text_config`): Qwen2's block (q / k / v biases,
sliding windows from max_window_layers on) with Qwen2-VL's M-RoPE (consecutive sections, default [16, 24, 24],
summing to head_dim / 2), plain RoPE for a text-only prompt (petit/models/blocks/qwen_vl.py: the thinker's
get_rope_index gives every axis the attention mask's cumulative position, the token's own). What differs from qwen2 is
transformers' Qwen2_5OmniTextConfig: its defaults (4 kv heads, RoPE base 1e6, sliding_window 32768 when
use_sliding_window, a tied head) and mrope_section read beside the RoPE."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2, qwen2_vl_text

from petit.models.blocks import qwen_vl


@dataclass(kw_only=True)
class Qwen25OmniTextConfig(qwen2.Qwen2Config):
    num_key_value_heads: int | None = 4
    rope_theta: float = 1e6
    sliding_window: int | None = 32768
    tie_word_embeddings: bool = True
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "qwen2_5_omni_text"

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=False))

    def _validate(self):
        super()._validate()
        qwen_vl.check_mrope(self, qwen2_vl_text.MROPE_DEFAULT, split=True)


build = qwen2.build
Config = Qwen25OmniTextConfig
