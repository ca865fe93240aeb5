"""The fam36m group of issue 36, written from transformers 5.25's modeling code (Ling 3: bailing_hybrid below).

A.X-K2 (modeling_axk2): DeepSeek-V3.2's latent attention with DSA's indexer (rotating by halves) and its routing,
with the query read from [RMSNorm(q_a x) ; q_a x] by one fused q_gate_proj whose gate rows scale each head's output
values by their sigmoid before o_proj; gated RMSNorms (y = RMSNorm(x), y * sigmoid(fc2 silu(fc1 y))) for
input_layernorm everywhere and post_attention_layernorm in the routed layers; grouped routing (when n_group is set)
scoring the other groups' experts 0, not -inf. The tensors are the engine's derived ones (q_nope / q_pe / q_gate from
q_gate_proj), as a .petit file holds them.
"""
from trainer.reference.families.common import get, rms, rope
from trainer.reference.families.deepseek import _deepseek, _mscale
from trainer.reference.families.fam36g5 import _either, axk_config
from trainer.reference.families.hybrid5 import kimi_linear
from trainer.reference.families.mla5 import _dsa


def axk2(cfg, names):
    c = axk_config(cfg, 128, n_group=1, topk_group=1, routed_scaling_factor=2.5, rms_norm_eps=1e-6,
                   num_experts_per_tok=8, n_shared_experts=1, index_n_heads=16)
    spec = _deepseek(c, names, "axk2", v3=True, dsa=_dsa(c, interleaved=False))
    eps = c["rms_norm_eps"]

    def gated(name):
        s = rms(name + ".norm", eps)
        s.gate = tuple(_either(names, f"{name}.{m}.weight", f"{name}.{w}.weight")
                       for w, m in (("mlp.fc1", "W_down"), ("mlp.fc2", "W_up")))
        return s
    for i, L in enumerate(spec.layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        L.mla.q_cat, L.mla.gate = True, a + "q_gate.weight"
        L.attn_norm = gated(p + "input_layernorm")
        if L.moe is not None:
            L.mlp_norm = gated(p + "post_attention_layernorm")
            L.moe.group_fill_zero = True
    return spec


def bailing_hybrid(cfg, names):
    """Ling 3: kimi_linear's model with KDA's bounded forget gate (kda_safe_gate), the latent attention rotating its
    rope part on adjacent pairs (yarn's mscale in the scale) and each head's output times sigmoid(g_proj x), group-
    limited routing and Step3p7's clamp after the activation, per layer for the experts and the shared expert."""
    spec = kimi_linear(cfg, names, "bailing_hybrid", ("mlp", ("gate_proj", "up_proj", "down_proj")))
    dr = cfg["qk_rope_head_dim"]
    s = cfg.get("rope_scaling") or {}
    if s.get("rope_type", s.get("type")) == "yarn" and s.get("mscale_all_dim"):
        spec.attn_scale *= _mscale(float(s["factor"]), float(s["mscale_all_dim"])) ** 2
    r = rope(cfg, dr, interleaved=True)
    for i, L in enumerate(spec.layers):
        a = f"model.layers.{i}.self_attn."
        if L.deltanet is not None and get(cfg, "kda_safe_gate", True):
            L.deltanet.kda_lower_bound = float(get(cfg, "kda_lower_bound", -5.0))
        if L.mla is not None:
            L.rope = r
            L.mla.gate, L.mla.gate_x, L.mla.gate_width = a + "g_proj.weight", True, cfg["v_head_dim"]
        if L.moe is not None:
            L.moe.n_group, L.moe.topk_group = get(cfg, "num_expert_group", 1), get(cfg, "topk_group", 1)
            L.moe.swiglu_limit, L.moe.limit_after_act = float(cfg["expert_swiglu_limit_list"][i]), True
            L.moe.sh_swiglu_limit = float(cfg["share_expert_swiglu_limit_list"][i])
    return spec


FAMILIES = {"axk2": axk2, "bailing_hybrid": bailing_hybrid}
