"""BitNet b1.58 (Microsoft): Llama's block with ternary weights in every projection (q/k/v/o, gate/up/down), their
inputs quantized to int8 per token (s = 127 / max|x|), a norm on o_proj's input (`attn_sub_norm`) and on
down_proj's (`ffn_sub_norm`, after relu²(gate) * up), RoPE, RMSNorm, tied embeddings (kept in float: they are not
ternary). The projections run on Petit's ternary kernel (tq2 rows: 2 bits a weight and a scale per row, integer
dot products against the int8 tokens) whatever weight type the load asks for, which applies to the embedding and
head only.

`quantization_config` (quant_method bitnet) says how the checkpoint stores them: `quantization_mode` offline
(microsoft/bitnet-b1.58-2B-4T) packs 4 ternary values a byte ([out / 4, in] uint8, value t + 1 of row i * out / 4 + p
in bits 2i of packed row p) with a `weight_scale` each; `linear_class` bitlinear divides the products by it,
autobitlinear multiplies them by it. Online (the -bf16 master weights, autobitlinear) is ternarized at load by
BitNet's rule: s = 1 / mean |w|, t = clamp(round(w s), -1, 1), scale 1 / s.

`activation_quant` off (Petit's key, set by the GGUF reader for llama.cpp's bitnet files) runs the projections as
llama.cpp does: float matrix products of the weights as stored (the converter stores them already ternarized,
t / s, in the file's type), with no int8 quantization of their inputs."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import default_rope, norm
from petit.models.blocks.config import DecoderConfig, activation, check_decoder
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.native import pack_tq2

PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
               "mlp.up_proj", "mlp.down_proj")


@dataclass(kw_only=True)
class BitNetConfig(DecoderConfig):
    num_key_value_heads: int | None = 5         # transformers' BitNetConfig default
    hidden_act: str = "relu2"
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    attention_bias: bool = False
    quantization_config: dict | None = None
    activation_quant: bool = True       # int8 per token before each projection (transformers); False: llama.cpp
    model_type: str = "bitnet"
    _QUANT_METHODS = ("bitnet",)

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias",
                                                             "activation_quant"))
        if self.attention_bias:
            raise ValueError("config: attention_bias=true is not supported by the bitnet family")
        self.act = activation(self, "hidden_act", "bitnet")
        q = self.quantization_config or {}
        self.linear_class = q.get("linear_class", "bitlinear")
        self.mode = q.get("quantization_mode", "offline")
        if self.linear_class not in ("bitlinear", "autobitlinear") or self.mode not in ("offline", "online"):
            raise ValueError(f"config: quantization_config linear_class {self.linear_class!r} / quantization_mode "
                             f"{self.mode!r} is not supported (bitlinear or autobitlinear; offline or online)")
        if self.mode == "online" and self.linear_class == "bitlinear":
            raise ValueError("config: quantization_config: online quantization needs linear_class autobitlinear "
                             "(transformers' BitLinear reads packed weights only)")
        if q.get("use_rms_norm"):
            raise ValueError("config: quantization_config use_rms_norm=true is not supported by the bitnet family")
        self.keep_float = list(q.get("modules_to_not_convert") or ["lm_head"])

    def ternary(self, name: str) -> bool:
        """Whether the projection `name` runs on the ternary kernel: one of BitNet's ternary layers (transformers'
        substring rule), with int8 activations."""
        return self.activation_quant and not any(k in name for k in self.keep_float)


def _unpack(packed: np.ndarray) -> np.ndarray:
    """transformers' unpack_weights: packed [P, in] -> ternary [4 P, in], row i * P + p from bits 2i of row p."""
    return np.concatenate([((packed >> (2 * i)) & 3).astype(np.int8) - 1 for i in range(4)], axis=0)


def hf_tensors(cfg: BitNetConfig, ckpt) -> dict:
    """Offline checkpoints: each packed projection as its ternary rows (exactly, with its scale) and as floats."""
    if cfg.mode != "offline":
        return {}
    out = {}
    for i in range(cfg.num_hidden_layers):
        for proj in PROJECTIONS:
            name = f"model.layers.{i}.{proj}"
            w, s = name + ".weight", name + ".weight_scale"
            if w not in ckpt or s not in ckpt or not cfg.ternary(name):
                continue
            rows, cols = ckpt.info(w)[1]

            def scale(s=s):
                v = float(ckpt.f32(s).reshape(-1)[0])
                return v if cfg.linear_class == "autobitlinear" else 1.0 / v       # bitlinear divides by it

            out[w] = ((4 * rows, cols), lambda w=w, sc=scale: _unpack(ckpt.raw(w)).astype(np.float32) * sc(),
                      (w, s), None, lambda w=w, sc=scale: pack_tq2(_unpack(ckpt.raw(w)), sc()))
    return out


def build(cfg: BitNetConfig, t):
    D, F, hd, eps = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim, cfg.rms_norm_eps
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    E = t.weight("model.embed_tokens.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg)
    shapes = {"self_attn.q_proj": (q, D), "self_attn.k_proj": (kv, D), "self_attn.v_proj": (kv, D),
              "self_attn.o_proj": (D, q), "mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)}
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        m = {proj.split(".")[1][:-5]: (t.ternary if cfg.ternary(p + proj) else t.weight)(p + proj + ".weight", shape)
             for proj, shape in shapes.items()}
        layers.append(Layer(**m, rope=rope, attn_norm=norm(t, p + "input_layernorm", D, "rms", eps),
                            mlp_norm=norm(t, p + "post_attention_layernorm", D, "rms", eps),
                            o_norm=norm(t, p + "self_attn.attn_sub_norm", q, "rms", eps),
                            down_norm=norm(t, p + "mlp.ffn_sub_norm", F, "rms", eps)))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F,
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads, head_dim=hd,
                context_length=rope.context_length, act=cfg.act)
    return Decoder(arch, E, layers, norm(t, "model.norm", D, "rms", eps), head)


Config = BitNetConfig
