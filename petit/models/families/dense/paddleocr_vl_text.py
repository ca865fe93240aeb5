"""PaddleOCR-VL's language model (transformers' `paddleocr_vl_text`, PaddleOCRTextModel): ERNIE 4.5's dense block
(one `use_bias` switch for q / k / v / o and the MLP, tied head by default) with head_dim 128 by default and
PaddleOCR's M-RoPE on halves (rotate_half), not ERNIE 4.5's interleaved pairs.

PaddleOCRRotaryEmbedding gives each frequency its position from the text, height or width axis (`mrope_section`,
default [16, 24, 24]). A text-only prompt gives every axis the same position (PaddleOCRTextModel.forward: one arange
expanded to the three; the wrapper's compute_3d_position_ids leaves it to the text model when no image grid is
given), so the rotation is the plain RoPE of that position: `mrope_section` changes nothing Petit computes, and is
read and left."""
from dataclasses import dataclass

from petit.models.families.dense import ernie4_5
from petit.models.blocks.common import default_rope, llama_like


@dataclass(kw_only=True)
class PaddleOCRTextConfig(ernie4_5.Ernie45Config):
    head_dim: int | None = 128
    num_key_value_heads: int | None = 2
    model_type: str = "paddleocr_vl_text"
    _ROPE_SCALING_EXTRA = frozenset({"mrope_section"})


def build(cfg: PaddleOCRTextConfig, t):
    rope = default_rope(cfg, interleaved=False)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.use_bias, o_bias=cfg.use_bias, mlp_bias=cfg.use_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length)


Config = PaddleOCRTextConfig
