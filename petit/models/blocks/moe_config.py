"""The routing fields the mixture-of-experts families share, and their checks: how many experts, how many a token
takes, whether their weights are renormalised, and which layers are sparse (Qwen's decoder_sparse_step and
mlp_only_layers)."""
from petit.models.blocks.config import boolean, positive_int

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


def shared_width(cls, d: dict) -> None:
    """Drop `moe_shared_expert_intermediate_size` from a config dict (remote-code configs write it; llama.cpp's
    converter reads it), refusing it unless it is n_shared_experts x moe_intermediate_size, the width transformers'
    GLM-4.5 and DeepSeek-V3 give the shared experts (`cls` gives the defaults of the keys `d` leaves out)."""
    if "moe_shared_expert_intermediate_size" in d:
        v = d.pop("moe_shared_expert_intermediate_size")
        n = d.get("n_shared_experts", cls.n_shared_experts)
        f = d.get("moe_intermediate_size", cls.moe_intermediate_size)
        if isinstance(n, int) and isinstance(f, int) and v != n * f:
            raise ValueError(f"config: moe_shared_expert_intermediate_size {v!r} is not n_shared_experts {n!r} x "
                             f"moe_intermediate_size {f!r} (the shared experts' width transformers builds)")


def mlp_kinds(cfg, dense) -> list[bool]:
    """Which layers route to experts, from the config's `mlp_layer_types` ("dense" / "sparse" each, checked) when
    it has one, else a layer is dense where `dense(i)` (transformers' default of the family)."""
    n, given = cfg.num_hidden_layers, getattr(cfg, "mlp_layer_types", None)
    if given is None:
        return [not dense(i) for i in range(n)]
    if not isinstance(given, list) or len(given) != n or any(k not in ("dense", "sparse") for k in given):
        raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got {given!r}")
    return [k == "sparse" for k in given]
