"""InternLM3 (Shanghai AI Lab, `internlm/internlm3-8b-instruct`): a Llama block whose biases follow two switches of
its own, `qkv_bias` (q / k / v projections) and `bias` (o_proj and the gate / up / down projections); RoPE with
`dynamic` NTK scaling in the released model. transformers has no native class for it (the Hub repository ships
remote code); the fixture in tests/fixtures/hf_more/internlm3 says how its reference was made."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class InternLM3Config(DecoderConfig):
    """Defaults as in the remote `configuration_internlm3.py`."""

    intermediate_size: int = 11008
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-6
    qkv_bias: bool = False
    bias: bool = False
    model_type: str = "internlm3"

    # written by the remote code's save_pretrained; the attention implementation does not change the result
    _IGNORED = frozenset({"attn_implementation"})

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "internlm3", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "qkv_bias", "bias"))


def build(cfg: InternLM3Config, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.qkv_bias, o_bias=cfg.bias, mlp_bias=cfg.bias,
                      rope_for=lambda i: rope, context_length=rope.context_length)


Config = InternLM3Config
