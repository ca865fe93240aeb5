"""DeepSeek-V4's config (`deepseek_v4`) with transformers 5.25's field names, its two spellings: transformers'
(`compress_rates`, `layer_types`, `mlp_layer_types`, `rope_parameters` keyed `main` / `compress`) and the released
checkpoint's older keys transformers folds in (`compress_ratios` per layer 0 / 4 / 128, `compress_rate_csa` /
`compress_rate_hca`, `num_hash_layers`, `qk_rope_head_dim`, a flat `rope_parameters` / `rope_scaling` whose YaRN
keys go to the compressed layers). Sliding layers rope with `rope_theta`, compressed ones with
`compress_rope_theta` and the YaRN of `compress_rope_scaling` (its attention factor forced to 1, as transformers)."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY
from petit.models.families.mla.deepseek_v4_rope import read_rope

CSA, HCA, SWA = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"
_RATIO = {0: SWA, 4: CSA, 128: HCA}


@dataclass(kw_only=True)
class DeepseekV4Config(DecoderConfig):
    intermediate_size: int | None = None        # not read (reported): set to moe_intermediate_size
    num_key_value_heads: int | None = 1
    head_dim: int | None = 512
    hidden_size: int = 4096
    q_lora_rank: int = 1024
    partial_rotary_factor: float | None = None
    moe_intermediate_size: int = 2048
    num_experts_per_tok: int = 6
    n_routed_experts: int = 256
    n_shared_experts: int = 1
    scoring_func: str = "sqrtsoftplus"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.5
    max_position_embeddings: int = 1048576
    layer_types: list | None = None
    compress_rates: dict | None = None
    compress_rope_theta: float = 160000.0
    compress_rope_scaling: dict | None = None
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    mlp_layer_types: list | None = None
    swiglu_limit: float = 10.0
    sliding_window: int = 128
    o_groups: int = 8
    o_lora_rank: int = 1024
    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 512
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "deepseek_v4"
    _REQUIRED = ("vocab_size", "num_hidden_layers", "num_attention_heads")
    # the multi-token-prediction layers are training / speculative heads transformers does not run either
    _IGNORED = MOE_TRAINING_ONLY | {"num_nextn_predict_layers"}
    _LEGACY = ("compress_ratios", "compress_rate_csa", "compress_rate_hca", "num_hash_layers", "qk_rope_head_dim")

    @classmethod
    def from_dict(cls, d: dict):
        if not isinstance(d, dict):
            raise ValueError("config: not a JSON object")
        d = dict(d)
        legacy = {k: d.pop(k) for k in cls._LEGACY if k in d}
        unknown = read_rope(d)
        if "intermediate_size" in d:            # V4's class has none: its experts are moe_intermediate_size wide
            d.pop("intermediate_size")
            unknown.append("intermediate_size (DeepSeek-V4 reads moe_intermediate_size)")
        d.update((k, None) for k in unknown)     # reported with the top-level ones by the shared check
        cfg = super().from_dict(d)
        cfg._legacy(legacy)
        cfg._validate_v4()
        return cfg

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("intermediate_size")              # not V4's: from_dict would report it
        return d

    def _legacy(self, legacy: dict) -> None:
        """The released checkpoint's keys folded in as transformers folds them."""
        rates = dict(self.compress_rates or {CSA: 4, HCA: 128})
        for key, kind in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):
            if legacy.get(key) is not None:
                rates[kind] = legacy[key]
        self.compress_rates = rates
        n = self.num_hidden_layers
        if self.layer_types is None and legacy.get("compress_ratios") is not None:
            bad = [r for r in legacy["compress_ratios"] if r not in _RATIO]
            if bad:
                raise ValueError(f"config: compress_ratios {bad[:3]} not among 0 / 4 / 128")
            self.layer_types = [_RATIO[r] for r in legacy["compress_ratios"]]
        if self.layer_types is None:
            self.layer_types = [HCA] * min(n, 2) + [CSA if i % 2 else HCA for i in range(max(n - 2, 0))]
        self.layer_types = list(self.layer_types[:n])
        if self.mlp_layer_types is None:
            h = legacy.get("num_hash_layers")
            h = 3 if h is None else h
            self.mlp_layer_types = ["hash_moe"] * min(n, h) + ["moe"] * max(0, n - h)
        self.mlp_layer_types = list(self.mlp_layer_types[:n])
        if self.partial_rotary_factor is None:
            rd = legacy.get("qk_rope_head_dim")
            self.partial_rotary_factor = rd / self.head_dim if rd is not None else 64 / 512
        self.qk_rope_head_dim = int(self.head_dim * self.partial_rotary_factor)

    def _validate(self) -> None:
        self.intermediate_size = self.moe_intermediate_size
        check_decoder(self, ("rms_norm_eps", "rope_theta", "compress_rope_theta", "routed_scaling_factor", "hc_eps"),
                      ("tie_word_embeddings", "norm_topk_prob"))

    def _validate_v4(self) -> None:
        n = self.num_hidden_layers
        positive_int(self, "q_lora_rank", "moe_intermediate_size", "num_experts_per_tok", "n_routed_experts",
                     "hc_mult", "hc_sinkhorn_iters", "sliding_window", "o_groups", "o_lora_rank", "index_n_heads",
                     "index_head_dim", "index_topk")
        positive_number(self, "swiglu_limit")
        if len(self.layer_types) != n or any(t not in (SWA, CSA, HCA) for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} of {SWA}, {CSA}, {HCA}; got {self.layer_types!r}")
        if len(self.mlp_layer_types) != n or any(t not in ("moe", "hash_moe") for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} of moe, hash_moe; got {self.mlp_layer_types!r}")
        for kind in set(self.layer_types) - {SWA}:
            r = self.compress_rates.get(kind)
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise ValueError(f"config: compress_rates[{kind!r}] must be a positive integer, got {r!r}")
        rd = self.qk_rope_head_dim
        if rd % 2 or not 0 < rd <= min(self.head_dim, self.index_head_dim):
            raise ValueError(f"config: the rope width {rd} (head_dim x partial_rotary_factor) must be even and at most "
                             f"head_dim {self.head_dim} and index_head_dim {self.index_head_dim}")
        if (self.num_attention_heads * self.head_dim) % self.o_groups:
            raise ValueError(f"config: o_groups {self.o_groups} does not divide the {self.num_attention_heads} heads")
        if self.num_key_value_heads != 1:
            raise ValueError(f"config: num_key_value_heads {self.num_key_value_heads}: DeepSeek-V4 has one K = V head")
        if self.scoring_func not in ("sqrtsoftplus", "sigmoid"):       # each expert's score alone (ACT2FN)
            raise ValueError(f"config: scoring_func {self.scoring_func!r} is not supported by deepseek_v4 "
                             f"(supported: sqrtsoftplus, sigmoid)")
        if self.hidden_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_act {self.hidden_act!r} is not supported by deepseek_v4 (silu)")
        if self.attention_bias or self.mlp_bias or not self.n_shared_experts or self.n_shared_experts != 1:
            raise ValueError("config: attention_bias / mlp_bias, or n_shared_experts other than 1: not in any "
                             "DeepSeek-V4 checkpoint, not supported")
        if self.hc_mult > 16:
            raise ValueError(f"config: hc_mult {self.hc_mult} is above the 16 streams kernels/hc.c holds")
