"""Mixtral: Mistral's attention (a sliding window in every layer when `sliding_window` is set) with routed experts
in every layer: softmax over `num_local_experts` router logits, the top `num_experts_per_tok` renormalised to sum
1; each expert a gated MLP (w1 gate, w3 up, w2 down) of `intermediate_size`."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import boolean
from petit.models.families.dense.mistral import MistralConfig
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class MixtralConfig(MistralConfig):
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1e6
    sliding_window: int | None = None
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    rope_interleaved: bool = False      # Petit's key, as Llama's: a GGUF file's q / k rows are permuted for pairs
    model_type: str = "mixtral"
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        check_routing(self, "num_local_experts")
        boolean(self, "rope_interleaved")


def build(cfg: MixtralConfig, t):
    rope = default_rope(cfg)
    w = cfg.sliding_window or 0
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, window_for=lambda i: w,
                      context_length=rope.context_length, moe_for=lambda i, p: moe_weights(
                          t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                          inter=cfg.intermediate_size, norm_topk=True, router="block_sparse_moe.gate",
                          experts="block_sparse_moe.experts", names=("w1", "w3", "w2")))


Config = MixtralConfig
