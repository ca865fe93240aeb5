"""The configs of the Inkling families (issue 36, fam36l), with transformers 5.25's field names and defaults:
`InklingShared` holds what Inkling and Inkling 2 have alike (the two attention shapes, the window, the relative bias,
the convolutions, the routed experts), `InklingTextConfig` Inkling's own fields, defaults and rules (Inkling 2's are
in inkling2_config.py)."""
from dataclasses import dataclass, field

from petit.models.blocks.config import ACT_NAMES, ConfigMixin, aliased, boolean, positive_int, positive_number
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY

TYPES = ("hybrid", "hybrid_sliding")
ALIASES = {"sliding_window": "sliding_window_size", "num_local_experts": "n_routed_experts",
           "sconv_kernel_size": "conv_kernel_size", "model_max_length": "max_position_embeddings"}


@dataclass(kw_only=True)
class InklingShared(ConfigMixin):
    vocab_size: int = 201024
    unpadded_vocab_size: int | None = None
    hidden_size: int = 6144
    num_hidden_layers: int = 66
    num_attention_heads: int = 64
    num_key_value_heads: int = 8
    head_dim: int = 128
    swa_num_attention_heads: int = 64
    swa_num_key_value_heads: int = 16
    swa_head_dim: int = 128
    sliding_window_size: int = 512
    d_rel: int = 16
    rel_extent: int = 1024
    log_scaling_n_floor: int | None = None
    log_scaling_alpha: float = 0.1
    layer_types: list | None = None
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-6
    conv_kernel_size: int = 4
    hidden_act: str = "silu"
    moe_intermediate_size: int = 3072
    n_routed_experts: int = 256
    num_experts_per_tok: int = 6
    route_scale: float = 8.0
    tie_word_embeddings: bool = False
    model_type: str = "inkling_text"
    unknown_keys: list = field(default_factory=list, repr=False)
    _ALIASES = ALIASES

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(aliased(d, cls._ALIASES) if isinstance(d, dict) else d)

    @classmethod
    def _refuse(cls, d):
        if d.get("hidden_act", "silu") not in ACT_NAMES:
            raise ValueError(f"config: hidden_act {d['hidden_act']!r} is not supported by the {cls.model_type} "
                             f"family (supported: {', '.join(sorted(ACT_NAMES))})")
        if d.get("tie_word_embeddings"):
            raise ValueError("config: tie_word_embeddings true is not supported (transformers' Inkling models never "
                             "tie the LM head to the embedding)")

    def _validate(self):
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "head_dim", "swa_num_attention_heads", "swa_num_key_value_heads",
                     "swa_head_dim", "sliding_window_size", "d_rel", "rel_extent", "conv_kernel_size",
                     "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok", "max_position_embeddings")
        positive_number(self, "rms_norm_eps", "route_scale")
        boolean(self, "tie_word_embeddings")
        for h, kv in ((self.num_attention_heads, self.num_key_value_heads),
                      (self.swa_num_attention_heads, self.swa_num_key_value_heads)):
            if h % kv:
                raise ValueError(f"config: {h} query heads are not a multiple of {kv} key-value heads")
        if self.num_experts_per_tok > self.n_routed_experts:
            raise ValueError(f"config: num_experts_per_tok ({self.num_experts_per_tok}) exceeds n_routed_experts "
                             f"({self.n_routed_experts})")
        for name in ("unpadded_vocab_size", "log_scaling_n_floor"):
            if getattr(self, name) is not None:
                positive_int(self, name)
        n = self.num_hidden_layers
        if self.layer_types is None:
            self.layer_types = self.default_types()
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n or \
                any(t not in TYPES for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(TYPES)}, got "
                             f"{self.layer_types!r}")

    def default_types(self) -> list:
        """transformers' rule: every sixth layer full (the 6th, 12th, ...), the others sliding."""
        return ["hybrid" if (i + 1) % 6 == 0 else "hybrid_sliding" for i in range(self.num_hidden_layers)]

    def rows(self) -> int:
        """The logits' width: the head's rows (unpadded_vocab_size when it is smaller)."""
        u = self.unpadded_vocab_size
        return u if u is not None and u < self.vocab_size else self.vocab_size

    def shape(self, i: int) -> tuple:
        """(heads, kv heads, head_dim) of layer i."""
        if self.layer_types[i] == "hybrid_sliding":
            return self.swa_num_attention_heads, self.swa_num_key_value_heads, self.swa_head_dim
        return self.num_attention_heads, self.num_key_value_heads, self.head_dim


@dataclass(kw_only=True)
class InklingTextConfig(InklingShared):
    """Inkling (modeling_inkling.py): dense or sparse MLPs (mlp_layer_types, or transformers' dense_mlp_idx), shared
    experts beside the routed ones, the hidden states / logits_mup_width_multiplier before the head."""
    local_layer_ids: list | None = None
    mlp_layer_types: list | None = None
    intermediate_size: int = 24576
    n_shared_experts: int = 2
    logits_mup_width_multiplier: float = 24.0
    # transformers 5.25 reads none of these for the text model's logits (its router always scores the shared
    # experts beside the routed ones; the multi-token-prediction layers are not run)
    _IGNORED = MOE_TRAINING_ONLY | {"shared_expert_sink", "rms_norm_eps_moe_gate", "num_mtp_layers",
                                    "chain_hidden_post_norm", "mtp_hidden_states_first", "mtp_local_layer_ids",
                                    "number_of_conv_states"}
    _ALIASES = dict(ALIASES, embedding_multiplier="logits_mup_width_multiplier")

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = dict(d)
            if d.get("dense_intermediate_size") is not None:   # transformers: intermediate_size is then the experts'
                d["moe_intermediate_size"] = d.get("intermediate_size", 24576)
                d["intermediate_size"] = d["dense_intermediate_size"]
            d.pop("dense_intermediate_size", None)
            idx, n = d.pop("dense_mlp_idx", None), d.get("num_hidden_layers", 66)
            if d.get("mlp_layer_types") is None and idx is not None:
                d["mlp_layer_types"] = ["dense" if i < idx else "sparse" for i in range(n)]
        return super().from_dict(d)

    def _validate(self):
        super()._validate()
        positive_int(self, "intermediate_size", "n_shared_experts")
        positive_number(self, "logits_mup_width_multiplier")
        n = self.num_hidden_layers
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["sparse"] * n
        if not isinstance(self.mlp_layer_types, list) or len(self.mlp_layer_types) != n or \
                any(t not in ("dense", "sparse") for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got "
                             f"{self.mlp_layer_types!r}")

    def default_types(self) -> list:
        """transformers' rule: local_layer_ids sliding (default: every layer but the 6th, 12th, ...)."""
        if self.local_layer_ids is None:
            return super().default_types()
        local = set(self.local_layer_ids)
        return ["hybrid_sliding" if i in local else "hybrid" for i in range(self.num_hidden_layers)]
