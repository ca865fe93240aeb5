"""NomicBERT (`nomic_bert`, NomicBertModel in transformers 5.25: nomic-embed-text v1 / v1.5): the encoder of
embedding models (issue 35), family kind "encoder". BERT's post-LN blocks (petit/models/families/encoders/bert.py) with
three changes:

- no position table: RoPE on q and k (halves rotated, base rope_theta, 1000 by default), so a text is limited only
  by max_position_embeddings;
- a SwiGLU MLP, down(act(gate x) * up x) (hidden_act silu);
- no biases in the attention and MLP products (the LayerNorms keep theirs).
The embedding is word + token type 0, LayerNorm-ed (`emb_ln`): type 0's row is folded into the word embedding at
load (`embeddings.word_embeddings.typed`). Tensors under the released names, which transformers 5.25 also saves
(its conversion mapping): `encoder.layers.N.attn.Wqkv` (q, k, v rows, split when read), `attn.out_proj`,
`mlp.fc11` (up) / `fc12` (gate, the activated one) / `fc2` (down), `norm1` after attention, `norm2` after the MLP.
A released folder's remote-code config keys (n_embd, n_head, rotary_emb_base ...) are not read by transformers 5.25
either: both run NomicBertConfig's defaults, which are nomic-embed-text v1.5's sizes, and Petit reports the keys."""
from dataclasses import dataclass, field

from petit.models.families.encoders.bert import UNREAD, layer_norm
from petit.models.blocks.config import ConfigMixin, activation, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.families.encoders.modernbert import split_qkv
from petit.models.blocks.rope import Rope

KIND = "encoder"
TYPED = "embeddings.word_embeddings.typed"     # word + token type 0, made at load (hf_tensors)
UNREAD = UNREAD


@dataclass
class NomicBertConfig(ConfigMixin):
    vocab_size: int = 30528
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    head_dim: int | None = None
    rope_theta: float = 1000.0
    rope_scaling: dict | None = None
    tie_word_embeddings: bool = True
    model_type: str = "nomic_bert"
    unknown_keys: list = field(default_factory=list, repr=False)

    _IGNORED = frozenset({"hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"})

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size")
        positive_number(self, "layer_norm_eps", "rope_theta")
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        positive_int(self, "head_dim")
        if self.head_dim % 2:
            raise ValueError(f"config: head_dim {self.head_dim} must be even (RoPE)")
        if self.rope_scaling:
            raise ValueError(f"config: rope_scaling {self.rope_scaling!r} is not supported by the nomic_bert family "
                             f"(no released checkpoint has one)")
        self.act = activation(self, "hidden_act", "nomic_bert")


def hf_tensors(cfg: NomicBertConfig, ckpt) -> dict:
    """word + token type 0; each Wqkv's rows as q_proj / k_proj / v_proj."""
    word, types = "embeddings.word_embeddings.weight", "embeddings.token_type_embeddings.weight"
    D, n = cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim
    out = {}
    if word in ckpt and types in ckpt:     # else reported as missing by build
        out[TYPED] = ((cfg.vocab_size, D), lambda: ckpt.f32(word) + ckpt.f32(types)[0], (word, types))
    for i in range(cfg.num_hidden_layers):
        src = f"encoder.layers.{i}.attn.Wqkv.weight"
        if src in ckpt:
            out.update(split_qkv(ckpt, src, f"encoder.layers.{i}.attn.", "weight", (n, D)))
    return out


def build(cfg: NomicBertConfig, t):
    D, F, H, hd = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads, cfg.head_dim
    eps = cfg.layer_norm_eps
    rope = Rope(hd, cfg.rope_theta, None, cfg.max_position_embeddings)
    E = t.weight(TYPED, (cfg.vocab_size, D))
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layers.{i}."
        a, m = p + "attn.", p + "mlp."
        L = Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (H * hd, D)),
                  v=t.weight(a + "v_proj.weight", (H * hd, D)), o=t.weight(a + "out_proj.weight", (D, H * hd)),
                  gate=t.weight(m + "fc12.weight", (F, D)), up=t.weight(m + "fc11.weight", (F, D)),
                  down=t.weight(m + "fc2.weight", (D, F)), rope=rope, bidirectional=True)
        L.resid_attn_norm = layer_norm(t, p + "norm1", D, eps)
        L.resid_mlp_norm = layer_norm(t, p + "norm2", D, eps)
        layers.append(L)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=hd, context_length=cfg.max_position_embeddings, act=cfg.act)
    # no LM head: the word embedding stands in the Decoder's head slot, never run (an encoder's Model refuses logits)
    return Decoder(arch, E, layers, None, E, embed_norm=layer_norm(t, "emb_ln", D, eps))


Config = NomicBertConfig
