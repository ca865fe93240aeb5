"""Qwen3: Qwen2's layout without the q/k/v biases (unless attention_bias) and with RMSNorm on each head of q and k
(`q_norm`, `k_norm`) before RoPE; head_dim is explicit."""
from dataclasses import dataclass

from petit.models.families.dense import qwen2
from petit.models.blocks.config import boolean


@dataclass(kw_only=True)
class Qwen3Config(qwen2.Qwen2Config):
    attention_bias: bool = False
    model_type: str = "qwen3"

    def _validate(self):
        super()._validate()
        boolean(self, "attention_bias")


def build(cfg: Qwen3Config, t):
    return qwen2.build(cfg, t, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, qk_norm="head")


Config = Qwen3Config
