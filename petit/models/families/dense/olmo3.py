"""OLMo 3: OLMo 2 (post-norms only, RMSNorm of the whole q and k rows) with sliding-window layers (`layer_types`, by
default three sliding then one full); the sliding layers' RoPE ignores `rope_scaling`, the full layers' applies it."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.families.dense.olmo2 import Olmo2Config


@dataclass(kw_only=True)
class Olmo3Config(Olmo2Config):
    sliding_window: int | None = 4096
    layer_types: list | None = None
    model_type: str = "olmo3"
    _ROPE_SLIDING_UNSCALED = True

    def _validate(self):
        super()._validate()
        self.types = layer_types(self, lambda i: "full_attention" if (i + 1) % 4 == 0 else "sliding_attention")


def build(cfg: Olmo3Config, t):
    full, sliding = default_rope(cfg), default_rope(cfg, scaling=None)
    rope_for = lambda i: sliding if cfg.types[i] == "sliding_attention" else full     # noqa: E731
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=rope_for, window_for=window_of(cfg, cfg.types), context_length=full.context_length,
                      qk_norm="full", post_only=True)


Config = Olmo3Config
