"""GLM-4.1V's language model (`glm4v_text`; a `glm4v`, `glm46v` or `glmga` config holds it as `text_config`): GLM-4's
block (norms after attention and MLP, fused gate_up_proj, q / k / v biases, rotary on interleaved pairs of the first
partial_rotary_factor of each head) with M-RoPE in consecutive sections (repeated onto the pairs), which a text-only
prompt runs as plain RoPE (petit/models/blocks/qwen_vl.py). What differs from glm4 is transformers' Glm4vTextConfig: its
defaults (2 kv heads, RMSNorm eps 1e-5, 32768 positions, partial_rotary_factor 1: the released files state 0.5), heads
of hidden_size / num_attention_heads whatever a head_dim says (another is refused), q / k / v biases always (no
attention_bias key: one set false is reported and not read), and mrope_section (default [8, 12, 12]) summing to half
the rotary width."""
from dataclasses import dataclass

from petit.models.families.dense import glm4

from petit.models.blocks import qwen_vl
from petit.models.blocks.config import derived_head_dim

MROPE_DEFAULT = [8, 12, 12]


@dataclass(kw_only=True)
class Glm4vTextConfig(glm4.Glm4Config):
    num_key_value_heads: int | None = 2
    head_dim: int | None = None
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-5
    partial_rotary_factor: float = 1.0
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "glm4v_text"

    @classmethod
    def from_dict(cls, d):
        d = qwen_vl.not_read(d, {"attention_bias": True}, f"{cls.model_type}'s q / k / v always have biases")
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=False))

    def _validate(self):
        given = self.head_dim
        super()._validate()
        derived_head_dim(self, given, f"{self.model_type}'s attention")
        self.attention_bias = True
        qwen_vl.check_mrope(self, MROPE_DEFAULT, split=True, rotary="rotary_dim")

    def to_dict(self) -> dict:
        d = super().to_dict()
        del d["attention_bias"]
        return d


hf_tensors = glm4.hf_tensors
build = glm4.build
Config = Glm4vTextConfig
