"""GPT-2: learned absolute positions (`wpe`), LayerNorm with bias, fused q|k|v (`c_attn`), GELU MLP, biases
everywhere, tied LM head. The checkpoint stores Conv1D weights as [in, out]; they are transposed to [out, in] and
c_attn is split into q, k and v when read, under the names `attn.q_proj` / `k_proj` / `v_proj`."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "transformer."


@dataclass
class GPT2Config(ConfigMixin):
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_positions: int = 1024
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    reorder_and_upcast_attn: bool = False
    tie_word_embeddings: bool = True
    model_type: str = "gpt2"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "n_embd", "n_layer", "n_head")
    _IGNORED = frozenset({"n_ctx"})

    def _validate(self):
        positive_int(self, "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                "tie_word_embeddings")
        if self.scale_attn_by_inverse_layer_idx:
            raise ValueError("config: scale_attn_by_inverse_layer_idx=true is not supported")
        if self.n_embd % self.n_head:
            raise ValueError(f"config: n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        self.n_inner = self.n_inner or 4 * self.n_embd
        positive_int(self, "n_inner")
        self.act = activation(self, "activation_function", "gpt2")

    # the names the rest of the engine reads
    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd


def _prefix(ckpt) -> str:
    """GPT2LMHeadModel saves `transformer.h.0...`; the original GPT2Model checkpoints `h.0...`."""
    return "" if "wte.weight" in ckpt and P + "wte.weight" not in ckpt else P


def hf_tensors(cfg: GPT2Config, ckpt) -> dict:
    D, F = cfg.n_embd, cfg.n_inner
    src = _prefix(ckpt)
    out = {}
    for name in ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"):
        if src + name in ckpt and src != P:
            out[P + name] = (ckpt.info(src + name)[1], lambda n=src + name: ckpt.f32(n), (src + name,))
    for i in range(cfg.n_layer):
        a, b = f"{src}h.{i}.", f"{P}h.{i}."
        w, bias = a + "attn.c_attn.weight", a + "attn.c_attn.bias"
        for j, part in enumerate(("q_proj", "k_proj", "v_proj")):
            out[b + f"attn.{part}.weight"] = ((D, D), lambda w=w, j=j: ckpt.f32(w)[:, j * D:(j + 1) * D].T, (w,))
            out[b + f"attn.{part}.bias"] = ((D,), lambda n=bias, j=j: ckpt.f32(n)[j * D:(j + 1) * D], (bias,))
        for name, shape in (("attn.c_proj", (D, D)), ("mlp.c_fc", (F, D)), ("mlp.c_proj", (D, F))):
            out[b + name + ".weight"] = (shape, lambda n=a + name + ".weight": ckpt.f32(n).T, (a + name + ".weight",))
            if src != P:
                out[b + name + ".bias"] = ((shape[0],), lambda n=a + name + ".bias": ckpt.f32(n), (a + name + ".bias",))
        if src != P:
            for name in ("ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias"):
                out[b + name] = ((D,), lambda n=a + name: ckpt.f32(n), (a + name,))
    return out


def build(cfg: GPT2Config, t):
    D, F, eps, H = cfg.n_embd, cfg.n_inner, cfg.layer_norm_epsilon, cfg.n_head

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    pos = t.array(P + "wpe.weight", (cfg.n_positions, D))
    layers = []
    for i in range(cfg.n_layer):
        p = f"{P}h.{i}."
        layers.append(Layer(
            q=t.weight(p + "attn.q_proj.weight", (D, D)), k=t.weight(p + "attn.k_proj.weight", (D, D)),
            v=t.weight(p + "attn.v_proj.weight", (D, D)), o=t.weight(p + "attn.c_proj.weight", (D, D)),
            q_b=t.vec(p + "attn.q_proj.bias", (D,)), k_b=t.vec(p + "attn.k_proj.bias", (D,)),
            v_b=t.vec(p + "attn.v_proj.bias", (D,)), o_b=t.vec(p + "attn.c_proj.bias", (D,)),
            up=t.weight(p + "mlp.c_fc.weight", (F, D)), up_b=t.vec(p + "mlp.c_fc.bias", (F,)),
            down=t.weight(p + "mlp.c_proj.weight", (D, F)), down_b=t.vec(p + "mlp.c_proj.bias", (D,)),
            attn_norm=ln(p + "ln_1"), mlp_norm=ln(p + "ln_2"), rope=None))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
             num_key_value_heads=H, head_dim=D // H, context_length=cfg.n_positions, act=cfg.act,
             attn_scale=(D // H) ** -0.5 if cfg.scale_attn_weights else 1.0)
    return Decoder(a, E, layers, ln(P + "ln_f"), head, pos_embed=pos)


Config = GPT2Config
