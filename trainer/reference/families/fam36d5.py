"""The fam36d group of issue 36, written from transformers 5.25's modeling code.

DiffLlama (modeling_diffllama): Llama's block (RMSNorm, RoPE, q / k / v / o with attention_bias, SwiGLU MLP) whose
attention is the Differential Transformer's: each head's softmax attention over the first half of the kv heads'
values and over the last half (each half repeated to every kv head), pairs of heads subtracted with a learned lambda
per layer (lambda_init = 0.8 - 0.6 exp(-0.3 layer)), RMS-normed without a weight, times 1 - lambda_init
(trainer/reference/forward.py's `diff`).

SmallDoge (modeling_doge, dense: is_moe refused): qwen3's attention (per-head q / k RMSNorm, RoPE, biases with
attention_bias) whose every score of key j (kv head h) adds exp(A_h softplus(dt_proj v_j + b)_h); residuals scaled
per channel (input_residual, post_attention_residual); SwiGLU MLP with mlp_bias; sliding_window when set. Only the
contexts up to keep_window_size are modelled (beyond, transformers keeps each query's top keys by that bias).
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


def doge(cfg, names):
    if cfg.get("is_moe"):
        raise ValueError("the reference does not model doge's CDMoE (is_moe)")
    bias = get(cfg, "attention_bias", False)
    r = rope(cfg, heads(cfg)[2])
    w = cfg.get("sliding_window") or 0
    spec = llama_like(cfg, names, "doge", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False), qk_norm="head", rope_of=lambda i: r,
                      window_of=lambda i: w)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        L.key_bias = (a + "A", a + "dt_proj.weight", a + "dt_proj.bias" if bias else None)
        L.resid_alpha = (p + "input_residual", p + "post_attention_residual")
    return spec


FAMILIES["doge"] = doge
