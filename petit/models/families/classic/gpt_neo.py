"""GPT-Neo (EleutherAI): GPT-2's block (learned positions, LayerNorm with bias, GELU MLP c_fc / c_proj with
biases, tied head) with nn.Linear weights, q/k/v without biases and out_proj with one, attention scores NOT scaled
by head_dim^-1/2, and local layers (`attention_layers`, else `attention_types` expanded as [[kinds, n], ...] ->
kinds * n, as transformers reads them) whose query sees itself and the `window_size - 1` positions before it."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "transformer."
KINDS = ("global", "local")


def _default_types():
    return [[["global", "local"], 12]]


@dataclass
class GPTNeoConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    max_position_embeddings: int = 2048
    attention_types: list = field(default_factory=_default_types)
    attention_layers: list | None = None        # saved beside attention_types, and read in its place when given
    window_size: int = 256
    intermediate_size: int | None = None
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = True
    model_type: str = "gpt_neo"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "num_layers", "num_heads")
    _IGNORED = frozenset({"embed_dropout", "resid_dropout"})

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_layers", "num_heads", "max_position_embeddings",
                     "window_size")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "tie_word_embeddings")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        try:
            self.layer_kinds = list(self.attention_layers) if self.attention_layers is not None else \
                [k for kinds, n in self.attention_types for _ in range(n) for k in kinds]
        except (TypeError, ValueError):
            raise ValueError(f"config: attention_types must be [[kinds, repeat], ...], got "
                             f"{self.attention_types!r}") from None
        if len(self.layer_kinds) != self.num_layers or any(k not in KINDS for k in self.layer_kinds):
            raise ValueError(f"config: attention_types gives {self.layer_kinds!r}, expected {self.num_layers} of "
                             f"{' / '.join(KINDS)}")
        self.intermediate_size = self.intermediate_size or 4 * self.hidden_size
        positive_int(self, "intermediate_size")
        self.act = activation(self, "activation_function", "gpt_neo")

    @property
    def num_hidden_layers(self):
        return self.num_layers


def build(cfg: GPTNeoConfig, t):
    D, F, eps, H = cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_epsilon, cfg.num_heads

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    pos = t.array(P + "wpe.weight", (cfg.max_position_embeddings, D))
    layers = []
    for i in range(cfg.num_layers):
        p = f"{P}h.{i}."
        a, m = p + "attn.attention.", p + "mlp."
        layers.append(Layer(
            q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
            v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
            o_b=t.vec(a + "out_proj.bias", (D,)),
            up=t.weight(m + "c_fc.weight", (F, D)), up_b=t.vec(m + "c_fc.bias", (F,)),
            down=t.weight(m + "c_proj.weight", (D, F)), down_b=t.vec(m + "c_proj.bias", (D,)),
            attn_norm=ln(p + "ln_1"), mlp_norm=ln(p + "ln_2"), rope=None,
            window=cfg.window_size if cfg.layer_kinds[i] == "local" else 0))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
             num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act,
             attn_scale=1.0)
    return Decoder(a, E, layers, ln(P + "ln_f"), head, pos_embed=pos)


Config = GPTNeoConfig
