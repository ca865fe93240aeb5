"""Kosmos-2's language model (transformers' `kosmos_2_text_model`, Kosmos2TextForCausalLM): fairseq's pre-LN decoder
(petit/models/blocks/fairseq_decoder.py's: self_attn_layer_norm, attention with biases, final_layer_norm, fc1 -> act ->
fc2 with biases, a final LayerNorm `layer_norm`, token embeddings x sqrt(embed_dim) plus sinusoidal positions, tied
head) with Magneto's sub-LayerNorms: `inner_attn_ln` on the heads' output before out_proj and `ffn.ffn_layernorm` on
the activation before fc2, all at `layer_norm_eps`.

Positions: Kosmos2TextSinusoidalPositionalEmbedding reads row cumsum(token != pad) + pad_token_id of fairseq's table
([sin | cos] over embed_dim / 2 frequencies 10000^(-i / (embed_dim/2 - 1))), so the p-th token of a prompt without
pad tokens reads row p + 1 + pad_token_id (XGLM's p + 2 with pad 1); the table is made when the checkpoint is read,
under `model.embed_positions.weight`, so a converted file holds it. A pad token inside a prompt would take row
pad_token_id (zeros) and not advance the count: Petit numbers every token, so prompts should hold none.

Kosmos-2's own checkpoint (`kosmos-2`, Kosmos2ForConditionalGeneration) runs this model for text:
petit/models/families/wrappers/kosmos2.py."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.config import ConfigMixin, activation, aliased, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "model."
POS = P + "embed_positions.weight"
ALIASES = {"num_attention_heads": "attention_heads", "hidden_size": "embed_dim", "num_hidden_layers": "layers"}


@dataclass
class Kosmos2TextConfig(ConfigMixin):
    vocab_size: int = 65037
    max_position_embeddings: int = 2048
    embed_dim: int = 2048
    layers: int = 24
    ffn_dim: int = 8192
    attention_heads: int = 32
    activation_function: str = "gelu"
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    pad_token_id: int | None = 1
    add_cross_attention: bool = False
    model_type: str = "kosmos_2_text_model"
    unknown_keys: list = field(default_factory=list, repr=False)
    _IGNORED = frozenset({"dropout", "attention_dropout", "activation_dropout", "layerdrop", "init_std"})

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(aliased(d, ALIASES) if isinstance(d, dict) else d)

    def _validate(self):
        positive_int(self, "vocab_size", "embed_dim", "ffn_dim", "layers", "attention_heads", "max_position_embeddings")
        positive_number(self, "layer_norm_eps")
        boolean(self, "scale_embedding", "add_cross_attention", "tie_word_embeddings")
        if self.add_cross_attention:
            raise ValueError("config: add_cross_attention=true is not supported (cross-attention reads an encoder's "
                             "states)")
        if isinstance(self.pad_token_id, bool) or not isinstance(self.pad_token_id, int) or self.pad_token_id < 0:
            raise ValueError(f"config: pad_token_id must be a token id (Kosmos-2's positions count from it), got "
                             f"{self.pad_token_id!r}")
        if self.embed_dim % self.attention_heads or self.embed_dim < 4:
            raise ValueError(f"config: embed_dim {self.embed_dim} is not divisible by attention_heads "
                             f"{self.attention_heads} (or too small for the sinusoidal positions)")
        self.act = activation(self, "activation_function", self.model_type)

    # the names the rest of the engine reads
    @property
    def num_hidden_layers(self):
        return self.layers

    @property
    def hidden_size(self):
        return self.embed_dim


def sinusoids(cfg: Kosmos2TextConfig) -> np.ndarray:
    """The rows positions 0.. read (p + 1 + pad_token_id), float32 as transformers makes them."""
    half = cfg.embed_dim // 2
    freq = np.exp(np.arange(half, dtype=np.float32) * np.float32(-np.log(10000.0) / (half - 1)))
    rows = np.arange(cfg.max_position_embeddings, dtype=np.float32) + np.float32(1 + cfg.pad_token_id)
    ang = rows[:, None] * freq[None, :]
    table = np.zeros((cfg.max_position_embeddings, cfg.embed_dim), np.float32)
    table[:, :half], table[:, half:2 * half] = np.sin(ang), np.cos(ang)
    return table


def hf_tensors(cfg: Kosmos2TextConfig, ckpt) -> dict:
    return {POS: ((cfg.max_position_embeddings, cfg.embed_dim), lambda: sinusoids(cfg), ())}


def build(cfg: Kosmos2TextConfig, t):
    D, F, H, eps = cfg.embed_dim, cfg.ffn_dim, cfg.attention_heads, cfg.layer_norm_eps

    def ln(name, width=D):
        return Norm("layer", eps, t.vec(name + ".weight", (width,)), t.vec(name + ".bias", (width,)))

    E = t.weight(P + "embed_tokens.weight", (cfg.vocab_size, D))
    layers = []
    for i in range(cfg.layers):
        p = f"{P}layers.{i}."
        a, f = p + "self_attn.", p + "ffn."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
                  up=t.weight(f + "fc1.weight", (F, D)), down=t.weight(f + "fc2.weight", (D, F)),
                  up_b=t.vec(f + "fc1.bias", (F,)), down_b=t.vec(f + "fc2.bias", (D,)),
                  attn_norm=ln(p + "self_attn_layer_norm"), mlp_norm=ln(p + "final_layer_norm"), rope=None)
        L.q_b, L.k_b, L.v_b, L.o_b = (t.vec(a + f"{n}.bias", (D,)) for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
        L.o_norm, L.down_norm = ln(a + "inner_attn_ln"), ln(f + "ffn_layernorm", F)
        layers.append(L)
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act,
                embed_scale=float(np.sqrt(D)) if cfg.scale_embedding else 1.0)
    return Decoder(arch, E, layers, ln(P + "layer_norm"), head,
                   pos_embed=t.array(POS, (cfg.max_position_embeddings, D)))


Config = Kosmos2TextConfig
