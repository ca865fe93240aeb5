"""MPT (MosaicML), as transformers runs it: ALiBi always (MPT's slopes, `attn_config.alibi_bias_max`), a fused
`Wqkv` ([q | k | v] rows, split when read) clamped to +-`attn_config.clip_qkv` when set, the scores scaled by
`attn_config.softmax_scale` (default head_dim^-1/2), LayerNorms with a weight and no bias, an MLP of 4 x d_model
with the exact GELU, no biases anywhere (`no_bias`), tied head. transformers ignores `learned_pos_emb` (MPT's
checkpoints use ALiBi) and so does Petit."""
from dataclasses import dataclass, field

from petit.models.blocks.alibi import mpt_slopes
from petit.models.blocks.config import ConfigMixin, boolean, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec

P = "transformer."
ATTN_KEYS = {"alibi", "alibi_bias_max", "clip_qkv", "softmax_scale", "attn_type", "attn_pdrop", "attn_impl",
             "prefix_lm", "qk_ln", "attn_uses_sequence_id", "model_type"}   # model_type: its own config class


@dataclass
class MptConfig(ConfigMixin):
    vocab_size: int
    d_model: int
    n_heads: int
    n_layers: int
    expansion_ratio: int = 4
    max_seq_len: int = 2048
    layer_norm_epsilon: float = 1e-5
    no_bias: bool = True
    attn_config: dict | None = None
    tie_word_embeddings: bool = True
    model_type: str = "mpt"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "d_model", "n_heads", "n_layers")
    _IGNORED = frozenset({"emb_pdrop", "init_device", "verbose", "norm_type", "learned_pos_emb", "init_config",
                          "embedding_fraction", "logit_scale"})

    @classmethod
    def _refuse(cls, d):
        a = d.get("attn_config") or {}
        if not isinstance(a, dict):
            raise ValueError(f"config: attn_config must be an object, got {a!r}")
        unknown = sorted(set(a) - ATTN_KEYS)
        if unknown:
            raise ValueError(f"config: attn_config: unsupported key(s) {', '.join(unknown)}")
        for key, runs in (("alibi", True), ("prefix_lm", False), ("qk_ln", False), ("attn_uses_sequence_id", False),
                          ("attn_type", "multihead_attention")):
            if key in a and a[key] is not None and a[key] != runs:
                raise ValueError(f"config: attn_config.{key}={a[key]!r} is not supported by the mpt family "
                                 f"(transformers runs {key}={runs})")
        if d.get("logit_scale") not in (None, 1, 1.0):
            raise ValueError(f"config: logit_scale {d['logit_scale']!r} is not supported by the mpt family")
        if d.get("norm_type", "low_precision_layernorm") not in ("low_precision_layernorm", "layernorm"):
            raise ValueError(f"config: norm_type {d['norm_type']!r} is not supported by the mpt family")

    def _validate(self):
        positive_int(self, "vocab_size", "d_model", "n_heads", "n_layers", "max_seq_len")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "no_bias", "tie_word_embeddings")
        if not self.no_bias:
            raise ValueError("config: no_bias=false is not supported (transformers' MPT has no biases)")
        if self.expansion_ratio != 4:
            raise ValueError(f"config: expansion_ratio {self.expansion_ratio!r}: transformers' MPT builds an MLP of "
                             f"4 x d_model whatever it says, so only 4 is supported")
        if self.d_model % self.n_heads:
            raise ValueError(f"config: d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        a = self.attn_config or {}
        self.head_dim = self.d_model // self.n_heads
        self.clip = float(a.get("clip_qkv") or 0.0)
        self.scale = float(a["softmax_scale"]) if a.get("softmax_scale") else self.head_dim ** -0.5
        self.bias_max = float(a.get("alibi_bias_max", 8) or 8)

    @property
    def num_hidden_layers(self):
        return self.n_layers

    @property
    def hidden_size(self):
        return self.d_model


def hf_tensors(cfg: MptConfig, ckpt) -> dict:
    D = cfg.d_model
    out = {}
    for i in range(cfg.n_layers):
        a = f"{P}blocks.{i}.attn."
        w = a + "Wqkv.weight"
        if w in ckpt:
            for j, part in enumerate(("q_proj", "k_proj", "v_proj")):
                out[a + part + ".weight"] = ((D, D), lambda w=w, j=j: ckpt.f32(w)[j * D:(j + 1) * D], (w,))
    return out


def build(cfg: MptConfig, t):
    D, eps, H = cfg.d_model, cfg.layer_norm_epsilon, cfg.n_heads
    F = 4 * D

    def ln(name):
        return Norm("layer", eps, t.vec(name + ".weight", (D,)))

    E = t.weight(P + "wte.weight", (cfg.vocab_size, D))
    slopes = Vec(mpt_slopes(H, cfg.bias_max))
    layers = []
    for i in range(cfg.n_layers):
        p = f"{P}blocks.{i}."
        a, m = p + "attn.", p + "ffn."
        layers.append(Layer(
            q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
            v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
            up=t.weight(m + "up_proj.weight", (F, D)), down=t.weight(m + "down_proj.weight", (D, F)),
            attn_norm=ln(p + "norm_1"), mlp_norm=ln(p + "norm_2"), rope=None, alibi=slopes, clip=cfg.clip))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=cfg.head_dim, context_length=cfg.max_seq_len, act="gelu",
                attn_scale=cfg.scale)
    return Decoder(arch, E, layers, ln(P + "norm_f"), head)


Config = MptConfig
