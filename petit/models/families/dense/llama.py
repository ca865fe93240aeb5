"""Llama (and every checkpoint with `model_type: llama`): RMSNorm, grouped-query attention with RoPE (scalings:
linear, dynamic, llama3, yarn, longrope), optional attention / MLP biases, SwiGLU MLP, tied or separate LM head."""
from dataclasses import dataclass

from petit.models.blocks.common import llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act


@dataclass(kw_only=True)
class LlamaConfig(DecoderConfig):
    """Hyperparameters, with Hugging Face's field names (the shared ones and their defaults in DecoderConfig)."""

    rms_norm_eps: float = 1e-6
    rope_interleaved: bool = False      # a Petit key, not transformers': True rotates pairs (2i, 2i+1), not halves
    attention_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "llama"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "llama", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"),
                      ("rope_interleaved", "tie_word_embeddings", "attention_bias", "mlp_bias"))


def build(cfg: LlamaConfig, t):
    from petit.models.blocks.common import default_rope
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      mlp_bias=cfg.mlp_bias, rope_for=lambda i: rope, context_length=rope.context_length)


Config = LlamaConfig


def tensor_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a Llama checkpoint holds, with its shape ([out_features, in_features] for matrices)."""
    D, F, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, D)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (D,), p + "self_attn.q_proj.weight": (q, D),
                       p + "self_attn.k_proj.weight": (kv, D), p + "self_attn.v_proj.weight": (kv, D),
                       p + "self_attn.o_proj.weight": (D, q), p + "post_attention_layernorm.weight": (D,),
                       p + "mlp.gate_proj.weight": (F, D), p + "mlp.up_proj.weight": (F, D),
                       p + "mlp.down_proj.weight": (D, F)})
        if cfg.attention_bias:
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,), p + "self_attn.o_proj.bias": (D,)})
        if cfg.mlp_bias:
            shapes.update({p + "mlp.gate_proj.bias": (F,), p + "mlp.up_proj.bias": (F,),
                           p + "mlp.down_proj.bias": (D,)})
    shapes["model.norm.weight"] = (D,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, D)
    return shapes
