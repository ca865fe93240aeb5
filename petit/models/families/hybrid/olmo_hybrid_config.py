"""The config of olmo_hybrid.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, activation, boolean, check_decoder, positive_int


KINDS = ("linear_attention", "full_attention")


@dataclass(kw_only=True)
class OlmoHybridConfig(DecoderConfig):
    vocab_size: int = 100352
    hidden_size: int = 3840
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 30
    max_position_embeddings: int = 65536
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    layer_types: list | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int = 4
    linear_allow_neg_eigval: bool = True
    use_rope: bool = True                       # a Petit key: False when rope_parameters' rope_theta is null
    model_type: str = "olmo_hybrid"
    _REQUIRED = ()
    # initialisation ranges of A_log and dt_bias
    _IGNORED = frozenset({"linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max",
                          "linear_dt_init_floor"})

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        rp = d.get("rope_parameters")
        if isinstance(rp, dict) and "rope_theta" in rp and rp["rope_theta"] is None:
            d["use_rope"] = False                   # transformers builds no rotary embedding: NoPE everywhere
            d["rope_parameters"] = {k: v for k, v in rp.items() if k != "rope_theta"}
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias",
                                                              "linear_allow_neg_eigval", "use_rope"))
        self.act = activation(self, "hidden_act", "olmo_hybrid")
        if self.attention_bias:
            raise ValueError("config: attention_bias true is not supported by the olmo_hybrid family (transformers' "
                             "OLMo Hybrid attention has no biases)")
        n = self.num_hidden_layers
        if self.layer_types is None:               # OlmoHybridConfig's default: every fourth layer attends
            self.layer_types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
            if "full_attention" not in self.layer_types:
                self.layer_types[-1] = "full_attention"
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n \
                or any(t not in KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got "
                             f"{self.layer_types!r}")
        if self.linear_num_key_heads is None:
            self.linear_num_key_heads = self.num_attention_heads
        if self.linear_num_value_heads is None:
            self.linear_num_value_heads = self.num_attention_heads
        if self.linear_key_head_dim is None:
            self.linear_key_head_dim = int(0.75 * self.hidden_size / self.linear_num_key_heads)
        if self.linear_value_head_dim is None:
            self.linear_value_head_dim = 2 * self.linear_key_head_dim
        positive_int(self, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim")
        if self.linear_num_key_heads != self.linear_num_value_heads:
            raise ValueError(f"config: linear_num_key_heads {self.linear_num_key_heads} differs from "
                             f"linear_num_value_heads {self.linear_num_value_heads}: transformers' OLMo Hybrid repeats "
                             f"neither, so it cannot run such a checkpoint")
        boolean(self, "use_rope")
