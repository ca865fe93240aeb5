"""GPT-NeoX-Japanese (abeja): GPT-NeoX's fused q|k|v stored per head ([q_h; k_h; v_h] for each head h, split when
read, as gpt_neox does) but without biases, partial rotary (rotary_pct, or partial_rotary_factor, default 1), a
sequential residual x + attn(ln1(x)), then + mlp(ln2(.)), a GELU MLP of hidden_size * intermediate_multiple_size
without biases, and one output bias only: the LAST layer's `attention.dense_bias`. Tied embeddings by default
(transformers 5 ties `embed_out` to `embed_in`)."""
from dataclasses import dataclass, field

from petit.models.blocks.common import arch, default_rope, norm
from petit.models.blocks.config import (ConfigMixin, DECODER_REQUIRED, activation, boolean, heads, positive_int,
                                        positive_number)
from petit.models.blocks.decoder import Decoder, Layer
from petit.models.families.classic.gpt_neox import split_qkv
from petit.models.blocks.rope import scaling_type

P = "gpt_neox_japanese."


@dataclass
class GPTNeoXJapaneseConfig(ConfigMixin):
    """intermediate_size is derived: int(hidden_size * intermediate_multiple_size)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_multiple_size: float = 4
    hidden_act: str = "gelu"
    rope_theta: float = 10000.0                 # transformers 4 config.json: rotary_emb_base (read as an alias)
    partial_rotary_factor: float = 1.0          # transformers 4 config.json: rotary_pct (read as an alias)
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    layer_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    model_type: str = "gpt_neox_japanese"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = tuple(k for k in DECODER_REQUIRED if k != "intermediate_size")
    _ROPE_ALIASES = {"rotary_emb_base": "rope_theta", "rotary_pct": "partial_rotary_factor"}

    @classmethod
    def _refuse(cls, d):
        kv = d.get("num_key_value_heads")
        if kv is not None and kv != d.get("num_attention_heads"):
            raise ValueError(f"config: num_key_value_heads {kv} (grouped-query attention) is not part of "
                             f"gpt_neox_japanese")

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "max_position_embeddings")
        positive_number(self, "intermediate_multiple_size", "layer_norm_eps", "rope_theta", "partial_rotary_factor")
        self.num_key_value_heads, self.head_dim = None, None
        heads(self)
        boolean(self, "tie_word_embeddings")
        scaling_type(self.rope_scaling)
        self.act = activation(self, "hidden_act", "gpt_neox_japanese")
        self.intermediate_size = int(self.hidden_size * self.intermediate_multiple_size)
        if self.intermediate_size < 1:
            raise ValueError(f"config: hidden_size * intermediate_multiple_size = {self.intermediate_size} < 1")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def hf_tensors(cfg: GPTNeoXJapaneseConfig, ckpt) -> dict:
    return split_qkv(cfg, ckpt, P + "layers.{}.attention.")


def build(cfg: GPTNeoXJapaneseConfig, t):
    D, F, eps, n = cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_eps, cfg.num_hidden_layers
    E = t.weight(P + "embed_in.weight", (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("embed_out.weight", (cfg.vocab_size, D))
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers = []
    for i in range(n):
        p = f"{P}layers.{i}."
        a, m = p + "attention.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "dense.weight", (D, D)),
                  up=t.weight(m + "dense_h_to_4h.weight", (F, D)), down=t.weight(m + "dense_4h_to_h.weight", (D, F)),
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True),
                  mlp_norm=norm(t, p + "post_attention_layernorm", D, "layer", eps, bias=True), rope=rope)
        if i == n - 1:
            L.o_b = t.vec(a + "dense_bias", (D,))
        layers.append(L)
    final = norm(t, P + "final_layer_norm", D, "layer", eps, bias=True)
    return Decoder(arch(cfg, context_length=rope.context_length, act=cfg.act, parallel=False), E, layers, final, head)


Config = GPTNeoXJapaneseConfig
