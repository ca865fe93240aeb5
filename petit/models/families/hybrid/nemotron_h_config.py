"""The config of nemotron_h.py's family: its fields with transformers' names and defaults, and their checks."""
import math
from dataclasses import dataclass, field

from petit.models.blocks.config import ConfigMixin, boolean, heads, positive_int, positive_number


KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
NAMES = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}


@dataclass(kw_only=True)
class NemotronHConfig(ConfigMixin):
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    hybrid_override_pattern: str | None = None
    layers_block_type: list | None = None
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    intermediate_size: int = 21504
    mlp_hidden_act: str = "relu2"
    mamba_num_heads: int = 128
    mamba_head_dim: int = 64
    ssm_state_size: int = 128
    n_groups: int = 8
    conv_kernel: int = 4
    use_conv_bias: bool = True
    mamba_hidden_act: str = "silu"
    mamba_proj_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    layer_norm_epsilon: float = 1e-5
    time_step_limit: list = field(default_factory=lambda: [0.0, math.inf])
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    # issue 30, the moe_b group: the routed-expert blocks (E)
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 7688
    moe_shared_expert_intermediate_size: int = 7688
    moe_latent_size: int | None = None
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    model_type: str = "nemotron_h"
    unknown_keys: list = field(default_factory=list, repr=False)
    _REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers")
    # the scan's chunk; training and initialisation settings; how the MoE blocks' shared expert is scheduled
    # (moe_shared_expert_overlap) and its count (the model reads moe_shared_expert_intermediate_size only); the
    # multi-token-prediction layers (not run)
    _IGNORED = frozenset({
        "chunk_size", "expand", "hidden_dropout", "residual_in_fp32", "rescale_prenorm_residual", "time_step_min",
        "time_step_max", "time_step_floor", "use_mamba_kernels", "mamba_ssm_cache_dtype", "num_logits_to_keep",
        "use_bias", "sliding_window", "moe_shared_expert_overlap", "mtp_layers_block_type", "n_shared_experts",
        "num_nextn_predict_layers", "output_router_logits", "mamba_chunk_size"})

    @classmethod
    def from_dict(cls, d: dict):
        """transformers 5.25 writes no num_hidden_layers for nemotron_h (it is the length of layers_block_type there):
        taken from the block pattern when absent."""
        if isinstance(d, dict) and d.get("num_hidden_layers") is None:
            blocks = d.get("hybrid_override_pattern") or d.get("layers_block_type")
            if isinstance(blocks, (str, list)) and blocks:
                d = dict(d, num_hidden_layers=len(blocks))
        return super().from_dict(d)

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "mamba_num_heads",
                     "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "max_position_embeddings")
        positive_number(self, "layer_norm_epsilon")
        boolean(self, "use_conv_bias", "mamba_proj_bias", "attention_bias", "mlp_bias", "tie_word_embeddings")
        heads(self)
        if self.hybrid_override_pattern is not None:
            pattern = list(self.hybrid_override_pattern)
        elif self.layers_block_type is not None:
            pattern = [NAMES.get(k, "?") for k in self.layers_block_type]
        else:
            raise ValueError("config: hybrid_override_pattern (or layers_block_type) is missing")
        if len(pattern) != self.num_hidden_layers or any(k not in KINDS for k in pattern):
            raise ValueError(f"config: the block pattern {''.join(pattern)!r} must give {self.num_hidden_layers} "
                             f"blocks of M, *, - or E")
        if "E" in pattern:
            from petit.models.blocks.moe_config import check_routing
            check_routing(self, "n_routed_experts")
            positive_int(self, "moe_intermediate_size", "moe_shared_expert_intermediate_size", "n_group",
                         "topk_group")
            positive_number(self, "routed_scaling_factor")
            boolean(self, "norm_topk_prob")
            if self.moe_latent_size is not None:
                raise ValueError(f"config: moe_latent_size {self.moe_latent_size!r} (latent projections around the "
                                 f"experts) is not supported by the nemotron_h family (only null)")
            if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
                raise ValueError(f"config: n_routed_experts {self.n_routed_experts} in n_group {self.n_group} "
                                 f"groups, topk_group {self.topk_group}: the groups must be equal and topk_group at "
                                 f"most n_group")
        for key, want in (("mlp_hidden_act", "relu2"), ("mamba_hidden_act", "silu")):
            if getattr(self, key) != want:
                raise ValueError(f"config: {key} {getattr(self, key)!r} is not supported (supported: {want})")
        for key in ("mamba_proj_bias", "attention_bias", "mlp_bias"):
            if getattr(self, key):
                raise ValueError(f"config: {key}=true is not supported by the nemotron_h family")
        if self.mamba_num_heads % self.n_groups:
            raise ValueError(f"config: mamba_num_heads {self.mamba_num_heads} is not a multiple of n_groups "
                             f"{self.n_groups}")
        lim = self.time_step_limit
        if isinstance(lim, (list, tuple)) and len(lim) == 2 and lim[1] is None:
            lim = self.time_step_limit = [lim[0], math.inf]
        if not (isinstance(lim, (list, tuple)) and len(lim) == 2 and all(isinstance(v, (int, float)) for v in lim)
                and 0 <= lim[0] <= lim[1]):
            raise ValueError(f"config: time_step_limit must be [low, high] with 0 <= low <= high, got {lim!r}")
        self.kinds = [KINDS[k] for k in pattern]

    def to_dict(self) -> dict:
        d = super().to_dict()
        if math.isinf(d["time_step_limit"][1]):       # strict JSON (a .petit file's) has no Infinity: null
            d["time_step_limit"] = [d["time_step_limit"][0], None]
        return d
