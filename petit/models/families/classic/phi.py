"""Phi (Phi-1.5, Phi-2): one LayerNorm (with bias) feeding attention and MLP in parallel, biases everywhere
(q/k/v, `dense`, fc1/fc2, the LM head), partial rotary, optional per-head LayerNorm of q and k, GELU MLP."""
from dataclasses import dataclass

from petit.models.blocks.common import arch, default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, activation, check_decoder
from petit.models.blocks.decoder import Decoder, Layer


@dataclass(kw_only=True)
class PhiConfig(DecoderConfig):
    hidden_act: str = "gelu_new"
    layer_norm_eps: float = 1e-5
    partial_rotary_factor: float = 0.5
    qk_layernorm: bool = False
    model_type: str = "phi"
    _IGNORED = frozenset({"resid_pdrop", "embd_pdrop"})

    def _validate(self):
        check_decoder(self, ("layer_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "qk_layernorm"))
        self.act = activation(self, "hidden_act", "phi")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def build(cfg: PhiConfig, t):
    D, F, hd, eps = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim, cfg.layer_norm_eps
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (q, D)), k=t.weight(a + "k_proj.weight", (kv, D)),
                  v=t.weight(a + "v_proj.weight", (kv, D)), o=t.weight(a + "dense.weight", (D, q)),
                  q_b=t.vec(a + "q_proj.bias", (q,)), k_b=t.vec(a + "k_proj.bias", (kv,)),
                  v_b=t.vec(a + "v_proj.bias", (kv,)), o_b=t.vec(a + "dense.bias", (D,)),
                  up=t.weight(m + "fc1.weight", (F, D)), up_b=t.vec(m + "fc1.bias", (F,)),
                  down=t.weight(m + "fc2.weight", (D, F)), down_b=t.vec(m + "fc2.bias", (D,)),
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True), rope=rope)
        if cfg.qk_layernorm:
            L.q_norm = norm(t, a + "q_layernorm", hd, "layer", eps, bias=True)
            L.k_norm = norm(t, a + "k_layernorm", hd, "layer", eps, bias=True)
        layers.append(L)
    final = norm(t, "model.final_layernorm", D, "layer", eps, bias=True)
    head_b = t.vec("lm_head.bias", (cfg.vocab_size,))          # a bias of its own even when the weight is tied
    return Decoder(arch(cfg, context_length=rope.context_length, act=cfg.act, parallel=True), E, layers, final,
                   head, lm_head_b=head_b)


Config = PhiConfig
