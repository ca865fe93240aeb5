"""The fam36d group of issue 36, written from transformers 5.25's modeling code.

DiffLlama (modeling_diffllama): Llama's block (RMSNorm, RoPE, q / k / v / o with attention_bias, SwiGLU MLP) whose
attention is the Differential Transformer's: each head's softmax attention over the first half of the kv heads'
values and over the last half (each half repeated to every kv head), pairs of heads subtracted with a learned lambda
per layer (lambda_init = 0.8 - 0.6 exp(-0.3 layer)), RMS-normed without a weight, times 1 - lambda_init
(trainer/reference/forward.py's `diff`).
"""
import math

from trainer.reference.families.common import get, heads, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.spec import DiffSpec


def diffllama(cfg, names):
    H, KV, hd = heads(cfg)
    if KV % 2 or H % 2:
        raise ValueError(f"the reference does not model diffllama with {H} heads and {KV} kv heads (odd)")
    eps = get(cfg, "rms_norm_eps", 1e-5)
    bias = get(cfg, "attention_bias", False)
    r = rope(cfg, hd)
    spec = llama_like(cfg, names, "diffllama", eps=eps, qkv_bias=bias, o_bias=bias, rope_of=lambda i: r)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}.self_attn."
        L.diff = DiffSpec(p + "lambda_q1", p + "lambda_k1", p + "lambda_q2", p + "lambda_k2",
                          0.8 - 0.6 * math.exp(-0.3 * i), eps)
    return spec


FAMILIES = {"diffllama": diffllama}
