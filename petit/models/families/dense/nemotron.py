"""Nemotron (NVIDIA Minitron / Nemotron-3/4): LayerNorm1P ((x - mean) / std * (1 + w) + b) for every norm, partial
rotary (`partial_rotary_factor` of each head, rotate-half), a plain MLP down(relu²(up(x))), optional biases
(`attention_bias` on q/k/v/o, `mlp_bias`)."""
from dataclasses import dataclass

from petit.models.families.dense.arcee import plain_mlp
from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, activation, check_decoder


@dataclass(kw_only=True)
class NemotronConfig(DecoderConfig):
    hidden_act: str = "relu2"
    max_position_embeddings: int = 4096
    norm_eps: float = 1e-5
    partial_rotary_factor: float = 0.5
    attention_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "nemotron"

    def _validate(self):
        check_decoder(self, ("norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "attention_bias", "mlp_bias"))
        self.act = activation(self, "hidden_act", "nemotron")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def build(cfg: NemotronConfig, t):
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    dec = llama_like(t, cfg, eps=cfg.norm_eps, kind="layer", norm_add=1.0, norm_bias=True, qkv_bias=cfg.attention_bias,
                     o_bias=cfg.attention_bias, rope_for=lambda i: rope, act=cfg.act,
                     mlp_for=lambda i, p: plain_mlp(t, p, cfg, cfg.mlp_bias), context_length=rope.context_length)
    return dec


Config = NemotronConfig
