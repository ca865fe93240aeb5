"""BioGPT (Microsoft): token embeddings times sqrt(hidden_size) (`scale_embedding`) plus learned positions read at
position + 2 (`embed_positions` has 2 more rows, as OPT's), pre-LN blocks (self_attn_layer_norm, attention with
biases, final_layer_norm, fc1 -> act -> fc2 with biases), a final LayerNorm and a head (`output_projection`, tied by
default). Every LayerNorm is nn.LayerNorm's default eps 1e-5: transformers reads `layer_norm_eps` nowhere."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.config import ConfigMixin, activation, boolean, positive_int
from petit.models.decoder import Arch, Decoder, Layer, Norm

P = "biogpt."
OFFSET, EPS = 2, 1e-5


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
    D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads

    def ln(name):
        return Norm("layer", EPS, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "embed_tokens.weight", (cfg.vocab_size, D))
    pos = t.array(P + "embed_positions.weight", (cfg.max_position_embeddings + OFFSET, D))[OFFSET:]
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}layers.{i}."
        a = p + "self_attn."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
                  up=t.weight(p + "fc1.weight", (F, D)), down=t.weight(p + "fc2.weight", (D, F)),
                  up_b=t.vec(p + "fc1.bias", (F,)), down_b=t.vec(p + "fc2.bias", (D,)),
                  attn_norm=ln(p + "self_attn_layer_norm"), mlp_norm=ln(p + "final_layer_norm"), rope=None)
        L.q_b, L.k_b, L.v_b, L.o_b = (t.vec(a + f"{n}.bias", (D,)) for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
        layers.append(L)
    head = E if cfg.tie_word_embeddings else t.weight("output_projection.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act,
                embed_scale=float(np.sqrt(D)) if cfg.scale_embedding else 1.0)
    return Decoder(arch, E, layers, ln(P + "layer_norm"), head, pos_embed=pos)


Config = BioGptConfig
