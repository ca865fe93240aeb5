"""Apertus (Swiss AI): Llama with its norms named `attention_layernorm` / `feedforward_layernorm`, RMSNorm over
each head of q and k before RoPE, llama3 RoPE scaling by default, and a plain MLP down(xIELU(up(x))) whose
activation has learned parameters per layer (`mlp.act_fn.alpha_p`, `alpha_n`, and the stored `beta`, `eps`):
xIELU(x) = a_p x^2 + beta x for x > 0, (expm1(min(x, eps)) - x) a_n + beta x otherwise, with a_p = softplus(alpha_p)
and a_n = beta + softplus(alpha_n). transformers keeps these parameters in bfloat16 whatever the model's dtype, so
a_p and a_n are rounded to bfloat16 as it computes them (the fixture's logits differ by 7e-4 of their range
otherwise); `xielu_bf16` off keeps them in float32, as llama.cpp computes them (a GGUF file runs so)."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.families.dense.arcee import plain_mlp
from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act
from petit.native import PARAM_ACTS


def _llama3():
    return {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0}


@dataclass(kw_only=True)
class ApertusConfig(DecoderConfig):
    hidden_act: str = "xielu"
    max_position_embeddings: int = 65536
    rms_norm_eps: float = 1e-5
    rope_theta: float = 12000000.0
    rope_scaling: dict | None = field(default_factory=_llama3)
    attention_bias: bool = False
    xielu_bf16: bool = True             # a_p and a_n rounded to bfloat16 (transformers); False: float32 (llama.cpp)
    model_type: str = "apertus"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("xielu",), "apertus", "xielu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias", "xielu_bf16"))


def _softplus(x: float) -> float:
    return float(x) if x > 20 else float(np.log1p(np.exp(x)))      # torch's, with its threshold 20


def bf16(x: float) -> float:
    """x rounded to bfloat16 (to nearest, ties to even), as a float."""
    b = int(np.array(x, np.float32).view(np.uint32))
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return float(np.array(b, np.uint32).view(np.float32))


def hf_tensors(cfg: ApertusConfig, ckpt) -> dict:
    """The 0-d `beta` and `eps` buffers as one-value vectors (a .petit tensor has at least one dimension)."""
    out = {}
    for i in range(cfg.num_hidden_layers):
        for n in ("beta", "eps"):
            name = f"model.layers.{i}.mlp.act_fn.{n}"
            if name in ckpt:
                out[name] = ((1,), lambda x=name: ckpt.f32(x).reshape(1), (name,))
    return out


def xielu_params(t, p: str, rounded: bool = True) -> tuple:
    """(alpha_p, alpha_n, beta, eps) of layer p's xIELU, as the kernel takes them (after the softplus; rounded to
    bfloat16 as transformers computes them, or not, as llama.cpp)."""
    a = p + "mlp.act_fn."
    alpha_p, alpha_n = float(t.array(a + "alpha_p", (1,))[0]), float(t.array(a + "alpha_n", (1,))[0])
    beta, eps = (float(t.array(a + n, (1,))[0]) for n in ("beta", "eps"))
    r = bf16 if rounded else float
    return (r(_softplus(alpha_p)), r(beta + r(_softplus(alpha_n))), beta, eps)


def build(cfg: ApertusConfig, t):
    rope = default_rope(cfg)
    acts = {}

    def mlp_for(i, p):
        w = plain_mlp(t, p, cfg, False)
        acts[i] = (PARAM_ACTS["xielu"], xielu_params(t, p, cfg.xielu_bf16))
        return w

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, mlp_for=mlp_for, qk_norm="head", context_length=rope.context_length,
                     attn_norm_name="attention_layernorm", mlp_norm_name="feedforward_layernorm")
    for i, L in enumerate(dec.layers):
        L.mlp_act = acts[i]
    return dec


Config = ApertusConfig
