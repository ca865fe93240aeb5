"""XGLM (Meta's multilingual GPT, fairseq's decoder): token embeddings times sqrt(d_model) (`scale_embedding`) plus
fairseq's sinusoidal positions (no weights: position p reads row p + 2 of [sin | cos] over d_model / 2 frequencies
10000^(-i / (d_model/2 - 1)), the `pad_token_id` row zeroed), pre-LN blocks (self_attn_layer_norm, attention with
biases, final_layer_norm, fc1 -> act -> fc2 with biases), a final LayerNorm and a tied head. The sinusoid table is
made when the checkpoint is read, under `model.embed_positions.weight`, so a converted file holds it as GPT-2's
learned one."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int
from petit.models.blocks import fairseq_decoder

P = "model."
POS = P + "embed_positions.weight"
OFFSET = 2       # fairseq's position offset


@dataclass
class XGLMConfig(ConfigMixin):
    vocab_size: int
    d_model: int
    ffn_dim: int
    num_layers: int
    attention_heads: int
    max_position_embeddings: int = 2048
    activation_function: str = "gelu"
    scale_embedding: bool = True
    add_cross_attention: bool = False
    pad_token_id: int | None = 1
    tie_word_embeddings: bool = True
    model_type: str = "xglm"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "d_model", "ffn_dim", "num_layers", "attention_heads")
    _IGNORED = frozenset({"dropout", "attention_dropout", "activation_dropout", "layerdrop", "init_std",
                          "decoder_start_token_id"})

    def _validate(self):
        positive_int(self, "vocab_size", "d_model", "ffn_dim", "num_layers", "attention_heads",
                     "max_position_embeddings")
        boolean(self, "scale_embedding", "add_cross_attention", "tie_word_embeddings")
        if self.add_cross_attention:
            raise ValueError("config: add_cross_attention=true is not supported (cross-attention reads an "
                             "encoder's states)")
        if self.d_model % self.attention_heads:
            raise ValueError(f"config: d_model {self.d_model} is not divisible by attention_heads "
                             f"{self.attention_heads}")
        if self.d_model < 4:
            raise ValueError(f"config: d_model {self.d_model} is too small for XGLM's sinusoidal positions")
        self.act = activation(self, "activation_function", "xglm")

    # the names the rest of the engine reads
    @property
    def num_hidden_layers(self):
        return self.num_layers

    @property
    def hidden_size(self):
        return self.d_model


def sinusoids(cfg: XGLMConfig) -> np.ndarray:
    """Rows OFFSET.. of fairseq's table (the rows positions 0.. read), float32 as transformers makes it."""
    n, D = cfg.max_position_embeddings + OFFSET, cfg.d_model
    half = D // 2
    freq = np.exp(np.arange(half, dtype=np.float32) * np.float32(-np.log(10000.0) / (half - 1)))
    ang = np.arange(n, dtype=np.float32)[:, None] * freq[None, :]
    table = np.zeros((n, D), np.float32)
    table[:, :half], table[:, half:2 * half] = np.sin(ang), np.cos(ang)
    if cfg.pad_token_id is not None and 0 <= cfg.pad_token_id < n:
        table[cfg.pad_token_id] = 0.0
    return table[OFFSET:]


def hf_tensors(cfg: XGLMConfig, ckpt) -> dict:
    return {POS: ((cfg.max_position_embeddings, cfg.d_model), lambda: sinusoids(cfg), ())}


def build(cfg: XGLMConfig, t):
    pos = t.array(POS, (cfg.max_position_embeddings, cfg.d_model))
    return fairseq_decoder.build(t, P, cfg.d_model, cfg.ffn_dim, cfg.attention_heads, cfg.num_layers, cfg.vocab_size,
                                 cfg.max_position_embeddings, cfg.act, cfg.scale_embedding, pos,
                                 None if cfg.tie_word_embeddings else "lm_head.weight")


Config = XGLMConfig
