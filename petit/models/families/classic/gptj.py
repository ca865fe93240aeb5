"""GPT-J (EleutherAI): one LayerNorm (with bias) feeding attention and MLP in parallel (x + attn(ln(x)) +
mlp(ln(x))), RoPE on interleaved pairs (2i, 2i+1) of the first `rotary_dim` values of each head (base 10000, no
config key), q/k/v/out_proj without biases, a GELU MLP fc_in / fc_out with biases, an LM head with a bias."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec
from petit.models.blocks.rope import Rope

P = "transformer."


@dataclass
class GPTJConfig(ConfigMixin):
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_positions: int = 2048
    rotary_dim: int | None = 64
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = False
    model_type: str = "gptj"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "n_embd", "n_layer", "n_head")
    _IGNORED = frozenset({"n_ctx"})

    def _validate(self):
        positive_int(self, "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "tie_word_embeddings")
        if self.n_embd % self.n_head:
            raise ValueError(f"config: n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        self.head_dim = self.n_embd // self.n_head
        self.rotary_dim = self.rotary_dim or self.head_dim       # null: the whole head
        positive_int(self, "rotary_dim")
        if self.rotary_dim > self.head_dim or self.rotary_dim % 2:
            raise ValueError(f"config: rotary_dim {self.rotary_dim} must be even and at most the head size "
                             f"{self.head_dim}")
        self.n_inner = self.n_inner or 4 * self.n_embd
        positive_int(self, "n_inner")
        self.act = activation(self, "activation_function", self.model_type)

    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd


def build(cfg: GPTJConfig, t, qkv_names=("q_proj", "k_proj", "v_proj")) -> Decoder:
    D, F, eps, H = cfg.n_embd, cfg.n_inner, cfg.layer_norm_epsilon, cfg.n_head

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    rope = Rope(cfg.rotary_dim, 10000.0, None, cfg.n_positions, None, True)
    layers = []
    for i in range(cfg.n_layer):
        p = f"{P}h.{i}."
        a, m = p + "attn.", p + "mlp."
        q, k, v = (t.weight(a + n + ".weight", (D, D)) for n in qkv_names)
        layers.append(Layer(q=q, k=k, v=v, o=t.weight(a + "out_proj.weight", (D, D)),
                            up=t.weight(m + "fc_in.weight", (F, D)), up_b=t.vec(m + "fc_in.bias", (F,)),
                            down=t.weight(m + "fc_out.weight", (D, F)), down_b=t.vec(m + "fc_out.bias", (D,)),
                            attn_norm=ln(p + "ln_1"), rope=rope))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    head_b: Vec = t.vec("lm_head.bias", (cfg.vocab_size,))
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
             num_key_value_heads=H, head_dim=D // H, context_length=cfg.n_positions, act=cfg.act, parallel=True)
    return Decoder(a, E, layers, ln(P + "ln_f"), head, lm_head_b=head_b)


Config = GPTJConfig
