"""The fam36i group of issue 36, written from transformers 5.25's modeling code.

Aria's language model (modeling_aria, AriaTextForCausalLM): Llama's block (RMSNorm, RoPE, q / k / v / o with
attention_bias); in every layer the top moe_topk of moe_num_experts SiLU-gated experts on the router's logits,
weighed by the softmax of the chosen logits (a softmax over all, renormalised), plus the moe_num_shared_experts
shared experts as one gated MLP of that many times intermediate_size (biases with mlp_bias), unweighted. The experts
are read per expert, as a `.petit` file holds them (the engine's hf_tensors splits the checkpoint's 3-D fc1 / fc2).
"""
from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import MoeSpec

_GUD = ("gate_proj", "up_proj", "down_proj")


def aria_text(cfg, names):
    r = rope(cfg, heads(cfg)[2])
    bias, mlp_bias = get(cfg, "attention_bias", False), get(cfg, "mlp_bias", False)

    def moe(i, p):
        s = p + "mlp.shared_experts."
        return MoeSpec(p + "mlp.router.weight", _experts(p, "mlp", get(cfg, "moe_num_experts", 8)),
                       get(cfg, "moe_topk", 2), True, shared=tuple(f"{s}{x}.weight" for x in _GUD),
                       shared_b=tuple(f"{s}{x}.bias" for x in _GUD) if mlp_bias else None)

    return llama_like(cfg, names, "aria_text", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=lambda i: r, moe_of=moe)


FAMILIES = {"aria_text": aria_text}
