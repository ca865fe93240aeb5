"""StableLM (2): LayerNorm with bias, partial rotary (partial_rotary_factor), optional q/k/v biases, optional
per-head LayerNorm of q and k with a separate weight per head (`q_layernorm.norms.N`), optional parallel residual
(attention and MLP both read the input norm), SwiGLU MLP."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import arch, attention_weights, default_rope, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act
from petit.models.blocks.decoder import Decoder, Layer, Norm


@dataclass(kw_only=True)
class StableLmConfig(DecoderConfig):
    num_key_value_heads: int | None = 32
    max_position_embeddings: int = 4096
    layer_norm_eps: float = 1e-5
    use_qkv_bias: bool = False
    qk_layernorm: bool = False
    use_parallel_residual: bool = False
    partial_rotary_factor: float = 0.25
    model_type: str = "stablelm"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "stablelm", "silu")

    def _validate(self):
        check_decoder(self, ("layer_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "use_qkv_bias", "qk_layernorm", "use_parallel_residual"))
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def hf_tensors(cfg: StableLmConfig, ckpt) -> dict:
    """The per-head q/k norm weights gathered into one [heads, head_dim] block per layer."""
    out = {}
    if not cfg.qk_layernorm:
        return out
    for i in range(cfg.num_hidden_layers):
        for which, n in (("q", cfg.num_attention_heads), ("k", cfg.num_key_value_heads)):
            base = f"model.layers.{i}.self_attn.{which}_layernorm"
            names = tuple(f"{base}.norms.{h}.weight" for h in range(n))
            if all(x in ckpt for x in names):
                out[base + ".weight"] = ((n, cfg.head_dim), lambda ns=names: np.stack([ckpt.f32(x) for x in ns]), names)
    return out


def build(cfg: StableLmConfig, t):
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.layer_norm_eps
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        L = Layer(**attention_weights(t, p, cfg, qkv_bias=cfg.use_qkv_bias), **gated_mlp_weights(t, p, cfg),
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True), rope=rope)
        if not cfg.use_parallel_residual:
            L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "layer", eps, bias=True)
        if cfg.qk_layernorm:
            H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
            L.q_norm = Norm("layer", eps, t.vec(p + "self_attn.q_layernorm.weight", (H, hd)))
            L.k_norm = Norm("layer", eps, t.vec(p + "self_attn.k_layernorm.weight", (KV, hd)))
        layers.append(L)
    final = norm(t, "model.norm", D, "layer", eps, bias=True)
    return Decoder(arch(cfg, context_length=rope.context_length, parallel=cfg.use_parallel_residual), E, layers,
                   final, head)


Config = StableLmConfig
