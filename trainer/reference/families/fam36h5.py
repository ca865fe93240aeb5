"""The fam36h group of issue 36, written from transformers 5.25's modeling code.

Hy3 (modeling_hy_v3): Llama's pre-norm block, q / k RMS-normed per head before RoPE, biases with attention_bias
(q, k, v, o) and mlp_bias (the dense MLPs and the shared expert); the layers mlp_layer_types calls sparse (by default
all but the first) route to the top k of sigmoid(router logits) + e_score_correction_bias, weighed by the chosen
sigmoids / (their sum + 1e-20) x router_scaling_factor, plus an ungated shared expert of moe_intermediate_size x
num_shared_experts (intermediate_size when that is 0). The names transformers saves (mlp.router.gate, mlp.expert_bias,
mlp.shared_mlp) are read when the file has them, else its modules' (mlp.gate, mlp.e_score_correction_bias,
mlp.shared_experts).
"""
from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import MoeSpec


def _either(names, saved, module):
    return saved if saved in names else module


def hy_v3(cfg, names):
    n, E = cfg["num_hidden_layers"], get(cfg, "num_experts", 192)
    kinds = get(cfg, "mlp_layer_types", ["dense"] + ["sparse"] * (n - 1))
    mlp_bias, bias = get(cfg, "mlp_bias", False), get(cfg, "attention_bias", False)
    r = rope(cfg, heads(cfg)[2], theta=get(cfg, "rope_theta", 11158840.0))

    def moe(i, p):
        if kinds[i] != "sparse":
            return None
        sh = p + ("mlp.shared_mlp" if p + "mlp.shared_mlp.up_proj.weight" in names else "mlp.shared_experts")
        shared = tuple(f"{sh}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
        shared_b = tuple(f"{sh}.{x}.bias" for x in ("gate_proj", "up_proj", "down_proj")) if mlp_bias else None
        return MoeSpec(_either(names, p + "mlp.router.gate.weight", p + "mlp.gate.weight"), _experts(p, "mlp", E),
                       cfg["num_experts_per_tok"], True, shared=shared, shared_b=shared_b, scoring="sigmoid",
                       sel_bias=_either(names, p + "mlp.expert_bias", p + "mlp.e_score_correction_bias"),
                       norm_eps=1e-20, routed_scale=get(cfg, "router_scaling_factor", 2.826))

    return llama_like(cfg, names, "hy_v3", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=mlp_bias, qk_norm="head", moe_of=moe, rope_of=lambda i: r)


FAMILIES = {"hy_v3": hy_v3}
