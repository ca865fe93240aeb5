"""GLM (GLM-4-9B, ChatGLM's successor in transformers): Llama with partial rotary (`partial_rotary_factor` of each
head, by default half) on interleaved pairs (2i, 2i+1), q/k/v biases (`attention_bias`, o_proj none), and a fused
`gate_up_proj` ([gate; up] rows), split when read so a converted .petit holds gate and up separately."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class GlmConfig(DecoderConfig):
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1.5625e-07
    partial_rotary_factor: float = 0.5
    attention_bias: bool = True
    model_type: str = "glm"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "attention_bias"))
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def hf_tensors(cfg: GlmConfig, ckpt) -> dict:
    """gate and up as the two row halves of the fused `gate_up_proj`."""
    D, F = cfg.hidden_size, cfg.intermediate_size
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp."
        gu = p + "gate_up_proj.weight"
        if gu in ckpt:
            for name, r0 in (("gate_proj", 0), ("up_proj", F)):
                out[p + name + ".weight"] = ((F, D), lambda g=gu, a=r0: ckpt.f32(g)[a:a + F], (gu,))
    return out


def build(cfg: GlmConfig, t):
    rope = default_rope(cfg, dim=cfg.rotary_dim, interleaved=True)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, rope_for=lambda i: rope,
                      context_length=rope.context_length)


Config = GlmConfig
