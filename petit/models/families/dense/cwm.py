"""CWM (Meta's Code World Model, `facebook/cwm`): Llama with a per-layer sliding / full choice (`layer_types`; by
default layer i is full when i % 4 == 0 and slides over `sliding_window` positions otherwise), no attention biases,
and llama3 RoPE scaling by default (theta 1e6, factor 16 over 8192 positions)."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.families.dense.llama import LlamaConfig


def _llama3():
    return {"rope_type": "llama3", "factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192}


@dataclass(kw_only=True)
class CwmConfig(LlamaConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1_000_000.0
    rope_scaling: dict | None = field(default_factory=_llama3)
    sliding_window: int | None = 8192
    layer_types: list | None = None
    model_type: str = "cwm"

    def _validate(self):
        super()._validate()
        if self.attention_bias:
            raise ValueError("config: attention_bias is not supported by the cwm family (its attention has no biases)")
        self.types = layer_types(self, lambda i: "full_attention" if i % 4 == 0 else "sliding_attention")
        window_of(self, self.types)


def build(cfg: CwmConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope,
                      window_for=window_of(cfg, cfg.types), context_length=rope.context_length)


Config = CwmConfig
