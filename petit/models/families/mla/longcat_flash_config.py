"""The config of longcat_flash.py's family: its fields with transformers' names and defaults, and their checks."""
from dataclasses import dataclass

from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


ALIASES = {"ffn_hidden_size": "intermediate_size", "num_local_experts": "n_routed_experts",
           "num_experts_per_tok": "moe_topk", "moe_intermediate_size": "expert_ffn_hidden_size"}


@dataclass(kw_only=True)
class LongcatFlashConfig(DecoderConfig):
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000000.0          # LongcatFlashConfig.default_theta
    max_position_embeddings: int = 131072
    q_lora_rank: int = 1536
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    qk_head_dim: int | None = None
    moe_topk: int = 12
    n_routed_experts: int = 512
    zero_expert_num: int | None = 256
    expert_ffn_hidden_size: int = 2048
    routed_scaling_factor: float = 6.0
    attention_bias: bool = False
    router_bias: bool = False
    model_type: str = "longcat_flash"
    _REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    _IGNORED = MOE_TRAINING_ONLY | {"output_router_logits", "mla_scale_q_lora", "mla_scale_kv_lora"}

    @classmethod
    def from_dict(cls, d):
        """Either spelling of each aliased key (both given must agree); `num_layers` (LongCat's) counts layers of
        two sublayer pairs, `num_hidden_layers` (transformers' derived key) the pairs: twice as many."""
        if isinstance(d, dict):
            d = dict(d)
            for alias, name in ALIASES.items():
                if alias in d:
                    v = d.pop(alias)
                    if name in d and d[name] != v:
                        raise ValueError(f"config: {alias} {v!r} and {name} {d[name]!r} disagree (the same setting)")
                    d[name] = v
            if "num_layers" in d:
                n = d.pop("num_layers")
                if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    raise ValueError(f"config: num_layers must be a positive integer, got {n!r}")
                if d.get("num_hidden_layers") not in (None, 2 * n):
                    raise ValueError(f"config: num_hidden_layers {d['num_hidden_layers']!r} is not 2 x num_layers "
                                     f"({2 * n})")
                d["num_hidden_layers"] = 2 * n
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "longcat_flash", "silu")
        for key in ("attention_bias", "router_bias"):
            if d.get(key):
                raise ValueError(f"config: {key} true is not supported by the longcat_flash family (no released "
                                 f"LongCat-Flash checkpoint has it)")

    def _validate(self):
        if self.head_dim not in (None, self.qk_rope_head_dim):     # the rotary table's width in transformers
            raise ValueError(f"config: head_dim {self.head_dim} differs from qk_rope_head_dim "
                             f"{self.qk_rope_head_dim}; transformers' RoPE then fails on the rope part")
        self.head_dim = self.qk_rope_head_dim
        check_decoder(self, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"), ("tie_word_embeddings",))
        positive_int(self, "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                     "moe_topk", "n_routed_experts", "expert_ffn_hidden_size")
        positive_number(self, "routed_scaling_factor")
        if self.num_hidden_layers % 2:
            raise ValueError(f"config: num_hidden_layers {self.num_hidden_layers} must be even (2 x num_layers)")
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"config: qk_rope_head_dim {self.qk_rope_head_dim} must be even for RoPE")
        if self.qk_head_dim not in (None, self.qk_nope_head_dim + self.qk_rope_head_dim):
            raise ValueError(f"config: qk_head_dim {self.qk_head_dim} is not qk_nope_head_dim + qk_rope_head_dim")
        z = self.zero_expert_num or 0
        if isinstance(z, bool) or not isinstance(z, int) or z < 0:
            raise ValueError(f"config: zero_expert_num must be a non-negative integer, got {z!r}")
        if self.moe_topk > self.n_routed_experts + z:
            raise ValueError(f"config: moe_topk {self.moe_topk} exceeds n_routed_experts + zero_expert_num "
                             f"({self.n_routed_experts + z})")
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
