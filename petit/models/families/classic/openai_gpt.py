"""OpenAI GPT (GPT-1): learned absolute positions (`positions_embed`) added to the token embeddings, post-LN blocks
(n = ln_1(x + attn(x)), h = ln_2(n + mlp(n))), fused q|k|v (`c_attn`), an MLP c_fc -> afn -> c_proj, biases
everywhere, no final norm, tied LM head. Its `afn` "gelu" is the tanh approximation (transformers' gelu_new). The
checkpoint stores Conv1D weights as [in, out]; they are transposed to [out, in] and c_attn is split into q, k and v
when read, under the names `attn.q_proj` / `k_proj` / `v_proj`."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

P = "transformer."
ACTS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}     # modeling_openai's ACT_FNS


@dataclass
class OpenAIGPTConfig(ConfigMixin):
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_positions: int = 512
    afn: str = "gelu"
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = True
    model_type: str = "openai-gpt"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "n_embd", "n_layer", "n_head")
    # dropout rates (inference), the sequence-summary head of OpenAIGPTDoubleHeadsModel (not the LM), and the
    # released config's n_special / predict_special_tokens, which transformers reads nowhere (vocab_size sizes the
    # embedding)
    _IGNORED = frozenset({"n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
                          "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_special",
                          "predict_special_tokens"})

    def _validate(self):
        positive_int(self, "vocab_size", "n_embd", "n_layer", "n_head", "n_positions")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "tie_word_embeddings")
        if self.n_embd % self.n_head:
            raise ValueError(f"config: n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.afn not in ACTS:
            raise ValueError(f"config: afn {self.afn!r} is not supported by the openai-gpt family "
                             f"(supported: {', '.join(sorted(ACTS))})")
        self.act = ACTS[self.afn]

    # the names the rest of the engine reads
    @property
    def num_hidden_layers(self):
        return self.n_layer

    @property
    def hidden_size(self):
        return self.n_embd


def hf_tensors(cfg: OpenAIGPTConfig, ckpt) -> dict:
    D, F = cfg.n_embd, 4 * cfg.n_embd
    out = {}
    for i in range(cfg.n_layer):
        a = f"{P}h.{i}."
        w, bias = a + "attn.c_attn.weight", a + "attn.c_attn.bias"
        for j, part in enumerate(("q_proj", "k_proj", "v_proj")):
            out[a + f"attn.{part}.weight"] = ((D, D), lambda w=w, j=j: ckpt.f32(w)[:, j * D:(j + 1) * D].T, (w,))
            out[a + f"attn.{part}.bias"] = ((D,), lambda n=bias, j=j: ckpt.f32(n)[j * D:(j + 1) * D], (bias,))
        for name, shape in (("attn.c_proj", (D, D)), ("mlp.c_fc", (F, D)), ("mlp.c_proj", (D, F))):
            out[a + name + ".weight"] = (shape, lambda n=a + name + ".weight": ckpt.f32(n).T, (a + name + ".weight",))
    return out


def build(cfg: OpenAIGPTConfig, t):
    D, F, eps, H = cfg.n_embd, 4 * cfg.n_embd, cfg.layer_norm_epsilon, cfg.n_head

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "tokens_embed.weight", (cfg.vocab_size, D))
    pos = t.array(P + "positions_embed.weight", (cfg.n_positions, D))
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
            resid_attn_norm=ln(p + "ln_1"), resid_mlp_norm=ln(p + "ln_2"), rope=None))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    a = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
             num_key_value_heads=H, head_dim=D // H, context_length=cfg.n_positions, act=cfg.act)
    return Decoder(a, E, layers, None, head, pos_embed=pos)


Config = OpenAIGPTConfig
