"""Kimi Linear's config (`kimi_linear`; the family: kimi_linear.py): DeepSeek-V3's latent attention and routing
fields with Kimi Delta Attention's, the layer kinds, and the Hub's spellings of them."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


KINDS = ("linear_attention", "full_attention")
MLP = "block_sparse_moe"             # the Hub's name of every layer's MLP / experts


@dataclass(kw_only=True)
class KimiLinearConfig(DecoderConfig):
    vocab_size: int = 163840
    hidden_size: int = 2304
    intermediate_size: int = 9216
    num_hidden_layers: int = 27
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 32
    model_max_length: int = 1048576               # Kimi's name of max_position_embeddings
    rms_norm_eps: float = 1e-5
    kv_lora_rank: int = 512
    q_lora_rank: int | None = None
    qk_rope_head_dim: int = 64
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    moe_intermediate_size: int = 1024
    num_experts: int = 256
    num_experts_per_token: int = 8
    num_shared_experts: int = 1
    num_expert_group: int = 1
    topk_group: int | None = 1
    moe_renormalize: bool = True
    routed_scaling_factor: float = 2.446
    first_k_dense_replace: int = 1
    mlp_layer_types: list | None = None
    layer_types: list | None = None
    linear_head_dim: int = 128
    linear_num_heads: int = 32
    linear_conv_kernel_dim: int = 4
    attention_bias: bool = False
    latent_norm_eps: float | None = None    # Petit's key (kimi_gguf): q_a / kv_a_layernorm's eps, None: the model's
    model_type: str = "kimi_linear"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY | {"pretraining_tp", "qk_head_dim", "head_dim"}
    _GROUPED = False            # group-limited routing refused (issue 36, fam36m: Ling 3's runs it)
    _MOE = (MLP, ("w1", "w3", "w2"))    # the experts' prefix and gate / up / down names (Ling 3: mlp, *_proj)

    # the other names KimiLinearConfig answers to (its attribute_map): the Hub's config.json may use either
    ALIASES = {"max_position_embeddings": "model_max_length", "norm_topk_prob": "moe_renormalize",
               "n_group": "num_expert_group", "num_local_experts": "num_experts",
               "num_experts_per_tok": "num_experts_per_token", "n_shared_experts": "num_shared_experts"}
    LINEAR_ATTN = {"head_dim": "linear_head_dim", "num_heads": "linear_num_heads",
                   "short_conv_kernel_size": "linear_conv_kernel_dim"}

    @classmethod
    def from_dict(cls, d: dict):
        """Also the Hub's spelling (Moonshot's config.json, which transformers reads the same): the aliases above,
        and `linear_attn_config` with the KDA sizes and the 1-indexed `full_attn_layers` / `kda_layers`."""
        if not isinstance(d, dict):
            return super().from_dict(d)
        d = dict(d)
        for alias, name in cls.ALIASES.items():
            if alias in d:
                v = d.pop(alias)
                if name in d and d[name] != v:
                    raise ValueError(f"config: {alias} {v!r} and {name} {d[name]!r} (the same setting) differ")
                d[name] = v
        lac = d.pop("linear_attn_config", None)
        if lac is not None:
            if not isinstance(lac, dict):
                raise ValueError(f"config: linear_attn_config must be an object, got {lac!r}")
            for key, name in cls.LINEAR_ATTN.items():
                if key in lac and name not in d:
                    d[name] = lac[key]
            n = d.get("num_hidden_layers", 27)
            if d.get("layer_types") is None and "full_attn_layers" in lac and "kda_layers" in lac:
                types = [None] * n
                for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
                    for i in lac[key]:                       # 1-indexed in the checkpoint
                        if not isinstance(i, int) or not 1 <= i <= n:
                            raise ValueError(f"config: linear_attn_config.{key} must list layers 1..{n}, got {i!r}")
                        types[i - 1] = kind
                d["layer_types"] = types
        return super().from_dict(d)

    def _validate(self):
        self.max_position_embeddings = self.model_max_length
        check_decoder(self, ("rms_norm_eps", "routed_scaling_factor"), ("tie_word_embeddings", "moe_renormalize",
                                                                         "attention_bias"))
        if self.hidden_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_act {self.hidden_act!r} is not supported by the {self.model_type} "
                             f"family (supported: silu)")
        if self.attention_bias:
            raise ValueError(f"config: attention_bias true is not supported by the {self.model_type} family")
        positive_int(self, "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                     "moe_intermediate_size", "num_experts", "num_experts_per_token", "linear_head_dim",
                     "linear_num_heads", "linear_conv_kernel_dim")
        positive_number(self, "rms_norm_eps")
        if self.latent_norm_eps is not None:
            positive_number(self, "latent_norm_eps")
        if self.q_lora_rank is not None:
            positive_int(self, "q_lora_rank")
        if not self._GROUPED and (self.num_expert_group or 1) > 1:
            raise ValueError(f"config: num_expert_group {self.num_expert_group} (group-limited routing) is not "
                             f"supported by the kimi_linear family (the releases have 1)")
        n = self.num_hidden_layers
        if self.layer_types is None:
            self.layer_types = self._default_layer_types()
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["dense" if i < self.first_k_dense_replace else "sparse" for i in range(n)]
        for key, kinds in (("layer_types", KINDS), ("mlp_layer_types", ("dense", "sparse"))):
            v = getattr(self, key)
            if not isinstance(v, list) or len(v) != n or any(t not in kinds for t in v):
                raise ValueError(f"config: {key} must list {n} values of {' / '.join(kinds)}, got {v!r}")
        boolean(self, "moe_renormalize")

    def _mla_rope(self):
        """The latent attention's Rope: none here (issue 36, fam36m: Ling 3's rotates)."""
        return None

    def _default_layer_types(self) -> list:
        return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(self.num_hidden_layers)]
