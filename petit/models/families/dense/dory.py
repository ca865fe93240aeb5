"""Dory (NVIDIA Nemotron-Labs Dory): a looped normalized transformer (nGPT) on AfMoE's gated attention and Gemma 2's
sandwich block, every norm an L2 norm (eps 1e-6 in the sum; petit/models/families/dense/ngpt.py). Per layer, h the
stream:

    x = L2(h)                                     (the block adds to the normed stream)
    q, k = L2 per head of q_proj x, k_proj x; RoPE (sliding layers: rope_local_base_freq, full: rope_theta); then
    q *= (sqk s_q)^2 per channel, s_q = sqrt(head_dim) / initializer_range
    a = o_proj L2(attn(q, k, v) * sigmoid(gate_proj x * (s_gate s_g)^2)),  s_g = hidden^(1/4) / initializer_range
    h = x + r1 (L2(a) - x);  y = L2(h)            r1 = |lambda_1| ngpt_alpha_init / initializer_range per channel
    m = down L2(silu(gate y * suv_gate sqrt(hidden)) * up y * suv_up sqrt(hidden))
    h = y + r2 (L2(m) - y)                        r2 likewise of lambda_2
    logits = lm_head L2(h) * logit_scale / initializer_range     (per vocabulary entry)

Layers run as n_input_layers, n_recurrent_loops passes over the next n_recurrent_layers (each from L2(h) + L2(the
input section's output), with keys and values of its own: "per_loop"), then n_output_layers: unrolled here into
layers sharing weights. The q scale rides on the q norm, run after RoPE (an L2 norm commutes with the rotation:
norm_after_rope, weight (sqk s_q)^2 / sqrt(head_dim)); the interpolations are resid_alpha (1 - r) and post-norms
weighted r. "last_loop" (earlier passes read the last one's cached keys, writing none) is refused past one pass.
The released two-block layout (`layer_types` with "mlp" after each attention type, the counts doubled;
`backbone.layers.{2i}.mixer` / `.{2i+1}.mixer`, `attn_alpha`, `mlp_alpha`, `g_proj`) is read as transformers reads
it, and so are what its save_pretrained writes (`backbone.layers.{i}`, `g_proj`) and its modules' names."""
from dataclasses import replace

import numpy as np

from petit.models.blocks.common import arch, attention_weights, default_rope, gated_mlp_weights, window_of
from petit.models.blocks.decoder import Decoder, Layer, Vec
from petit.models.families.dense.ngpt import Entry, GateScale, l2
from petit.models.families.dense.dory_config import DoryConfig

EPS = 1e-6          # DoryL2Norm's (Llama 4's weightless norm's default)


def _names(t, i: int) -> tuple[str, str, str, str, str]:
    """Layer i's (attention prefix, MLP prefix, lambda_1, lambda_2, output gate) names in any layout transformers
    reads: the released two-block one, what its save_pretrained writes (backbone.layers.{i}, g_proj), its modules'."""
    root = "backbone." if t.has("backbone.embeddings.weight") else "model."
    a, m = f"{root}layers.{2 * i}.", f"{root}layers.{2 * i + 1}."
    if t.has(a + "mixer.q_proj.weight"):            # released: LayerPairCollapse's source
        return a + "mixer.", m + "mixer.", a + "attn_alpha", m + "mlp_alpha", a + "mixer.g_proj.weight"
    p = f"{root}layers.{i}."
    g = p + "self_attn.g_proj.weight"
    return p + "self_attn.", p + "mlp.", p + "lambda_1", p + "lambda_2", g if t.has(g) else \
        p + "self_attn.gate_proj.weight"


def build(cfg: DoryConfig, t):
    D, F, H, hd, init = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads, cfg.head_dim, \
        cfg.initializer_range
    types, rate = cfg.types(), cfg.ngpt_alpha_init / init
    full, local = default_rope(cfg), default_rope(cfg, base=cfg.rope_local_base_freq, scaling=None)
    window = window_of(cfg, types)
    embed = "backbone.embeddings.weight" if t.has("backbone.embeddings.weight") else "model.embed_tokens.weight"
    E = t.weight(embed, (cfg.vocab_size, D))
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    unit = l2(D, EPS)
    base = []
    for i in range(cfg.num_hidden_layers):
        a, m, l1, l2_, g = _names(t, i)
        attn = attention_weights(t, "", cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, prefix=a)
        attn["attn_gate"] = t.weight(g, (H * hd, D))
        sqk, s_gate = t.array(a + "sqk", (H * hd,)), t.array(a + "s_gate", (H * hd,))
        r1, r2 = (np.abs(t.array(n, (D,)).astype(np.float64) * rate) for n in (l1, l2_))
        sg, su = (t.array(m + n, (F,)).astype(np.float64) * np.sqrt(D) for n in ("suv_gate", "suv_up"))
        L = Layer(**attn, **gated_mlp_weights(t, "", cfg, bias=cfg.mlp_bias, prefix=m), window=window(i),
                  rope=local if types[i] == "sliding_attention" else full, norm_after_rope=True,
                  q_norm=l2(hd, EPS, ((sqk.astype(np.float64) * np.sqrt(hd) / init) ** 2).reshape(H, hd)),
                  k_norm=l2(hd, EPS), o_norm=l2(H * hd, EPS), down_norm=l2(F, EPS),
                  post_attn_norm=l2(D, EPS, r1), resid_attn_norm=unit, post_mlp_norm=l2(D, EPS, r2),
                  resid_alpha=(Vec(1.0 - r1), Vec(1.0 - r2)), glu_scales=(Vec(sg), Vec(su)),
                  pre_store=GateScale(Vec((s_gate.astype(np.float64) * D ** 0.25 / init) ** 2), H * hd))
        base.append(L)
    layers = [replace(base[i], pre_block=Entry(unit, D, *entry)) for i, entry in cfg.order()]
    dec = Decoder(arch(cfg, act=cfg.act, shortcut=True, context_length=full.context_length), E, layers, unit, head)
    dec.logit_cols = Vec(t.array("lm_head.logit_scale", (cfg.vocab_size,)).astype(np.float64) / init)
    return dec


Config = DoryConfig
