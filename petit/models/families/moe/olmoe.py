"""OLMoE: Llama's pre-norm layout with RMSNorm over the whole q and k rows (`q_norm`, `k_norm`) before RoPE, and
routed experts in every layer (softmax, top `num_experts_per_tok`, renormalised only when `norm_topk_prob`, off in
the released models). `clip_qkv` (clamping q, k, v) is refused when set: no released OLMoE uses it."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.families.dense.llama import LlamaConfig
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class OlmoeConfig(LlamaConfig):
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 4096
    num_experts: int = 64
    num_experts_per_tok: int = 8
    norm_topk_prob: bool = False
    clip_qkv: float | None = None
    model_type: str = "olmoe"
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        check_routing(self)
        if self.clip_qkv is not None:
            raise ValueError(f"config: clip_qkv {self.clip_qkv!r} is not supported by the olmoe family (only null)")


def build(cfg: OlmoeConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length, qk_norm="full",
                      moe_for=lambda i, p: moe_weights(
                          t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                          experts="mlp.experts"))


Config = OlmoeConfig
