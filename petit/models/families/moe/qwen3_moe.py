"""Qwen3-MoE: Qwen3's attention (RMSNorm on each head of q and k) with routed experts in the sparse layers: softmax
over `num_experts` router logits, the top `num_experts_per_tok`, renormalised when `norm_topk_prob`; layers in
`mlp_only_layers` or off the `decoder_sparse_step` keep a dense MLP of `intermediate_size`."""
from dataclasses import dataclass, field, fields

from petit.models.families.dense import qwen2
from petit.models.blocks.config import aliased
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing, sparse_layers
from petit.models.families.dense.qwen3 import Qwen3Config


@dataclass(kw_only=True)
class Qwen3MoeConfig(Qwen3Config):
    num_experts: int = 128
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 768
    decoder_sparse_step: int = 1
    mlp_only_layers: list = field(default_factory=list)
    norm_topk_prob: bool = False
    model_type: str = "qwen3_moe"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def from_dict(cls, d):
        # transformers 5 saves num_experts under the name its attribute_map gives it, num_local_experts: a model saved
        # by 5.x has no num_experts (Mellum reads both spellings itself)
        if isinstance(d, dict) and "num_local_experts" not in {f.name for f in fields(cls)}:
            d = aliased(d, {"num_local_experts": "num_experts"})
        return super().from_dict(d)

    def _validate(self):
        super()._validate()
        check_routing(self)
        sparse_layers(self)


def build(cfg: Qwen3MoeConfig, t):
    sparse = sparse_layers(cfg)
    return qwen2.build(cfg, t, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, qk_norm="head",
                       moe_for=lambda i, p: moe_weights(
                           t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                           inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                           experts="mlp.experts") if sparse[i] else None)


Config = Qwen3MoeConfig
