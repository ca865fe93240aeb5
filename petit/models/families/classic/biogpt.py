"""BioGPT (Microsoft): token embeddings times sqrt(hidden_size) (`scale_embedding`) plus learned positions read at
position + 2 (`embed_positions` has 2 more rows, as OPT's), pre-LN blocks (self_attn_layer_norm, attention with
biases, final_layer_norm, fc1 -> act -> fc2 with biases), a final LayerNorm and a head (`output_projection`, tied by
default). Every LayerNorm is nn.LayerNorm's default eps 1e-5: transformers reads `layer_norm_eps` nowhere."""
from dataclasses import dataclass, field


from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int
from petit.models.blocks import fairseq_decoder

P = "biogpt."
OFFSET = 2      # fairseq's position offset


@dataclass
class BioGptConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    max_position_embeddings: int = 1024
    scale_embedding: bool = True
    tie_word_embeddings: bool = True
    model_type: str = "biogpt"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    # dropout rates (inference), init, and layer_norm_eps, which transformers' BioGPT reads nowhere (above)
    _IGNORED = frozenset({"hidden_dropout_prob", "attention_probs_dropout_prob", "activation_dropout", "layerdrop",
                          "initializer_range", "layer_norm_eps"})

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings")
        boolean(self, "scale_embedding", "tie_word_embeddings")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}")
        self.act = activation(self, "hidden_act", "biogpt")


def build(cfg: BioGptConfig, t):
    n, D = cfg.max_position_embeddings, cfg.hidden_size
    pos = t.array(P + "embed_positions.weight", (n + OFFSET, D))[OFFSET:]
    return fairseq_decoder.build(t, P, D, cfg.intermediate_size, cfg.num_attention_heads, cfg.num_hidden_layers,
                                 cfg.vocab_size, n, cfg.act, cfg.scale_embedding, pos,
                                 None if cfg.tie_word_embeddings else "output_projection.weight")


Config = BioGptConfig
