"""The config of rwkv7.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, positive_int, positive_number


def lora_rank(hidden: int, exponent: float, multiplier: float) -> int:
    """fla's (and llama.cpp's converter's) default LoRA width: a multiple of 32."""
    return max(1, round(hidden ** exponent * multiplier / 32)) * 32


@dataclass(kw_only=True)
class Rwkv7Config(ConfigMixin):
    vocab_size: int = 65536
    hidden_size: int = 2048
    num_hidden_layers: int = 24
    head_dim: int = 64
    num_heads: int | None = None
    intermediate_size: int | None = None
    hidden_ratio: float | None = 4.0
    norm_eps: float = 1e-5
    norm_bias: bool = True
    norm_first: bool = True
    hidden_act: str = "sqrelu"
    decay_low_rank_dim: int | None = None
    a_low_rank_dim: int | None = None
    v_low_rank_dim: int | None = None
    gate_low_rank_dim: int | None = None
    value_dim: list | int | None = None
    attn: dict | None = None
    tie_word_embeddings: bool = False
    # Petit's key, set by the GGUF reader: the group norm's eps as llama.cpp fixes it (64e-5), not head_dim x norm_eps
    group_norm_eps: float | None = None
    # fla sets max_position_embeddings (unused by a recurrence); Petit's default cache size, as llama.cpp's files say
    context_length: int = 1048576
    model_type: str = "rwkv7"
    unknown_keys: list = field(default_factory=list, repr=False)

    # fla's kernels and training switches: no effect on a float forward
    _IGNORED = frozenset({"attn_mode", "fuse_norm", "fuse_cross_entropy", "fuse_swiglu", "fuse_linear_cross_entropy",
                          "use_l2warp", "max_position_embeddings"})

    def _validate(self):
        D = self.hidden_size
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "head_dim", "context_length")
        positive_number(self, "norm_eps")
        if D % self.head_dim:
            raise ValueError(f"config: hidden_size {D} is not divisible by head_dim {self.head_dim}")
        if self.num_heads not in (None, D // self.head_dim):
            raise ValueError(f"config: num_heads {self.num_heads} != hidden_size / head_dim ({D // self.head_dim})")
        self.num_heads = D // self.head_dim
        if self.attn is not None:
            raise ValueError("config: attn (softmax-attention layers between the RWKV-7 ones) is not supported by the "
                             "rwkv7 family (llama.cpp's rwkv7 has none)")
        for name, want in (("norm_first", True), ("norm_bias", True)):
            if getattr(self, name) is not want:
                raise ValueError(f"config: {name} {getattr(self, name)!r} is not supported by the rwkv7 family "
                                 f"(llama.cpp's graph: LayerNorms with biases before each sublayer)")
        if self.hidden_act != "sqrelu":
            raise ValueError(f"config: hidden_act {self.hidden_act!r} is not supported by the rwkv7 family (sqrelu)")
        vd = self.value_dim
        if vd is not None and any(v != D for v in (vd if isinstance(vd, list) else [vd])):
            raise ValueError(f"config: value_dim {vd!r} other than hidden_size is not supported")
        if self.intermediate_size is None:
            self.intermediate_size = D * 4          # llama.cpp's converter
        positive_int(self, "intermediate_size")
        if self.tie_word_embeddings is not False and self.tie_word_embeddings is not True:
            raise ValueError(f"config: tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")
        for name, e, mult in (("decay_low_rank_dim", 0.5, 1.8), ("a_low_rank_dim", 0.5, 1.8),
                              ("v_low_rank_dim", 0.5, 1.3), ("gate_low_rank_dim", 0.8, 0.6)):
            if getattr(self, name) is None:
                setattr(self, name, lora_rank(D, e, mult))
