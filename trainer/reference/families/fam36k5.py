"""The fam36k group of issue 36, written from transformers 5.25's modeling code.

Lara 4 Mini (modeling_lara_mini): Qwen3.5's Gated DeltaNet in the linear_attention layers (hybrid.qwen3_next's, its
gated norm plain), Qwen3's attention elsewhere (q / k RMSNorm per head, q / k / v / o biases with attention_bias, no
output gate; RoPE and the window in the sliding layers, neither in the full ones), plain RMSNorms x * w, and in every
layer experts on the softmax of the router logits (renormalised with norm_topk_prob) plus an ungated shared expert.
Default layer_types: the released period linear, sliding, linear, full, sliding.
"""
from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.hybrid import qwen3_next

LARA_PERIOD = ("linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention")


def lara_mini(cfg, names):
    n, hd = cfg["num_hidden_layers"], heads(cfg)[2]
    types = cfg.get("layer_types") or [LARA_PERIOD[i % len(LARA_PERIOD)] for i in range(n)]
    r, w, bias = rope(cfg, hd), get(cfg, "sliding_window", 512), get(cfg, "attention_bias", False)

    def attention(kind, a):
        sliding = kind == "sliding_attention"
        out = {x: f"{a}{x}_proj.weight" for x in "qkvo"}
        if bias:
            out.update({f"{x}_b": f"{a}{x}_proj.bias" for x in "qkvo"})
        return dict(out, rope=r if sliding else None, window=w if sliding else 0)
    fixed = dict(cfg, layer_types=types, num_experts=get(cfg, "num_experts", 128), decoder_sparse_step=1,
                 mlp_only_layers=[])
    return qwen3_next(fixed, names, "lara_mini", add=0.0, attention=attention, shared_gate=False)


FAMILIES = {"lara_mini": lara_mini}
