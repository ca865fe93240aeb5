"""Qwen3-VL's language model (`qwen3_vl_text`; a `qwen3_vl` config holds it as `text_config`): Qwen3's block (q / k
RMSNorm per head, biases only with attention_bias) with interleaved M-RoPE, which a text-only prompt runs as plain
RoPE (petit/models/blocks/qwen_vl.py). What differs from qwen3 is transformers' Qwen3VLTextConfig: its defaults (RoPE
base 5e5, head_dim 128 and 32 kv heads stated, 128000 positions), mrope_section (default [24, 20, 20]) and
mrope_interleaved read beside the RoPE, and no sliding windows (its attention drops Qwen3's: use_sliding_window,
sliding_window, max_window_layers and layer_types are reported and not read)."""
from dataclasses import dataclass

from petit.models.families.dense import qwen3

from petit.models.blocks import qwen_vl

MROPE_DEFAULT = [24, 20, 20]
NO_WINDOW = {"use_sliding_window": False, "sliding_window": None, "max_window_layers": None, "layer_types": None}


@dataclass(kw_only=True)
class Qwen3VLTextConfig(qwen3.Qwen3Config):
    num_key_value_heads: int | None = 32
    head_dim: int | None = 128
    max_position_embeddings: int = 128000
    rope_theta: float = 5e5
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "qwen3_vl_text"

    @classmethod
    def from_dict(cls, d):
        d = qwen_vl.not_read(d, NO_WINDOW, f"{cls.model_type}'s attention has no sliding window")
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=True))

    def _validate(self):
        super()._validate()
        qwen_vl.check_mrope(self, MROPE_DEFAULT, split=False)

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if k not in NO_WINDOW}


build = qwen3.build
Config = Qwen3VLTextConfig
