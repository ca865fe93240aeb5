"""BERT (bge, e5, MiniLM): the encoder of the embedding models (issue 35), family kind "encoder". Learned absolute
positions plus a token-type embedding (every text is one segment, type 0: its row is folded into the position
table at load), a LayerNorm of the embeddings, then post-LN blocks over bidirectional attention:
x = LN(x + attn(x)), x = LN(x + W2 gelu(W1 x + b1) + b2), biases everywhere, no final norm. The output is the last
block's states (`last_hidden_state`); sentence-transformers' pooling turns them into a text's vector
(petit/embedding.py). BertModel's own pooler (a dense + tanh of the [CLS] state) is not what sentence-transformers
reads, and is left unread on purpose. Checkpoints saved from BertModel have no prefix; those of the task models
(BertForMaskedLM ...) have `bert.`."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

KIND = "encoder"
TYPED = "embeddings.position_embeddings.typed"     # positions + token type 0, made at load (hf_tensors)
# checkpoint tensors the loader does not report as unused: BertModel's pooler (see above), and the buffers older
# transformers saved (the position ids 0..n-1 and zero token types Petit computes itself)
UNREAD = ("pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids", "embeddings.token_type_ids")


@dataclass
class BertConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    position_embedding_type: str = "absolute"
    tie_word_embeddings: bool = True
    model_type: str = "bert"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    _IGNORED = frozenset({"gradient_checkpointing", "classifier_dropout"})

    @classmethod
    def _refuse(cls, d: dict) -> None:
        for key, what in (("is_decoder", "a causal BERT (BertLMHeadModel)"),
                          ("add_cross_attention", "cross-attention to an encoder's states")):
            if d.get(key):
                raise ValueError(f"config: {key} true ({what}) is not supported: Petit runs BERT as the "
                                 f"bidirectional encoder of an embedding model")

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size")
        positive_number(self, "layer_norm_eps")
        if self.position_embedding_type != "absolute":
            raise ValueError(f"config: position_embedding_type {self.position_embedding_type!r} is not supported by "
                             f"the bert family (only 'absolute')")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}")
        self.act = activation(self, "hidden_act", "bert")


def _prefix(names, stem: str = "bert.") -> str:
    return stem if stem + "embeddings.word_embeddings.weight" in names else ""


def hf_tensors(cfg: BertConfig, ckpt, stem: str = "bert.", first: int = 0) -> dict:
    """The position table from its row `first` on (RoBERTa's positions start past its padding id), token type 0's
    row added to every row."""
    P = _prefix(set(ckpt.names()), stem)
    pos, types = P + "embeddings.position_embeddings.weight", P + "embeddings.token_type_embeddings.weight"
    if pos not in ckpt or types not in ckpt:
        return {}                          # reported as missing by build
    return {P + TYPED: ((cfg.max_position_embeddings - first, cfg.hidden_size),
                        lambda: ckpt.f32(pos)[first:] + ckpt.f32(types)[0], (pos, types))}


def layer_norm(t, name: str, D: int, eps: float) -> Norm:
    return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))


def blocks(t, P: str, cfg, bidirectional: bool = True) -> list:
    """BERT's post-LN blocks under `P` + encoder.layer.N. (biases everywhere); bidirectional False: the same blocks
    under a causal mask (issue 36: GIT's text decoder)."""
    D, F, eps = cfg.hidden_size, cfg.intermediate_size, cfg.layer_norm_eps
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"{P}encoder.layer.{i}."
        a = p + "attention.self."
        L = Layer(q=t.weight(a + "query.weight", (D, D)), k=t.weight(a + "key.weight", (D, D)),
                  v=t.weight(a + "value.weight", (D, D)), o=t.weight(p + "attention.output.dense.weight", (D, D)),
                  up=t.weight(p + "intermediate.dense.weight", (F, D)),
                  down=t.weight(p + "output.dense.weight", (D, F)), rope=None, bidirectional=bidirectional)
        L.q_b, L.k_b, L.v_b = (t.vec(a + n + ".bias", (D,)) for n in ("query", "key", "value"))
        L.o_b = t.vec(p + "attention.output.dense.bias", (D,))
        L.up_b, L.down_b = t.vec(p + "intermediate.dense.bias", (F,)), t.vec(p + "output.dense.bias", (D,))
        L.resid_attn_norm = layer_norm(t, p + "attention.output.LayerNorm", D, eps)
        L.resid_mlp_norm = layer_norm(t, p + "output.LayerNorm", D, eps)
        layers.append(L)
    return layers


def build(cfg: BertConfig, t, stem: str = "bert.", first: int = 0):
    D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads
    P, n_pos = _prefix(t.names(), stem), cfg.max_position_embeddings - first
    E = t.weight(P + "embeddings.word_embeddings.weight", (cfg.vocab_size, D))
    pos = t.array(P + TYPED, (n_pos, D))
    layers = blocks(t, P, cfg)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=n_pos, act=cfg.act)
    # no LM head: the word embedding stands in the Decoder's head slot, never run (an encoder's Model refuses logits)
    return Decoder(arch, E, layers, None, E, pos_embed=pos,
                   embed_norm=layer_norm(t, P + "embeddings.LayerNorm", D, cfg.layer_norm_eps))


Config = BertConfig
