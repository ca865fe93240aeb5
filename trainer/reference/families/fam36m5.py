"""The fam36m group of issue 36, written from transformers 5.25's modeling code (Ling 3, HY-V4: bailing_hybrid and
hy_v4 below).

A.X-K2 (modeling_axk2): DeepSeek-V3.2's latent attention with DSA's indexer (rotating by halves) and its routing,
with the query read from [RMSNorm(q_a x) ; q_a x] by one fused q_gate_proj whose gate rows scale each head's output
values by their sigmoid before o_proj; gated RMSNorms (y = RMSNorm(x), y * sigmoid(fc2 silu(fc1 y))) for
input_layernorm everywhere and post_attention_layernorm in the routed layers; grouped routing (when n_group is set)
scoring the other groups' experts 0, not -inf. The tensors are the engine's derived ones (q_nope / q_pe / q_gate from
q_gate_proj), as a .petit file holds them.
"""
import numpy as np

from trainer.reference import ops
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
        L.mla.q_cat, L.mla.gate, L.mla.gate_x = True, a + "q_gate.weight", False
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
            L.mla.gate = a + "g_proj.weight"
        if L.moe is not None:
            L.moe.n_group, L.moe.topk_group = get(cfg, "num_expert_group", 1), get(cfg, "topk_group", 1)
            L.moe.swiglu_limit, L.moe.limit_after_act = float(cfg["expert_swiglu_limit_list"][i]), True
            L.moe.sh_swiglu_limit = float(cfg["share_expert_swiglu_limit_list"][i])
    return spec


def hy_v4(cfg, names):
    """HY-V4 (modeling_hy_v4): GLM-5's latent attention and indexer (shared layers by indexer_types; the indexer's
    k_norm with rms_norm_eps; its rows as the .petit file holds them, the rotated values first, adjacent pairs) with a
    sink a head and sigmoid(gate_proj x) on the heads' values, GLM-4.7-Flash's routing with the experts' SwiGLU
    clamped before the activation (the shared expert not), all inside hyper-connections: its own forward
    (ModelSpec.forward) keeps hc_mult streams X, each block reads sum_j pre_j X_j (RMS-normed) and X += post y, with
    m = fn . X / rms(X), pre = sigmoid(m[:n] s0 + b) + eps, post = hc_magnitude sigmoid(m[n:] s1 + b) + eps; the
    hyper head's pre alone before the final norm."""
    n = cfg["num_hidden_layers"]
    index_types = cfg.get("indexer_types") or ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    c = dict(cfg, mlp_layer_types=cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1),
             n_group=get(cfg, "n_group", 1), topk_group=get(cfg, "topk_group", 1),
             routed_scaling_factor=get(cfg, "routed_scaling_factor", 2.827),
             rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5), index_n_heads=get(cfg, "index_n_heads", 16))
    spec = _deepseek(c, names, "hy_v4", v3=True,
                     dsa=_dsa(c, interleaved=True, shared=lambda i: index_types[i] == "shared"))
    eps, hc_n, hc_eps = c["rms_norm_eps"], get(cfg, "hc_mult", 4), get(cfg, "hc_eps", 1e-6)
    magnitude = float(get(cfg, "hc_magnitude", 2.0))
    for i, L in enumerate(spec.layers):
        a = f"model.layers.{i}.self_attn."
        L.sinks, L.mla.gate = a + "sinks", a + "gate_proj.weight"
        if L.mla.dsa.k_norm is not None:
            L.mla.dsa.k_norm.eps = eps
        if L.moe is not None:
            L.moe.swiglu_limit = float(get(cfg, "swiglu_limit", 10.0))
    hcs = [f"model.layers.{i}.{w}_hc." for i in range(n) for w in ("attn", "ffn")]
    spec.extra_names = tuple(p + x for p in hcs for x in ("fn", "base", "scale")) + tuple(
        f"model.hc_head.hc_{x}" for x in ("fn", "base", "scale"))

    def mixes(fwd, p, X, k):
        T = X.shape[0]
        flat = X.reshape(T, -1)
        m = flat @ fwd.w(p + "fn").T / np.sqrt((flat * flat).mean(1, keepdims=True) + eps)
        b, s = fwd.w(p + "base"), fwd.w(p + "scale")
        return [ops.act("sigmoid", m[:, j * hc_n:(j + 1) * hc_n] * s[j] + b[j * hc_n:(j + 1) * hc_n])
                for j in range(k)]

    def forward(fwd, ids):
        X = np.repeat(fwd.w(spec.embed)[ids][:, None, :], hc_n, axis=1)
        for i, L in enumerate(spec.layers):
            for p, norm, block in ((hcs[2 * i], L.attn_norm, fwd.attention), (hcs[2 * i + 1], L.mlp_norm, fwd.mlp)):
                pre, post = mixes(fwd, p, X, 2)
                y = block(L, fwd.norm(((pre + hc_eps)[:, :, None] * X).sum(1), norm))
                X = X + (magnitude * post + hc_eps)[:, :, None] * y[:, None, :]
        pre, = mixes(fwd, "model.hc_head.hc_", X, 1)
        return fwd.mm(fwd.norm(((pre + hc_eps)[:, :, None] * X).sum(1), spec.final_norm), spec.head)
    spec.forward = forward
    return spec


FAMILIES = {"axk2": axk2, "bailing_hybrid": bailing_hybrid, "hy_v4": hy_v4}
