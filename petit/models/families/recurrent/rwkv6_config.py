"""The config of rwkv6.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, positive_int, positive_number


@dataclass(kw_only=True)
class Rwkv6Config(ConfigMixin):
    vocab_size: int = 65536
    hidden_size: int = 768
    num_hidden_layers: int = 24
    attention_hidden_size: int | None = None
    head_size: int = 64
    head_size_divisor: int = 8
    intermediate_size: int | None = None
    layer_norm_epsilon: float = 1e-5
    rescale_every: int = 6
    tie_word_embeddings: bool = False
    num_attention_heads: int | None = None      # written by the Hub's configs: hidden_size / head_size
    # the LoRA widths: not in config.json; llama.cpp's converter takes 32 / 64, or 64 / 128 at hidden_size 4096
    time_mix_extra_dim: int | None = None
    time_decay_extra_dim: int | None = None
    # Petit's key, set by the GGUF reader: the output and value weights are already divided by 2^(layer //
    # rescale_every) (llama.cpp's converter), so their outputs are not scaled again
    rescaled_weights: bool = False
    # transformers sets no position limit (a recurrence); Petit's default cache size
    max_position_embeddings: int = 1048576
    model_type: str = "rwkv6"
    unknown_keys: list = field(default_factory=list, repr=False)

    _IGNORED = frozenset({"context_length"})

    def _validate(self):
        D = self.hidden_size
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "head_size", "head_size_divisor",
                     "max_position_embeddings")
        positive_number(self, "layer_norm_epsilon")
        if self.attention_hidden_size is None:
            self.attention_hidden_size = D
        if self.attention_hidden_size != D:
            raise ValueError(f"config: attention_hidden_size {self.attention_hidden_size} != hidden_size {D} is not "
                             f"supported (llama.cpp's graph assumes them equal; no released checkpoint differs)")
        if D % self.head_size:
            raise ValueError(f"config: hidden_size {D} is not divisible by head_size {self.head_size}")
        if self.num_attention_heads not in (None, D // self.head_size):
            raise ValueError(f"config: num_attention_heads {self.num_attention_heads} != hidden_size / head_size "
                             f"({D // self.head_size})")
        self.num_attention_heads = D // self.head_size
        if self.intermediate_size is None:
            self.intermediate_size = int((D * 3.5) // 32 * 32)
        if isinstance(self.rescale_every, bool) or not isinstance(self.rescale_every, int) or self.rescale_every < 0:
            raise ValueError(f"config: rescale_every must be a non-negative integer, got {self.rescale_every!r}")
        if self.tie_word_embeddings:
            raise ValueError("config: tie_word_embeddings true is not supported by the rwkv6 family (its head is "
                             "its own)")
        if self.time_mix_extra_dim is None:
            self.time_mix_extra_dim = 64 if D == 4096 else 32
        if self.time_decay_extra_dim is None:
            self.time_decay_extra_dim = 128 if D == 4096 else 64
