"""CTRL (Salesforce): embeddings `w` times sqrt(n_embd) plus a fixed sinusoidal position table (computed here, as
transformers' `positional_encoding`: the sines of the even angle columns, then the cosines of the odd ones), pre-LN
blocks (LayerNorm eps 1e-6 whatever the config says; only the final norm reads layer_norm_epsilon), separate
Wq / Wk / Wv / dense with biases and no RoPE, a ReLU MLP of `dff` with biases, an LM head with its own bias (its
matrix tied with `w` by default)."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "transformer."
BLOCK_EPS = 1e-6                # EncoderLayer's LayerNorms: fixed, not layer_norm_epsilon


@dataclass
class CTRLConfig(ConfigMixin):
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    dff: int = 8192
    n_positions: int = 256
    layer_norm_epsilon: float = 1e-6
    tie_word_embeddings: bool = True
    model_type: str = "ctrl"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "n_embd", "n_layer", "n_head")
    _IGNORED = frozenset({"n_ctx"})

    def _validate(self):
        positive_int(self, "vocab_size", "n_embd", "n_layer", "n_head", "dff", "n_positions")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "tie_word_embeddings")
        if self.n_embd % self.n_head:
            raise ValueError(f"config: n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.n_embd % 2:
            raise ValueError(f"config: n_embd {self.n_embd} is odd (the sinusoidal table pairs its columns)")
        self.act = "relu"

    # the names the rest of the engine reads
    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd


def positions(n: int, d: int) -> np.ndarray:
    """[n, d] float32: for position p and column i the angle p / 10000^(2 (i // 2) / d); the sines of the even
    columns' angles, then the cosines of the odd columns' (not interleaved)."""
    i = np.arange(d)
    angle = np.arange(n, dtype=np.float64)[:, None] / np.power(10000.0, (2 * (i // 2)) / d)[None, :]
    return np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1).astype(np.float32)


def build(cfg: CTRLConfig, t):
    D, F, H, V = cfg.n_embd, cfg.dff, cfg.n_head, cfg.vocab_size

    def ln(name, eps):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "w.weight", (V, D))
    layers = []
    for i in range(cfg.n_layer):
        p = f"{P}h.{i}."
        a, m = p + "multi_head_attention.", p + "ffn."
        layers.append(Layer(
            q=t.weight(a + "Wq.weight", (D, D)), k=t.weight(a + "Wk.weight", (D, D)),
            v=t.weight(a + "Wv.weight", (D, D)), o=t.weight(a + "dense.weight", (D, D)),
            q_b=t.vec(a + "Wq.bias", (D,)), k_b=t.vec(a + "Wk.bias", (D,)), v_b=t.vec(a + "Wv.bias", (D,)),
            o_b=t.vec(a + "dense.bias", (D,)),
            up=t.weight(m + "0.weight", (F, D)), up_b=t.vec(m + "0.bias", (F,)),
            down=t.weight(m + "2.weight", (D, F)), down_b=t.vec(m + "2.bias", (D,)),
            attn_norm=ln(p + "layernorm1", BLOCK_EPS), mlp_norm=ln(p + "layernorm2", BLOCK_EPS), rope=None))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (V, D))
    a = Arch(vocab_size=V, hidden_size=D, intermediate_size=F, num_attention_heads=H, num_key_value_heads=H,
             head_dim=D // H, context_length=cfg.n_positions, act=cfg.act, embed_scale=float(np.sqrt(D)))
    return Decoder(a, E, layers, ln(P + "layernorm", cfg.layer_norm_epsilon), head,
                   lm_head_b=t.vec("lm_head.bias", (V,)), pos_embed=positions(cfg.n_positions, D))


Config = CTRLConfig
