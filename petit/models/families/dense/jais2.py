"""Jais 2 (Inception, `inceptionai/Jais-2-8B-Chat`): a Llama block with LayerNorms (weight and bias,
`layer_norm_eps`) in place of the RMSNorms, a plain MLP down(act(up x)) (Nemotron's; relu² by default), and biases
on q / k / v / o (`attention_bias`, default true) and on up / down (`mlp_bias`, default true)."""
from dataclasses import dataclass

from petit.models.families.dense.arcee import plain_mlp
from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, activation, check_decoder


@dataclass(kw_only=True)
class Jais2Config(DecoderConfig):
    hidden_act: str = "relu2"
    max_position_embeddings: int = 8192
    layer_norm_eps: float = 1e-5
    attention_bias: bool = True
    mlp_bias: bool = True
    model_type: str = "jais2"

    def _validate(self):
        check_decoder(self, ("layer_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "mlp_bias"))
        self.act = activation(self, "hidden_act", "jais2")


def build(cfg: Jais2Config, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.layer_norm_eps, kind="layer", norm_bias=True, qkv_bias=cfg.attention_bias,
                      o_bias=cfg.attention_bias, rope_for=lambda i: rope, act=cfg.act,
                      mlp_for=lambda i, p: plain_mlp(t, p, cfg, cfg.mlp_bias), context_length=rope.context_length)


Config = Jais2Config
