"""The fam36i group of issue 36, written from transformers 5.25's modeling code.

Aria's language model (modeling_aria, AriaTextForCausalLM): Llama's block (RMSNorm, RoPE, q / k / v / o with
attention_bias); in every layer the top moe_topk of moe_num_experts SiLU-gated experts on the router's logits,
weighed by the softmax of the chosen logits (a softmax over all, renormalised), plus the moe_num_shared_experts
shared experts as one gated MLP of that many times intermediate_size (biases with mlp_bias), unweighted. The experts
are read per expert, as a `.petit` file holds them (the engine's hf_tensors splits the checkpoint's 3-D fc1 / fc2).

Cohere Compass's language model (modeling_cohere_compass, CohereCompassForCausalLM): Cohere 2's parallel block
(trainer/reference/families/cohere.py) with rotate-half RoPE (Qwen3-VL's M-RoPE, whose axes all hold the token's
position on text) in the layer types that have a RoPE (`rope_layer_types`, read from rope_parameters by the engine:
a null entry is a type without one), a sliding window in the sliding layers, layer_types by default all full,
logits x logit_scale (default 1).
"""
from trainer.reference.families.cohere import _cohere
from trainer.reference.families.common import get, heads, layer_types, rope
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


def cohere_compass_text(cfg, names):
    r = rope(cfg, heads(cfg)[2])
    types = layer_types(cfg, lambda i: "full_attention")
    rotates, w = set(cfg["rope_layer_types"]), cfg.get("sliding_window") or 0
    slides = [t == "sliding_attention" for t in types]
    return _cohere(dict(cfg, logit_scale=get(cfg, "logit_scale", 1.0)), names, "cohere_compass_text",
                   lambda i: r if types[i] in rotates else None, lambda i: w if slides[i] else 0, False)


FAMILIES["cohere_compass_text"] = cohere_compass_text
