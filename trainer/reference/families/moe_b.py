"""The moe_b group of issue 30 (mixtures of experts transformers 5 added), each written from its transformers 5.25
modeling file: lfm2_moe (LFM2's convs and attention, a dense SwiGLU in the first num_dense_layers layers, then experts
chosen on sigmoid(router) + expert_bias, weighted by the chosen sigmoids over their sum + 1e-6, times
routed_scaling_factor)."""
from trainer.reference.families.common import get
from trainer.reference.families.ssm import lfm2
from trainer.reference.spec import MoeSpec


def lfm2_moe(cfg, names):
    if not cfg.get("layer_types"):
        raise KeyError("layer_types")
    spec = lfm2(cfg, names)
    spec.family = "lfm2_moe"
    E, dense = cfg["num_experts"], get(cfg, "num_dense_layers", 2)
    for i, L in enumerate(spec.layers):
        if i < dense:
            continue
        p = f"model.layers.{i}.feed_forward."
        L.gate = L.up = L.down = None
        norm = get(cfg, "norm_topk_prob", True)
        L.moe = MoeSpec(p + "gate.weight", [tuple(f"{p}experts.{e}.{w}.weight" for w in ("w1", "w3", "w2"))
                                            for e in range(E)], cfg["num_experts_per_tok"], norm,
                        scoring="sigmoid", routed_scale=get(cfg, "routed_scaling_factor", 1.0),
                        sel_bias=p + "expert_bias" if get(cfg, "use_expert_bias", True) else None,
                        norm_eps=1e-6 if norm else 0.0)
    return spec


FAMILIES = {"lfm2_moe": lfm2_moe}
