"""Cohere (Command R): one LayerNorm without bias feeding attention and MLP in parallel
(x + attn(n(x)) + mlp(n(x))), RoPE on interleaved pairs, optional per-head LayerNorm of q and k (`use_qk_norm`,
weights [heads, head_dim]), logits x logit_scale, tied LM head."""
from dataclasses import dataclass

from petit.models.blocks.common import arch, attention_weights, default_rope, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import DecoderConfig, check_decoder, refuse_act
from petit.models.blocks.decoder import Decoder, Layer, Norm


@dataclass(kw_only=True)
class CohereConfig(DecoderConfig):
    logit_scale: float = 0.0625
    max_position_embeddings: int = 8192
    layer_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    use_qk_norm: bool = False
    model_type: str = "cohere"

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), d.get("model_type", "cohere"), "silu")

    def _validate(self):
        check_decoder(self, ("layer_norm_eps", "rope_theta", "logit_scale"),
                      ("tie_word_embeddings", "attention_bias", "use_qk_norm"))


def build(cfg, t, rope_for=None, window_for=None):
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.layer_norm_eps
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, interleaved=True)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        L = Layer(**attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias),
                  **gated_mlp_weights(t, p, cfg), attn_norm=norm(t, p + "input_layernorm", D, "layer", eps),
                  rope=rope_for(i) if rope_for else rope, window=window_for(i) if window_for else 0)
        if getattr(cfg, "use_qk_norm", False):
            H, KV = cfg.num_attention_heads, cfg.num_key_value_heads
            L.q_norm = Norm("layer", eps, t.vec(p + "self_attn.q_norm.weight", (H, hd)))
            L.k_norm = Norm("layer", eps, t.vec(p + "self_attn.k_norm.weight", (KV, hd)))
        layers.append(L)
    final = norm(t, "model.norm", D, "layer", eps)
    a = arch(cfg, context_length=rope.context_length, parallel=True, logit_scale=cfg.logit_scale)
    return Decoder(a, E, layers, final, head)


Config = CohereConfig
