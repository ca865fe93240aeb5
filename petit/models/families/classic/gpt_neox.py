"""GPT-NeoX (Pythia): LayerNorm with bias, fused q|k|v stored per head ([q_h; k_h; v_h] for each head h) with bias,
partial rotary (rotary_pct, or partial_rotary_factor), parallel residual x + attn(ln1(x)) + mlp(ln2(x)) (or
sequential), GELU MLP, separate output matrix `embed_out`. The fused matrix is split into q, k and v when read
(`attention.q_proj` ...)."""
from dataclasses import dataclass, field

from petit.models.blocks.common import arch, default_rope, norm
from petit.models.blocks.config import (ConfigMixin, DECODER_REQUIRED, activation, boolean, heads, positive_int,
                                        positive_number)
from petit.models.blocks.decoder import Decoder, Layer
from petit.models.blocks.rope import scaling_type

P = "gpt_neox."


@dataclass
class GPTNeoXConfig(ConfigMixin):
    """Not a DecoderConfig: GPT-NeoX has no num_key_value_heads or head_dim key (a head_dim key is reported as
    unknown); both are derived in _validate."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    hidden_act: str = "gelu"
    rope_theta: float = 10000.0                 # transformers 4 config.json: rotary_emb_base (read as an alias)
    partial_rotary_factor: float = 0.25         # transformers 4 config.json: rotary_pct (read as an alias)
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    layer_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    use_parallel_residual: bool = True
    attention_bias: bool = True
    model_type: str = "gpt_neox"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = DECODER_REQUIRED
    _IGNORED = frozenset({"use_flash_attn", "num_key_value_heads"})
    _ROPE_ALIASES = {"rotary_emb_base": "rope_theta", "rotary_pct": "partial_rotary_factor"}

    @classmethod
    def _refuse(cls, d):
        kv = d.get("num_key_value_heads")
        if kv is not None and kv != d.get("num_attention_heads"):
            raise ValueError(f"config: num_key_value_heads {kv} (grouped-query attention) is not part of gpt_neox")

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "max_position_embeddings")
        self.num_key_value_heads, self.head_dim = None, None
        heads(self)
        positive_number(self, "layer_norm_eps", "rope_theta", "partial_rotary_factor")
        boolean(self, "tie_word_embeddings", "use_parallel_residual", "attention_bias")
        scaling_type(self.rope_scaling)
        self.act = activation(self, "hidden_act", "gpt_neox")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def split_qkv(cfg, ckpt, prefix: str) -> dict:
    """q, k and v (and their biases) out of a fused `query_key_value` stored per head ([q_h; k_h; v_h] for each head
    h), under prefix.format(layer): GPT-NeoX, Persimmon."""
    D, H, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    out = {}
    for i in range(cfg.num_hidden_layers):
        a = prefix.format(i)
        w, b = a + "query_key_value.weight", a + "query_key_value.bias"
        for j, part in enumerate(("q_proj", "k_proj", "v_proj")):
            out[a + part + ".weight"] = ((D, D), lambda w=w, j=j: ckpt.f32(w).reshape(H, 3, hd, D)[:, j].reshape(D, D),
                                         (w,))
            if b in ckpt:
                out[a + part + ".bias"] = ((D,), lambda b=b, j=j: ckpt.f32(b).reshape(H, 3, hd)[:, j].reshape(D), (b,))
    return out


def hf_tensors(cfg: GPTNeoXConfig, ckpt) -> dict:
    return split_qkv(cfg, ckpt, P + "layers.{}.attention.")


def build(cfg: GPTNeoXConfig, t):
    D, F, eps, bias = cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_eps, cfg.attention_bias
    E = t.weight(P + "embed_in.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("embed_out.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}layers.{i}."
        a, m = p + "attention.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "dense.weight", (D, D)),
                  up=t.weight(m + "dense_h_to_4h.weight", (F, D)), up_b=t.vec(m + "dense_h_to_4h.bias", (F,)),
                  down=t.weight(m + "dense_4h_to_h.weight", (D, F)), down_b=t.vec(m + "dense_4h_to_h.bias", (D,)),
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True),
                  mlp_norm=norm(t, p + "post_attention_layernorm", D, "layer", eps, bias=True), rope=rope)
        if bias:
            L.q_b, L.k_b, L.v_b = (t.vec(a + n + ".bias", (D,)) for n in ("q_proj", "k_proj", "v_proj"))
            L.o_b = t.vec(a + "dense.bias", (D,))
        layers.append(L)
    final = norm(t, P + "final_layer_norm", D, "layer", eps, bias=True)
    return Decoder(arch(cfg, context_length=rope.context_length, act=cfg.act, parallel=cfg.use_parallel_residual),
                   E, layers, final, head)


Config = GPTNeoXConfig
