"""The routing fields the mixture-of-experts families share, and their checks: how many experts, how many a token
takes, whether their weights are renormalised, and which layers are sparse (Qwen's decoder_sparse_step and
mlp_only_layers)."""
from petit.models.config import boolean, positive_int

# keys of MoE configs that only change training (the auxiliary load-balancing loss, router noise)
MOE_TRAINING_ONLY = frozenset({"router_aux_loss_coef", "output_router_logits", "router_jitter_noise",
                               "router_z_loss_coef"})


def check_routing(cfg, experts: str = "num_experts") -> None:
    positive_int(cfg, experts, "num_experts_per_tok")
    if cfg.num_experts_per_tok > getattr(cfg, experts):
        raise ValueError(f"config: num_experts_per_tok ({cfg.num_experts_per_tok}) exceeds {experts} "
                         f"({getattr(cfg, experts)})")
    if hasattr(cfg, "norm_topk_prob"):
        boolean(cfg, "norm_topk_prob")


def sparse_layers(cfg) -> list[bool]:
    """Which layers route to experts, as transformers' Qwen MoE models decide: not in mlp_only_layers, and every
    decoder_sparse_step-th (layer i with (i + 1) % step == 0)."""
    positive_int(cfg, "decoder_sparse_step")
    only = cfg.mlp_only_layers or []
    if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in only):
        raise ValueError(f"config: mlp_only_layers must be a list of layer indices, got {only!r}")
    return [i not in only and cfg.num_experts > 0 and (i + 1) % cfg.decoder_sparse_step == 0
            for i in range(cfg.num_hidden_layers)]
