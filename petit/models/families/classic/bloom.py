"""BLOOM (BigScience): a LayerNorm of the embeddings (`word_embeddings_layernorm`) before the first block, ALiBi in
place of positions (slopes by bloom_slopes, added to the already scaled scores: q.k / sqrt(d) + alibi), a fused
`query_key_value` stored per head ([q_h; k_h; v_h], split when read), LayerNorm with bias, a 4 x hidden MLP with the
tanh GELU, biases everywhere, tied head."""
from dataclasses import dataclass, field

from petit.models.families.classic import gpt_neox
from petit.models.blocks.alibi import bloom_slopes
from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec

P = "transformer."
CONTEXT = 2048      # BLOOM's training length; ALiBi sets no limit, the config gives none


@dataclass
class BloomConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    n_layer: int
    n_head: int
    layer_norm_epsilon: float = 1e-5
    apply_residual_connection_post_layernorm: bool = False
    tie_word_embeddings: bool = True
    model_type: str = "bloom"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "n_layer", "n_head")
    # tensor-parallel slicing of two products (the same sums in another order) and the training's dropouts
    _IGNORED = frozenset({"pretraining_tp", "slow_but_exact", "hidden_dropout", "masked_softmax_fusion",
                          "offset_alibi", "seq_length", "skip_bias_add", "skip_bias_add_qkv", "unk_token_id",
                          "attention_softmax_in_fp32", "n_inner"})

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and d.get("hidden_size") is None and "n_embed" in d:
            d = {("hidden_size" if k == "n_embed" else k): v for k, v in d.items()}
        return super().from_dict(d)

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "n_layer", "n_head")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "apply_residual_connection_post_layernorm", "tie_word_embeddings")
        if self.apply_residual_connection_post_layernorm:
            raise ValueError("config: apply_residual_connection_post_layernorm=true is not supported by the bloom "
                             "family")
        if self.hidden_size % self.n_head:
            raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by n_head {self.n_head}")
        # the names gpt_neox.split_qkv reads
        self.num_hidden_layers, self.num_attention_heads = self.n_layer, self.n_head
        self.head_dim = self.hidden_size // self.n_head


def hf_tensors(cfg: BloomConfig, ckpt) -> dict:
    return gpt_neox.split_qkv(cfg, ckpt, P + "h.{}.self_attention.")


def build(cfg: BloomConfig, t):
    D, eps, H, hd = cfg.hidden_size, cfg.layer_norm_epsilon, cfg.n_head, cfg.head_dim
    F = 4 * D

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(P + "word_embeddings.weight", (cfg.vocab_size, D))
    embed_norm = ln(P + "word_embeddings_layernorm")
    slopes = Vec(bloom_slopes(H))
    layers = []
    for i in range(cfg.n_layer):
        p = f"{P}h.{i}."
        a, m = p + "self_attention.", p + "mlp."
        layers.append(Layer(
            q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
            v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "dense.weight", (D, D)),
            q_b=t.vec(a + "q_proj.bias", (D,)), k_b=t.vec(a + "k_proj.bias", (D,)), v_b=t.vec(a + "v_proj.bias", (D,)),
            o_b=t.vec(a + "dense.bias", (D,)),
            up=t.weight(m + "dense_h_to_4h.weight", (F, D)), up_b=t.vec(m + "dense_h_to_4h.bias", (F,)),
            down=t.weight(m + "dense_4h_to_h.weight", (D, F)), down_b=t.vec(m + "dense_4h_to_h.bias", (D,)),
            attn_norm=ln(p + "input_layernorm"), mlp_norm=ln(p + "post_attention_layernorm"), rope=None,
            alibi=slopes))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=hd, context_length=CONTEXT, act="gelu_tanh")
    return Decoder(arch, E, layers, ln(P + "ln_f"), head, embed_norm=embed_norm)


Config = BloomConfig
