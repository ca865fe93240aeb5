"""FlexOlmo (Ai2): OLMo 2's block (no pre-norms; RMSNorm of the attention's and of the MLP's output before each
residual add, `post_attention_layernorm` / `post_feedforward_layernorm`; RMSNorm over the whole q and k rows before
RoPE) with OLMoE's routed experts in every layer: softmax over `num_experts` router logits, the top
`num_experts_per_tok`, renormalised only with `norm_topk_prob` (off by default), each expert a SwiGLU MLP of
`intermediate_size` (`mlp.experts.{e}.gate_proj / up_proj / down_proj` as transformers 5 writes them back)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.moe import moe_weights
from petit.models.families.moe.olmoe import OlmoeConfig


@dataclass(kw_only=True)
class FlexOlmoConfig(OlmoeConfig):
    rms_norm_eps: float = 1e-6
    num_experts: int = 7
    num_experts_per_tok: int = 5
    model_type: str = "flex_olmo"

    def _validate(self):
        super()._validate()
        if self.mlp_bias:
            raise ValueError("config: mlp_bias true is not supported by the flex_olmo family (its experts have no "
                             "biases)")


def build(cfg: FlexOlmoConfig, t):
    rope = default_rope(cfg)
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      rope_for=lambda i: rope, context_length=rope.context_length, qk_norm="full", post_only=True,
                      moe_for=lambda i, p: moe_weights(
                          t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                          experts="mlp.experts"))


Config = FlexOlmoConfig
