"""The config of recurrent_gemma.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.config import (ACT_NAMES, DecoderConfig, activation, check_decoder, positive_int,
                                 positive_number)


KINDS = ("recurrent", "attention")


@dataclass(kw_only=True)
class RecurrentGemmaConfig(DecoderConfig):
    num_hidden_layers: int = 26
    vocab_size: int = 256000
    hidden_size: int = 2560
    intermediate_size: int = 3 * 2560
    num_attention_heads: int = 10
    lru_width: int | None = None
    attention_window_size: int = 2048
    conv1d_width: int = 4
    logits_soft_cap: float = 30.0
    rms_norm_eps: float = 1e-6
    hidden_activation: str = "gelu_pytorch_tanh"
    block_types: list | None = None
    attention_bias: bool = False
    partial_rotary_factor: float = 0.5
    tie_word_embeddings: bool = True
    # transformers sets no position limit (a window and a recurrence); Petit's default cache size, the model card's
    # training length
    max_position_embeddings: int = 8192
    model_type: str = "recurrent_gemma"

    _REQUIRED = ()                  # transformers' defaults are recurrentgemma-2b's
    # initialisation scales (no effect on a forward), and transformers 4's flag that it never read (it always scales
    # the embeddings by sqrt(hidden_size))
    _IGNORED = frozenset({"w_init_variance_scale", "final_w_init_variance_scale", "embeddings_scale_by_sqrt_dim"})
    _ACT_KEY = "hidden_activation"

    @classmethod
    def _refuse(cls, d):
        # DecoderConfig's hidden_act is not RecurrentGemma's key (a .petit file writes its default, silu): another
        # value would otherwise be dropped without a word
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError(f"config: hidden_act {d['hidden_act']!r} is not read by the recurrent_gemma family: its "
                             f"activation is hidden_activation")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor"),
                      ("tie_word_embeddings", "attention_bias"))
        if self.lru_width is None:
            self.lru_width = self.hidden_size
        positive_int(self, "lru_width", "attention_window_size", "conv1d_width")
        if self.head_dim != self.hidden_size // self.num_attention_heads:
            raise ValueError(f"config: head_dim {self.head_dim} must be hidden_size / num_attention_heads "
                             f"({self.hidden_size // self.num_attention_heads}): transformers derives it so")
        if self.lru_width % self.num_attention_heads:
            raise ValueError(f"config: lru_width {self.lru_width} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads} (the RG-LRU's gate blocks)")
        if self.logits_soft_cap is not None:
            positive_number(self, "logits_soft_cap")
        if self.hidden_activation not in ACT_NAMES:
            activation(self, "hidden_activation", "recurrent_gemma")
        types = list(self.block_types) if self.block_types is not None else list(KINDS[:1] * 2 + KINDS[1:])
        if not types or any(t not in KINDS for t in types):
            raise ValueError(f"config: block_types must list values of {' / '.join(KINDS)}, got {self.block_types!r}")
        self.block_types = types
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)
        if self.rotary_dim < 2 or self.rotary_dim % 2:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor} of head_dim {self.head_dim} "
                             f"gives {self.rotary_dim} rotated values; RoPE needs an even number")

    def layer_kinds(self) -> list[str]:
        """transformers' layers_block_type: block_types cycled over the layers."""
        return [self.block_types[i % len(self.block_types)] for i in range(self.num_hidden_layers)]

    @property
    def act(self) -> str:
        return ACT_NAMES[self.hidden_activation]
