"""The config of qwen3_next.py's family: its fields with transformers' names and defaults, and their checks."""
import warnings
from dataclasses import dataclass, field

from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing, sparse_layers


KINDS = ("linear_attention", "full_attention")


@dataclass(kw_only=True)
class Qwen3NextConfig(DecoderConfig):
    num_key_value_heads: int | None = 2
    head_dim: int | None = 256
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-6
    partial_rotary_factor: float = 0.25
    attention_bias: bool = False
    layer_types: list | None = None
    full_attention_interval: int = 4
    linear_conv_kernel_dim: int = 4
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    num_experts: int = 512
    num_experts_per_tok: int = 10
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    decoder_sparse_step: int = 1
    mlp_only_layers: list = field(default_factory=list)
    norm_topk_prob: bool = True
    model_type: str = "qwen3_next"
    _IGNORED = MOE_TRAINING_ONLY
    _KINDS = KINDS
    _NOT_READ = ()                  # Qwen3-Next's keys a family built on it does not read: reported, then dropped
    _NOT_READ_WHY = ""

    @classmethod
    def from_dict(cls, d):
        extra = sorted(k for k in cls._NOT_READ if k in d) if isinstance(d, dict) else []
        if not extra:
            return super().from_dict(d)
        warnings.warn(f"config: ignoring unknown key(s) {', '.join(extra)} ({cls._NOT_READ_WHY})", stacklevel=3)
        cfg = super().from_dict({k: v for k, v in d.items() if k not in cls._NOT_READ})
        cfg.unknown_keys = sorted(cfg.unknown_keys + extra)
        return cfg

    def to_dict(self) -> dict:
        d = super().to_dict()
        for k in self._NOT_READ:
            d.pop(k, None)
        return d

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), cls.model_type, "silu")
        if d.get("attention_bias"):
            raise ValueError(f"config: attention_bias=true is not supported by the {cls.model_type} family")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor"), ("tie_word_embeddings",))
        positive_int(self, "full_attention_interval", "linear_conv_kernel_dim", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(f"config: linear_num_value_heads {self.linear_num_value_heads} is not a multiple of "
                             f"linear_num_key_heads {self.linear_num_key_heads}")
        n, kinds = self.num_hidden_layers, self._KINDS
        self.types = self.layer_types or [self._default_type(i) for i in range(n)]
        if len(self.types) != n or any(k not in kinds for k in self.types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(kinds)}, got {self.types!r}")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)
        self.sparse = self._sparse()

    def _default_type(self, i: int) -> str:
        return "full_attention" if (i + 1) % self.full_attention_interval == 0 else "linear_attention"

    def _sparse(self) -> list:
        check_routing(self)
        return sparse_layers(self)
