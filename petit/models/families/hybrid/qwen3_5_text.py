"""Qwen3.5's text model (`qwen3_5_text`; a multimodal `qwen3_5` config holds it as `text_config`): Qwen3-Next's
block (Gated DeltaNet and gated full attention, zero-centred norms) with a dense SwiGLU MLP, its linear attention's
projections stored apart (`in_proj_qkv` rows q | k | v, `in_proj_z`, `in_proj_b`, `in_proj_a`: one `linear_attn.in_proj`
when read), and its RoPE in transformers 5's `rope_parameters`. Their `mrope_section` splits the frequencies over the
text / height / width positions of images; for text all three are the token's position, so it is plain RoPE
(checked on the fixture: another section changes nothing) and the key is read and ignored."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.hybrid import qwen3_next


@dataclass(kw_only=True)
class Qwen35TextConfig(qwen3_next.Qwen3NextConfig):
    num_key_value_heads: int | None = 4
    max_position_embeddings: int = 32768
    num_experts: int = 0                 # the dense models: no experts (the MoE ones are another family)
    model_type: str = "qwen3_5_text"
    _ROPE_SCALING_EXTRA = frozenset({"mrope_section", "mrope_interleaved"})

    def _sparse(self) -> list:
        return [False] * self.num_hidden_layers


def in_proj(cfg, ckpt, a: str):
    names = tuple(a + f"in_proj_{x}.weight" for x in ("qkv", "z", "b", "a"))
    if names[0] not in ckpt:
        return None
    return lambda: np.concatenate([ckpt.f32(n) for n in names]), names


def hf_tensors(cfg: Qwen35TextConfig, ckpt) -> dict:
    return qwen3_next.hf_tensors(cfg, ckpt, in_proj=in_proj)


build = qwen3_next.build
Config = Qwen35TextConfig
