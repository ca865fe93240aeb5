"""The fam36m group of issue 36, written from transformers 5.25's modeling code.

A.X-K2 (modeling_axk2): DeepSeek-V3.2's latent attention with DSA's indexer (rotating by halves) and its routing,
with the query read from [RMSNorm(q_a x) ; q_a x] by one fused q_gate_proj whose gate rows scale each head's output
values by their sigmoid before o_proj; gated RMSNorms (y = RMSNorm(x), y * sigmoid(fc2 silu(fc1 y))) for
input_layernorm everywhere and post_attention_layernorm in the routed layers; grouped routing (when n_group is set)
scoring the other groups' experts 0, not -inf. The tensors are the engine's derived ones (q_nope / q_pe / q_gate from
q_gate_proj), as a .petit file holds them.
"""
from trainer.reference.families.common import rms
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.fam36g5 import _either, axk_config
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


FAMILIES = {"axk2": axk2}
