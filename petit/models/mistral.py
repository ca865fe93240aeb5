"""Mistral: Llama with sliding-window attention in every layer (`sliding_window`, null for none)."""
from dataclasses import dataclass, field

from petit.models.common import default_rope, llama_like
from petit.models.config import ConfigMixin, DECODER_REQUIRED, check_decoder, refuse_act


@dataclass
class MistralConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 4096 * 32
    sliding_window: int | None = 4096
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    model_type: str = "mistral"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = DECODER_REQUIRED

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "mistral", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)


def build(cfg: MistralConfig, t):
    rope = default_rope(cfg)
    w = cfg.sliding_window or 0
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=lambda i: w,
                      context_length=rope.context_length)


Config = MistralConfig
