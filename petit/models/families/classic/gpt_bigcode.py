"""GPT-BigCode (StarCoder 1, SantaCoder): GPT-2's block (learned positions, LayerNorm with bias, GELU MLP, biases
everywhere, tied head) with nn.Linear weights and, with `multi_query`, one key / value head for all query heads:
`c_attn` rows are [q (hidden) | k (head_dim) | v (head_dim)]; without it, per head [q_h; k_h; v_h]. c_attn is split
into q, k and v when read."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "transformer."


@dataclass
class GPTBigCodeConfig(ConfigMixin):
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_positions: int = 1024
    n_inner: int | None = None
    activation_function: str = "gelu_pytorch_tanh"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    multi_query: bool = True
    num_key_value_heads: int | None = None      # written by transformers: 1 with multi_query, else n_head
    tie_word_embeddings: bool = True
    model_type: str = "gpt_bigcode"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "n_embd", "n_layer", "n_head")
    # the softmax's precision switches: Petit computes scores and softmax in float32 either way
    _IGNORED = frozenset({"n_ctx", "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32"})

    def _validate(self):
        positive_int(self, "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "scale_attn_weights", "multi_query", "tie_word_embeddings")
        if self.n_embd % self.n_head:
            raise ValueError(f"config: n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        self.head_dim = self.n_embd // self.n_head
        self.kv_heads = 1 if self.multi_query else self.n_head
        if self.num_key_value_heads not in (None, self.kv_heads):
            raise ValueError(f"config: num_key_value_heads {self.num_key_value_heads!r} disagrees with multi_query "
                             f"{self.multi_query} ({self.kv_heads} key / value heads)")
        self.n_inner = self.n_inner or 4 * self.n_embd
        positive_int(self, "n_inner")
        self.act = activation(self, "activation_function", "gpt_bigcode")

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd


def hf_tensors(cfg: GPTBigCodeConfig, ckpt) -> dict:
    D, hd, H = cfg.n_embd, cfg.head_dim, cfg.n_head
    kv = cfg.kv_heads * hd
    out = {}
    for i in range(cfg.n_layer):
        a = f"{P}h.{i}.attn."
        for kind, src in (("weight", a + "c_attn.weight"), ("bias", a + "c_attn.bias")):
            if src not in ckpt:
                continue
            for j, part, width in ((0, "q_proj", D), (1, "k_proj", kv), (2, "v_proj", kv)):
                shape = (width, D) if kind == "weight" else (width,)
                if cfg.multi_query:
                    r0 = (0, D, D + kv)[j]
                    make = lambda s=src, r0=r0, n=width: ckpt.f32(s)[r0:r0 + n]
                else:
                    make = lambda s=src, j=j, shape=shape: ckpt.f32(s).reshape(H, 3, hd, -1)[:, j].reshape(shape)
                out[a + f"{part}.{kind}"] = (shape, make, (src,))
    return out


def build(cfg: GPTBigCodeConfig, t):
    D, F, eps, H, kv = cfg.n_embd, cfg.n_inner, cfg.layer_norm_epsilon, cfg.n_head, cfg.kv_heads * cfg.head_dim

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    pos = t.array(P + "wpe.weight", (cfg.n_positions, D))
    layers = []
    for i in range(cfg.n_layer):
        p = f"{P}h.{i}."
        a, m = p + "attn.", p + "mlp."
        layers.append(Layer(
            q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (kv, D)),
            v=t.weight(a + "v_proj.weight", (kv, D)), o=t.weight(a + "c_proj.weight", (D, D)),
            q_b=t.vec(a + "q_proj.bias", (D,)), k_b=t.vec(a + "k_proj.bias", (kv,)),
            v_b=t.vec(a + "v_proj.bias", (kv,)), o_b=t.vec(a + "c_proj.bias", (D,)),
            up=t.weight(m + "c_fc.weight", (F, D)), up_b=t.vec(m + "c_fc.bias", (F,)),
            down=t.weight(m + "c_proj.weight", (D, F)), down_b=t.vec(m + "c_proj.bias", (D,)),
            attn_norm=ln(p + "ln_1"), mlp_norm=ln(p + "ln_2"), rope=None))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
             num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_dim, context_length=cfg.n_positions, act=cfg.act,
             attn_scale=cfg.head_dim ** -0.5 if cfg.scale_attn_weights else 1.0)
    return Decoder(a, E, layers, ln(P + "ln_f"), head, pos_embed=pos)


Config = GPTBigCodeConfig
