"""ERNIE 4.5 (Baidu, the dense models): Llama with RoPE on interleaved pairs (2i, 2i+1), one `use_bias` switch for
every projection (q/k/v/o and the MLP's), tied embeddings by default."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class Ernie45Config(DecoderConfig):
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    use_bias: bool = False
    tie_word_embeddings: bool = True
    model_type: str = "ernie4_5"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "ernie4_5", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "use_bias"))


def build(cfg: Ernie45Config, t):
    rope = default_rope(cfg, interleaved=True)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.use_bias, o_bias=cfg.use_bias, mlp_bias=cfg.use_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length)


Config = Ernie45Config
