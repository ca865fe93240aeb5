"""Arcee (AFM): Llama with a plain MLP, down(relu²(up(x))), no gate (`hidden_act` relu2)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, activation, check_decoder


@dataclass(kw_only=True)
class ArceeConfig(DecoderConfig):
    hidden_act: str = "relu2"
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False
    mlp_bias: bool = False
    rope_interleaved: bool = False      # Petit's key, as Llama's: a GGUF file's q / k rows are permuted for pairs
    model_type: str = "arcee"

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "mlp_bias",
                                                                 "rope_interleaved"))
        self.act = activation(self, "hidden_act", "arcee")


def plain_mlp(t, p: str, cfg, bias: bool) -> dict:
    """up_proj -> act -> down_proj under `p` + mlp. (Arcee, Nemotron, Apertus)."""
    D, F, m = cfg.hidden_size, cfg.intermediate_size, p + "mlp."
    w = {"up": t.weight(m + "up_proj.weight", (F, D)), "down": t.weight(m + "down_proj.weight", (D, F))}
    if bias:
        w.update(up_b=t.vec(m + "up_proj.bias", (F,)), down_b=t.vec(m + "down_proj.bias", (D,)))
    return w


def build(cfg: ArceeConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, mlp_for=lambda i, p: plain_mlp(t, p, cfg, cfg.mlp_bias), act=cfg.act,
                      context_length=rope.context_length)


Config = ArceeConfig
