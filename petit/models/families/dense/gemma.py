"""Gemma: embeddings x sqrt(hidden_size), RMSNorm with (1 + w) weights, GeGLU MLP (`hidden_act`), tied LM head."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, activation, check_decoder


@dataclass(kw_only=True)
class GemmaConfig(DecoderConfig):
    head_dim: int | None = 256
    hidden_act: str = "gelu_pytorch_tanh"
    hidden_activation: str | None = None
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    use_bidirectional_attention: bool | None = None     # transformers 5 writes null for Gemma 1 and 2
    model_type: str = "gemma"
    _ACT_KEY = "hidden_act"          # Gemma 1 computes with hidden_act; Gemma 2 and 3 with hidden_activation

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias"))
        self.act = activation(self, self._ACT_KEY, self.model_type)
        if self.use_bidirectional_attention:
            raise ValueError("config: use_bidirectional_attention=true is not supported (Petit runs causal decoders)")


def build(cfg: GemmaConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, norm_add=1.0, qkv_bias=cfg.attention_bias,
                      o_bias=cfg.attention_bias, rope_for=lambda i: rope, context_length=rope.context_length,
                      act=cfg.act, embed_scale=cfg.hidden_size ** 0.5)


Config = GemmaConfig
