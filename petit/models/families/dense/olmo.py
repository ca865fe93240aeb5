"""OLMo (1): Llama with LayerNorms that have no weight and no bias (eps 1e-5, fixed), and q, k, v each clamped to
[-clip_qkv, clip_qkv] when `clip_qkv` is set."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_number, refuse_act

EPS = 1e-5      # OlmoLayerNorm's, not a config key


@dataclass(kw_only=True)
class OlmoConfig(DecoderConfig):
    attention_bias: bool = False
    clip_qkv: float | None = None
    rope_interleaved: bool = False      # Petit's key, as Llama's: a GGUF file's q / k rows are permuted for pairs
    model_type: str = "olmo"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "olmo", "silu")

    def _validate(self):
        check_decoder(self, ("rope_theta",), ("tie_word_embeddings", "attention_bias", "rope_interleaved"))
        if self.clip_qkv is not None:
            positive_number(self, "clip_qkv")


def build(cfg: OlmoConfig, t):
    rope = default_rope(cfg)
    dec = llama_like(t, cfg, eps=EPS, kind="layer", qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, context_length=rope.context_length, norm_weights=False)
    for L in dec.layers:
        L.clip = float(cfg.clip_qkv or 0.0)
    return dec


Config = OlmoConfig
