"""The fam36b group of issue 36, written from transformers 5.25's modeling code.

GPT-NeoX-Japanese (modeling_gpt_neox_japanese). Read
in the layout a `.petit` file stores (the per-head fused query_key_value split into q / k / v): LayerNorms with
bias, partial rotary (partial_rotary_factor, default 1), a sequential residual, a GELU MLP without biases of
hidden_size * intermediate_multiple_size, no attention biases but the last layer's `attention.dense_bias` added to
its output.

CTRL (modeling_ctrl): embeddings times sqrt(n_embd) plus the sinusoidal table (computed here in float64: the sines of
the even angle columns, then the cosines of the odd ones; it is no tensor of the file, so the family's own forward
lends it to the plain path under a name of its own), pre-LN blocks with eps 1e-6, biased Wq / Wk / Wv / dense, a
ReLU MLP with biases, final LayerNorm (layer_norm_epsilon), LM head with bias.

Mellum (modeling_mellum): Qwen3-MoE's block with each layer's attention and MLP kinds listed (see mellum below).
"""
import dataclasses

import numpy as np

from trainer.reference.families.common import activation, get, layer, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec


def gpt_neox_japanese(cfg, names):
    H, P, n = cfg["num_attention_heads"], "gpt_neox_japanese.", cfg["num_hidden_layers"]
    hd, eps = cfg["hidden_size"] // H, get(cfg, "layer_norm_eps", 1e-5)
    pct = cfg.get("rotary_pct") or get(cfg, "partial_rotary_factor", 1.0)
    theta = cfg.get("rotary_emb_base") or get(cfg, "rope_theta", 10000.0)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("gpt_neox_japanese", H, H, hd, P + "embed_in.weight",
                     P + "embed_in.weight" if tied else "embed_out.weight",
                     layer(P + "final_layer_norm", eps, names), act=activation(cfg, "hidden_act", "gelu"))
    r = rope(cfg, int(hd * pct), theta=theta)
    for i in range(n):
        p = f"{P}layers.{i}."
        a, m = p + "attention.", p + "mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
            o_b=a + "dense_bias" if i == n - 1 else None,
            up=m + "dense_h_to_4h.weight", down=m + "dense_4h_to_h.weight", rope=r,
            attn_norm=layer(p + "input_layernorm", eps, names), mlp_norm=layer(p + "post_attention_layernorm", eps,
                                                                               names)))
    return spec


SINUSOID = "<ctrl sinusoidal positions>"


def _sinusoid(n, d):
    i = np.arange(d)
    angle = np.arange(n)[:, None] / 10000.0 ** ((2 * (i // 2)) / d)
    return np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)


def ctrl(cfg, names):
    D, H, P, n = cfg["n_embd"], cfg["n_head"], "transformer.", cfg["n_layer"]
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("ctrl", H, H, D // H, P + "w.weight", P + "w.weight" if tied else "lm_head.weight",
                     layer(P + "layernorm", get(cfg, "layer_norm_epsilon", 1e-6), names), act="relu",
                     embed_scale=float(np.sqrt(D)), head_b="lm_head.bias")
    for i in range(n):
        p = f"{P}h.{i}."
        a, m = p + "multi_head_attention.", p + "ffn."
        spec.layers.append(LayerSpec(
            q=a + "Wq.weight", k=a + "Wk.weight", v=a + "Wv.weight", o=a + "dense.weight",
            q_b=a + "Wq.bias", k_b=a + "Wk.bias", v_b=a + "Wv.bias", o_b=a + "dense.bias",
            up=m + "0.weight", up_b=m + "0.bias", down=m + "2.weight", down_b=m + "2.bias",
            attn_norm=layer(p + "layernorm1", 1e-6, names), mlp_norm=layer(p + "layernorm2", 1e-6, names)))
    table = _sinusoid(get(cfg, "n_positions", 256), D)
    plain = dataclasses.replace(spec, pos_embed=SINUSOID)

    def forward(f, ids):
        f._cache[SINUSOID] = table
        outer, f.spec = f.spec, plain
        try:
            return f.logits(ids)
        finally:
            f.spec = outer

    spec.forward = forward
    return spec


FAMILIES = {"gpt_neox_japanese": gpt_neox_japanese, "ctrl": ctrl}


def mellum(cfg, names):
    """Mellum: Qwen3-MoE's block; layer_types (sliding layers: sliding_window, RoPE rope_local_base_freq unscaled;
    full layers: rope_theta with rope_scaling) and mlp_layer_types (dense / sparse) list each layer's kinds."""
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention"] * n
    sparse = [t == "sparse" for t in (cfg.get("mlp_layer_types") or ["sparse"] * n)]
    E = cfg.get("num_local_experts") or cfg["num_experts"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    full = rope(cfg, hd)
    local = rope(cfg, hd, theta=get(cfg, "rope_local_base_freq", 10000.0), scaling=None)
    moe = lambda i, p: MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E),  # noqa: E731
                               cfg["num_experts_per_tok"], get(cfg, "norm_topk_prob", True)) if sparse[i] else None
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "mellum", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=lambda i: local if types[i] == "sliding_attention" else full,
                      window_of=lambda i: cfg["sliding_window"] if types[i] == "sliding_attention" else 0,
                      qk_norm="head", moe_of=moe)


FAMILIES["mellum"] = mellum
