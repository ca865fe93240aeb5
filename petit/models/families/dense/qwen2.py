"""Qwen2 / Qwen2.5: Llama with biases on q, k and v (none on o), optional sliding windows on the upper layers."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class Qwen2Config(DecoderConfig):
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 32768
    use_sliding_window: bool = False
    sliding_window: int | None = None
    max_window_layers: int = 28
    layer_types: list | None = None
    model_type: str = "qwen2"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.__name__[:-6].lower(), "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "use_sliding_window"))

    def types(self) -> list[str]:
        sliding = self.use_sliding_window and self.sliding_window
        return layer_types(self, lambda i: "sliding_attention" if sliding and i >= self.max_window_layers
                           else "full_attention")


def build(cfg: Qwen2Config, t, **kw):
    rope = default_rope(cfg)
    types = cfg.types()
    kw.setdefault("qkv_bias", True)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=window_of(cfg, types),
                      context_length=rope.context_length, **kw)


Config = Qwen2Config
