"""The config of mimo_v2_flash.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.common import layer_types, window_of
from petit.models.families.moe.mimo_release import read_release_keys
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class MiMoV2FlashConfig(DecoderConfig):
    vocab_size: int = 152576
    hidden_size: int = 4096
    intermediate_size: int = 16384
    num_hidden_layers: int = 48
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 4
    head_dim: int | None = 192
    v_head_dim: int = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float | None = None           # None: the release's layernorm_epsilon, else 1e-5
    rope_theta: float = 5000000.0
    rope_local_base_freq: float = 10000.0       # rope_parameters["sliding_attention"]["rope_theta"]
    partial_rotary_factor: float = 0.334        # transformers' default when rope_parameters leaves it out
    attention_bias: bool = False
    attention_value_scale: float | None = 0.707
    sliding_window: int | None = 129
    sliding_window_size: int | None = None      # the release's spelling: sliding_window = sliding_window_size + 1
    layer_types: list | None = None
    mlp_layer_types: list | None = None
    moe_intermediate_size: int = 2048
    n_routed_experts: int = 256
    num_experts_per_tok: int = 8
    routed_scaling_factor: float | None = 1.0
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    hybrid_layer_pattern: list | None = None    # these: the release's spelling (mimo_release.py)
    moe_layer_freq: list | None = None
    swa_num_key_value_heads: int | None = None
    swa_num_attention_heads: int | None = None
    swa_head_dim: int | None = None
    swa_v_head_dim: int | None = None
    add_swa_attention_sink_bias: bool | None = None
    add_full_attention_sink_bias: bool | None = None
    topk_method: str | None = None
    scoring_func: str | None = None
    n_shared_experts: int | None = None
    layernorm_epsilon: float | None = None
    model_type: str = "mimo_v2_flash"
    _ROPE_LOCAL_THETA = True
    _ROPE_ALIASES = {"swa_rope_theta": "rope_local_base_freq"}
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "mimo_v2_flash", "silu")

    def _validate(self):
        if self.routed_scaling_factor is None:      # the Hub's config.json stores null: 1.0, as transformers reads it
            self.routed_scaling_factor = 1.0
        if self.attention_value_scale is None:
            self.attention_value_scale = 1.0
        read_release_keys(self)
        if self.sliding_window_size is not None:
            positive_int(self, "sliding_window_size")
            self.sliding_window = self.sliding_window_size + 1
        check_decoder(self, ("rms_norm_eps", "rope_theta", "rope_local_base_freq", "partial_rotary_factor",
                             "routed_scaling_factor", "attention_value_scale"),
                      ("tie_word_embeddings", "attention_bias", "norm_topk_prob"))
        check_routing(self, "n_routed_experts")
        positive_int(self, "moe_intermediate_size", "n_group", "topk_group", "v_head_dim")
        if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
            raise ValueError(f"config: n_routed_experts {self.n_routed_experts} in n_group {self.n_group} groups, "
                             f"topk_group {self.topk_group}: the groups must be equal and topk_group at most n_group")
        if self.attention_bias:
            raise ValueError("config: attention_bias true is not supported by the mimo_v2_flash family (the release "
                             "has none)")
        if self.v_head_dim > self.head_dim:
            raise ValueError(f"config: v_head_dim {self.v_head_dim} wider than head_dim {self.head_dim} is not "
                             f"supported by the mimo_v2_flash family (its value heads are padded to head_dim)")
        self.types = layer_types(self, lambda i: "full_attention" if i == 0 or (i + 1) % 6 == 0
                                 else "sliding_attention")
        self.layer_types = self.types
        window_of(self, self.types)
        n, m = self.num_hidden_layers, self.mlp_layer_types
        if m is None:
            self.mlp_layer_types = ["dense"] + ["sparse"] * (n - 1)
        elif not isinstance(m, list) or len(m) != n or any(v not in ("dense", "sparse") for v in m):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got {m!r}")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)
        if self.rotary_dim < 2 or self.rotary_dim % 2:
            raise ValueError(f"config: int(head_dim {self.head_dim} x partial_rotary_factor "
                             f"{self.partial_rotary_factor}) = {self.rotary_dim} RoPE dims: must be even and >= 2")
        self.attention_value_scale = float(self.attention_value_scale)
        self.kv_heads = 2 * self.num_key_value_heads if "sliding_attention" in self.types else self.num_key_value_heads
        if self.num_attention_heads % self.kv_heads:
            raise ValueError(f"config: {self.num_attention_heads} query heads over {self.kv_heads} key / value heads "
                             f"(twice num_key_value_heads in the sliding layers): must divide")
