"""OPT (Meta): learned positions read at position + 2 (`embed_positions` has 2 more rows), LayerNorm with bias (eps
1e-5, no config key; without weights when `layer_norm_elementwise_affine` is false), a ReLU MLP fc1 / fc2, biases
everywhere (`enable_bias`), tied head. Pre-LN (`do_layer_norm_before`, every size but 350m): x + attn(ln(x)), then
x + mlp(ln(x)), then `final_layer_norm`; post-LN (OPT-350m): x = ln(x + attn(x)), x = ln(x + mlp(x)), no final
norm. When `word_embed_proj_dim` differs from hidden_size (OPT-350m), the embedding lookup is followed by
`project_in` and the head preceded by `project_out`: both are folded at load into the matrices they touch
(embedding @ project_in^T, head @ project_out, stored under the names below), one product fewer per step and the
same sums."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "model.decoder."
OFFSET = 2
EPS = 1e-5
EMBED_IN, HEAD_OUT = P + "embed_tokens.projected.weight", "lm_head.projected.weight"     # the folded matrices


@dataclass
class OPTConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    ffn_dim: int
    num_hidden_layers: int
    num_attention_heads: int
    max_position_embeddings: int = 2048
    do_layer_norm_before: bool = True
    _remove_final_layer_norm: bool = False
    word_embed_proj_dim: int | None = None
    activation_function: str = "relu"
    enable_bias: bool = True
    layer_norm_elementwise_affine: bool = True
    tie_word_embeddings: bool = True
    model_type: str = "opt"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "ffn_dim", "num_hidden_layers", "num_attention_heads")
    _IGNORED = frozenset({"dropout", "layerdrop", "init_std", "prefix"})

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "ffn_dim", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings")
        boolean(self, "do_layer_norm_before", "_remove_final_layer_norm", "enable_bias",
                "layer_norm_elementwise_affine", "tie_word_embeddings")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}")
        self.word_embed_proj_dim = self.word_embed_proj_dim or self.hidden_size
        positive_int(self, "word_embed_proj_dim")
        self.act = activation(self, "activation_function", "opt")
        self.projected = self.word_embed_proj_dim != self.hidden_size


def hf_tensors(cfg: OPTConfig, ckpt) -> dict:
    if not cfg.projected:
        return {}
    V, D = cfg.vocab_size, cfg.hidden_size
    E, pin, pout = P + "embed_tokens.weight", P + "project_in.weight", P + "project_out.weight"
    H = E if cfg.tie_word_embeddings else "lm_head.weight"
    return {EMBED_IN: ((V, D), lambda: (ckpt.f32(E).astype("float64") @ ckpt.f32(pin).T).astype("float32"), (E, pin)),
            HEAD_OUT: ((V, D), lambda: (ckpt.f32(H).astype("float64") @ ckpt.f32(pout)).astype("float32"), (H, pout))}


def build(cfg: OPTConfig, t):
    D, F, H = cfg.hidden_size, cfg.ffn_dim, cfg.num_attention_heads
    affine = cfg.layer_norm_elementwise_affine

    def ln(name):
        return Norm("layer", EPS, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,))) if affine else \
            Norm("layer", EPS)

    if cfg.projected:
        E, head = t.weight(EMBED_IN, (cfg.vocab_size, D)), t.weight(HEAD_OUT, (cfg.vocab_size, D))
    else:
        E = t.weight(P + "embed_tokens.weight", (cfg.vocab_size, D))
        head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    pos = t.array(P + "embed_positions.weight", (cfg.max_position_embeddings + OFFSET, D))[OFFSET:]
    b = cfg.enable_bias
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}layers.{i}."
        a = p + "self_attn."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
                  up=t.weight(p + "fc1.weight", (F, D)), down=t.weight(p + "fc2.weight", (D, F)), rope=None)
        if b:
            L.q_b, L.k_b, L.v_b, L.o_b = (t.vec(a + f"{n}.bias", (D,)) for n in ("q_proj", "k_proj", "v_proj",
                                                                                  "out_proj"))
            L.up_b, L.down_b = t.vec(p + "fc1.bias", (F,)), t.vec(p + "fc2.bias", (D,))
        if cfg.do_layer_norm_before:
            L.attn_norm, L.mlp_norm = ln(p + "self_attn_layer_norm"), ln(p + "final_layer_norm")
        else:
            L.resid_attn_norm, L.resid_mlp_norm = ln(p + "self_attn_layer_norm"), ln(p + "final_layer_norm")
        layers.append(L)
    final = ln(P + "final_layer_norm") if cfg.do_layer_norm_before and not cfg._remove_final_layer_norm else None
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act)
    return Decoder(arch, E, layers, final, head, pos_embed=pos)


Config = OPTConfig
