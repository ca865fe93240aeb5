"""Persimmon (Adept Persimmon-8B, Fuyu's language model): LayerNorm with bias, a fused `query_key_value` stored per
head ([q_h; k_h; v_h] for each head h, as GPT-NeoX) with bias, LayerNorm (with bias) over each head of q and k
before RoPE (`qk_layernorm`), partial rotary (rotate-half), a plain MLP dense_4h_to_h(relu²(dense_h_to_4h(x)))
with biases, the output projection `dense` with bias, sequential residual. The fused matrix is split into q, k and
v when read."""
from dataclasses import dataclass

from petit.models.families.classic import gpt_neox
from petit.models.blocks.common import arch, default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, activation, check_decoder
from petit.models.blocks.decoder import Decoder, Layer


@dataclass(kw_only=True)
class PersimmonConfig(DecoderConfig):
    hidden_act: str = "relu2"
    max_position_embeddings: int = 16384
    layer_norm_eps: float = 1e-5
    rope_theta: float = 25000.0
    qk_layernorm: bool = True
    partial_rotary_factor: float = 0.5
    model_type: str = "persimmon"
    def _validate(self):
        self.num_key_value_heads = self.head_dim = None     # transformers derives both (no grouping)
        check_decoder(self, ("layer_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "qk_layernorm"))
        self.act = activation(self, "hidden_act", "persimmon")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def hf_tensors(cfg: PersimmonConfig, ckpt) -> dict:
    return gpt_neox.split_qkv(cfg, ckpt, "model.layers.{}.self_attn.")


def build(cfg: PersimmonConfig, t):
    D, F, hd, eps = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim, cfg.layer_norm_eps
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "dense.weight", (D, D)),
                  q_b=t.vec(a + "q_proj.bias", (D,)), k_b=t.vec(a + "k_proj.bias", (D,)),
                  v_b=t.vec(a + "v_proj.bias", (D,)), o_b=t.vec(a + "dense.bias", (D,)),
                  up=t.weight(m + "dense_h_to_4h.weight", (F, D)), up_b=t.vec(m + "dense_h_to_4h.bias", (F,)),
                  down=t.weight(m + "dense_4h_to_h.weight", (D, F)), down_b=t.vec(m + "dense_4h_to_h.bias", (D,)),
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True),
                  mlp_norm=norm(t, p + "post_attention_layernorm", D, "layer", eps, bias=True), rope=rope)
        if cfg.qk_layernorm:
            L.q_norm = norm(t, a + "q_layernorm", hd, "layer", eps, bias=True)
            L.k_norm = norm(t, a + "k_layernorm", hd, "layer", eps, bias=True)
        layers.append(L)
    final = norm(t, "model.final_layernorm", D, "layer", eps, bias=True)
    return Decoder(arch(cfg, context_length=rope.context_length, act=cfg.act), E, layers, final, head)


Config = PersimmonConfig
