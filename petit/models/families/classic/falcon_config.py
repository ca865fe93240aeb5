"""The config of falcon.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, activation, boolean, positive_int, positive_number


@dataclass
class FalconConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_kv_heads: int | None = None
    ffn_hidden_size: int | None = None
    activation: str = "gelu"
    layer_norm_epsilon: float = 1e-5
    alibi: bool = False
    new_decoder_architecture: bool = False
    multi_query: bool = True
    parallel_attn: bool = True
    num_ln_in_parallel_attn: int | None = None
    bias: bool = False
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    tie_word_embeddings: bool = True
    model_type: str = "falcon"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
    _IGNORED = frozenset({"hidden_dropout"})
    _ALIASES = {"n_embed": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):         # the first Falcon configs' names (transformers maps them too)
            d = {cls._ALIASES.get(k, k): v for k, v in d.items() if not (k in cls._ALIASES and
                                                                         d.get(cls._ALIASES[k]) is not None)}
        return super().from_dict(d)

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings")
        positive_number(self, "layer_norm_epsilon", "rope_theta")
        boolean(self, "alibi", "new_decoder_architecture", "multi_query", "parallel_attn", "bias",
                "tie_word_embeddings")
        H, D = self.num_attention_heads, self.hidden_size
        if D % H:
            raise ValueError(f"config: hidden_size {D} is not divisible by num_attention_heads {H}")
        self.head_dim = D // H
        if self.new_decoder_architecture:
            self.kv_heads = self.num_kv_heads or H
            if self.num_ln_in_parallel_attn is None:
                self.num_ln_in_parallel_attn = 2
            if not self.parallel_attn:
                raise ValueError("config: new_decoder_architecture with parallel_attn false does not run in "
                                 "transformers either (its block has no norm for that case)")
            if self.num_ln_in_parallel_attn not in (1, 2):
                raise ValueError(f"config: num_ln_in_parallel_attn must be 1 or 2, got "
                                 f"{self.num_ln_in_parallel_attn!r}")
        else:
            self.kv_heads = 1 if self.multi_query else H
        positive_int(self, "kv_heads")
        if H % self.kv_heads:
            raise ValueError(f"config: num_attention_heads {H} is not divisible by num_kv_heads {self.kv_heads}")
        self.ffn_hidden_size = self.ffn_hidden_size or 4 * D
        positive_int(self, "ffn_hidden_size")
        self.act = activation(self, "activation", "falcon")
        from petit.models.blocks.rope import scaling_type
        scaling_type(self.rope_scaling)

    def qkv_rows(self):
        """(q, k, v) row indices of the fused matrix, each a list over heads of (start, stop) ranges."""
        H, KV, hd = self.num_attention_heads, self.kv_heads, self.head_dim
        if self.new_decoder_architecture:
            g = H // KV
            q = [((k * (g + 2) + j) * hd, (k * (g + 2) + j + 1) * hd) for k in range(KV) for j in range(g)]
            k = [((k * (g + 2) + g) * hd, (k * (g + 2) + g + 1) * hd) for k in range(KV)]
            v = [((k * (g + 2) + g + 1) * hd, (k * (g + 2) + g + 2) * hd) for k in range(KV)]
        elif self.multi_query:
            q, k, v = [(0, H * hd)], [(H * hd, (H + 1) * hd)], [((H + 1) * hd, (H + 2) * hd)]
        else:
            q, k, v = ([((3 * h + j) * hd, (3 * h + j + 1) * hd) for h in range(H)] for j in range(3))
        return q, k, v
