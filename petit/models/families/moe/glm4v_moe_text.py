"""GLM-4.5V's language model (`glm4v_moe_text`; a `glm4v_moe` or `glm46v` config holds it as `text_config`): GLM-4.5's
block (petit/models/families/moe/glm4_moe.py: sigmoid-routed experts with a shared one, rotate-half RoPE on the first
partial_rotary_factor of each head) with M-RoPE in consecutive sections, which a text-only prompt runs as plain RoPE
(petit/models/blocks/qwen_vl.py). What differs from glm4_moe is transformers' Glm4vMoeTextConfig: its defaults (q / k /
v biases, 65536 positions, head_dim hidden_size / num_attention_heads unless given), no q / k norms (use_qk_norm is not
one of its keys: set true it is reported and not read), `num_local_experts` read as n_routed_experts (its
attribute_map), and mrope_section (default [8, 12, 12]) summing to half the rotary width."""
from dataclasses import dataclass

from petit.models.families.moe import glm4_moe

from petit.models.blocks import qwen_vl
from petit.models.blocks.config import aliased

MROPE_DEFAULT = [8, 12, 12]


@dataclass(kw_only=True)
class Glm4vMoeTextConfig(glm4_moe.Glm4MoeConfig):
    head_dim: int | None = None
    max_position_embeddings: int = 65536
    attention_bias: bool = True
    mrope_section: list | None = None       # no effect on text positions; kept for a converted file
    model_type: str = "glm4v_moe_text"

    @classmethod
    def from_dict(cls, d):
        d = qwen_vl.not_read(d, {"use_qk_norm": False}, f"{cls.model_type}'s attention has no q / k norms")
        if isinstance(d, dict):
            d = aliased(d, {"num_local_experts": "n_routed_experts"})
        return super().from_dict(qwen_vl.read_mrope(d, interleaved=False))

    def _validate(self):
        super()._validate()
        qwen_vl.check_mrope(self, MROPE_DEFAULT, split=True, rotary="rotary_dim")

    def to_dict(self) -> dict:
        d = super().to_dict()
        del d["use_qk_norm"]
        return d


def hf_tensors(cfg: Glm4vMoeTextConfig, ckpt) -> dict:
    """The experts 3-D as transformers 5 saves them when no conversion splits them (a glm46v folder's)."""
    return qwen_vl.fused_experts(ckpt, range(cfg.first_k_dense_replace, cfg.num_hidden_layers), cfg.n_routed_experts,
                                 cfg.moe_intermediate_size, cfg.hidden_size, transposable=False)


build = glm4_moe.build
Config = Glm4vMoeTextConfig
