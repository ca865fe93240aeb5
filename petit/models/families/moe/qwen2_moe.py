"""Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2's attention with routed experts in the sparse layers (softmax,
top `num_experts_per_tok`, renormalised when `norm_topk_prob`) plus a shared expert every token takes, scaled by
sigmoid(shared_expert_gate x); `mlp_only_layers` and `decoder_sparse_step` as in Qwen3-MoE."""
from dataclasses import dataclass, field

from petit.models.families.dense import qwen2
from petit.models.blocks.config import boolean, positive_int
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing, sparse_layers


@dataclass(kw_only=True)
class Qwen2MoeConfig(qwen2.Qwen2Config):
    num_experts: int = 60
    num_experts_per_tok: int = 4
    moe_intermediate_size: int = 1408
    shared_expert_intermediate_size: int = 5632
    decoder_sparse_step: int = 1
    mlp_only_layers: list = field(default_factory=list)
    norm_topk_prob: bool = False
    qkv_bias: bool = True
    model_type: str = "qwen2_moe"
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        check_routing(self)
        positive_int(self, "moe_intermediate_size", "shared_expert_intermediate_size")
        boolean(self, "qkv_bias")
        sparse_layers(self)


def build(cfg: Qwen2MoeConfig, t):
    sparse = sparse_layers(cfg)
    return qwen2.build(cfg, t, qkv_bias=cfg.qkv_bias, moe_for=lambda i, p: moe_weights(
        t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok, inter=cfg.moe_intermediate_size,
        norm_topk=cfg.norm_topk_prob, router="mlp.gate", experts="mlp.experts", shared="mlp.shared_expert",
        shared_inter=cfg.shared_expert_intermediate_size, shared_gate="mlp.shared_expert_gate") if sparse[i] else None)


Config = Qwen2MoeConfig
