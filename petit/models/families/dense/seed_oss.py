"""Seed-OSS (ByteDance): Llama with its own switch for the o_proj bias (`attention_out_bias`) beside the q/k/v
biases (`attention_bias`, on by default) and the MLP's (`mlp_bias`)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class SeedOssConfig(DecoderConfig):
    max_position_embeddings: int = 524288
    rms_norm_eps: float = 1e-6
    attention_bias: bool = True
    attention_out_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "seed_oss"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "seed_oss", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"),
                      ("tie_word_embeddings", "attention_bias", "attention_out_bias", "mlp_bias"))


def build(cfg: SeedOssConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_out_bias,
                      mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope, context_length=rope.context_length)


Config = SeedOssConfig
