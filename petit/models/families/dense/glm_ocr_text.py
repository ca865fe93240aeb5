"""GLM-OCR's language model (transformers' `glm_ocr_text`, GlmOcrTextModel): GLM-4's block (post-attention and
post-MLP RMSNorms, fused `gate_up_proj`, RoPE on interleaved pairs of the first `partial_rotary_factor` of each head)
under GLM-4.1V's text config: no attention biases (GlmOcrTextAttention builds q / k / v / o without them, whatever
`attention_bias` says), head_dim hidden / heads, `partial_rotary_factor` from rope_parameters (default 1: the whole
head), RMSNorm eps 1e-5, 8 kv heads.

GlmOcrTextRotaryEmbedding gives each frequency its position from the text, height or width axis (`mrope_section`,
default [8, 12, 12]), then repeats each twice (interleaved pairs). A text-only prompt gives every axis the same
position (GlmOcrTextModel.forward: one arange expanded to the three; the wrapper's compute_3d_position_ids leaves it
to the text model when no image grid is given), so the rotation is GLM's plain interleaved RoPE of that position:
`mrope_section` changes nothing Petit computes, and is read and left."""
from dataclasses import dataclass

from petit.models.families.dense import glm, glm4

NO_BIAS = "attention_bias (glm_ocr_text's attention has no biases: not read)"


@dataclass(kw_only=True)
class GlmOcrTextConfig(glm4.Glm4Config):
    head_dim: int | None = None
    num_key_value_heads: int | None = 8
    rms_norm_eps: float = 1e-5
    partial_rotary_factor: float = 1.0
    attention_bias: bool = False
    model_type: str = "glm_ocr_text"
    _ROPE_SCALING_EXTRA = frozenset({"mrope_section"})

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and d.get("attention_bias"):         # transformers builds no bias: reported, not read
            d = {(NO_BIAS if k == "attention_bias" else k): v for k, v in d.items()}
        return super().from_dict(d)


hf_tensors = glm.hf_tensors
build = glm4.build
Config = GlmOcrTextConfig
