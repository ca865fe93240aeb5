"""The moe_b group of issue 30 (mixtures of experts transformers 5 added), each written from its transformers 5.25
modeling file: lfm2_moe (LFM2's convs and attention, a dense SwiGLU in the first num_dense_layers layers, then
experts chosen on sigmoid(router) + expert_bias, weighted by the chosen sigmoids over their sum + 1e-6, times
routed_scaling_factor), exaone_moe (EXAONE 4's attention, NoPE in the full layers of a sliding model, in a pre-norm
block; DeepSeek-V3's group-limited sigmoid routing with e_score_correction_bias and a shared expert), minimax_m2
(q / k RMS-normed over whole rows, partial rotate-half RoPE, Mixtral's expert names with sigmoid scores and
e_score_correction_bias, renormalised), flex_olmo (OLMo 2's post-norm block over OLMoE's softmax experts), afmoe
(four norms a block, gated attention output, NoPE global layers, muP embeddings, sigmoid experts with expert_bias
and a shared expert), minicpm5_moe (a Llama block with an element-wise sigmoid gate on the attention output, its q_proj
split into q_proj / q_gate as the engine stores it; DeepSeek-V3's routing and shared experts), lfm3 (LFM2's hybrid
with sliding and full attention layers, a sigmoid gate per head stored repeated over its head_dim as the engine stores
it, sandwich norms, the full layers' proportional RoPE). Nemotron-H's expert blocks are in hybrid.py's nemotron_h."""
from trainer.reference.families.common import get, heads, layer_types, rms, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.llama_variants import _windows_of
from trainer.reference.families.ssm import lfm2
from trainer.reference.spec import MoeSpec


def lfm2_moe(cfg, names):
    if not cfg.get("layer_types"):
        raise KeyError("layer_types")
    spec = lfm2(cfg, names)
    spec.family = "lfm2_moe"
    E, dense = cfg["num_experts"], get(cfg, "num_dense_layers", 2)
    for i, L in enumerate(spec.layers):
        if i < dense:
            continue
        p = f"model.layers.{i}.feed_forward."
        L.gate = L.up = L.down = None
        norm = get(cfg, "norm_topk_prob", True)
        L.moe = MoeSpec(p + "gate.weight", [tuple(f"{p}experts.{e}.{w}.weight" for w in ("w1", "w3", "w2"))
                                            for e in range(E)], cfg["num_experts_per_tok"], norm,
                        scoring="sigmoid", routed_scale=get(cfg, "routed_scaling_factor", 1.0),
                        sel_bias=p + "expert_bias" if get(cfg, "use_expert_bias", True) else None,
                        norm_eps=1e-6 if norm else 0.0)
    return spec


def exaone_moe(cfg, names):
    w = cfg.get("sliding_window", 4096)
    n = get(cfg, "sliding_window_pattern", 4)
    types = layer_types(cfg, lambda i: "sliding_attention" if w and (i + 1) % n else "full_attention")
    L = cfg["num_hidden_layers"]
    k = get(cfg, "first_k_dense_replace", 1)
    mlp = cfg.get("mlp_layer_types") or ["dense" if i < k else "sparse" for i in range(L)]
    r = rope(cfg, heads(cfg)[2])
    E, groups = get(cfg, "num_experts", 64), get(cfg, "n_group", 1)
    S = get(cfg, "num_shared_experts", 1)

    def moe(i, p):
        if mlp[i] == "dense":
            return None
        bias = p + "mlp.e_score_correction_bias"
        if bias not in names:
            bias = p + "mlp.gate.e_score_correction_bias"
        return MoeSpec(p + "mlp.gate.weight",
                       [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                        for e in range(E)], get(cfg, "num_experts_per_tok", 8), get(cfg, "norm_topk_prob", True),
                       tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                       if S else None, scoring="sigmoid", sel_bias=bias,
                       n_group=groups if groups > 1 else 0, topk_group=get(cfg, "topk_group", 1) if groups > 1 else 0,
                       group_score="top2_sum", routed_scale=get(cfg, "routed_scaling_factor", 2.5))
    return llama_like(cfg, names, "exaone_moe", eps=get(cfg, "rms_norm_eps", 1e-5),
                      rope_of=lambda i: None if w and types[i] == "full_attention" else r,
                      window_of=_windows_of(dict(cfg, sliding_window=w), types), qk_norm="head", moe_of=moe)


def minimax_m2(cfg, names):
    hd = heads(cfg)[2]
    factor = get(cfg, "partial_rotary_factor", None)
    if factor is None:
        factor = get(cfg, "rotary_dim", hd) / hd
    r = rope(cfg, int(hd * factor))
    E, b = cfg["num_local_experts"], "block_sparse_moe"

    def moe(i, p):
        return MoeSpec(f"{p}{b}.gate.weight", [tuple(f"{p}{b}.experts.{e}.{w}.weight" for w in ("w1", "w3", "w2"))
                                                for e in range(E)], cfg["num_experts_per_tok"], True,
                       scoring="sigmoid", sel_bias=f"{p}{b}.e_score_correction_bias")
    return llama_like(cfg, names, "minimax_m2", eps=get(cfg, "rms_norm_eps", 1e-6), rope_of=lambda i: r,
                      qk_norm="row", moe_of=moe)


def flex_olmo(cfg, names):
    bias, E = get(cfg, "attention_bias", False), cfg.get("num_experts", 7)

    def moe(i, p):
        return MoeSpec(p + "mlp.gate.weight", [tuple(f"{p}mlp.experts.{e}.{x}.weight"
                                                     for x in ("gate_proj", "up_proj", "down_proj")) for e in range(E)],
                       get(cfg, "num_experts_per_tok", 5), get(cfg, "norm_topk_prob", False))
    return llama_like(cfg, names, "flex_olmo", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=lambda i: rope(cfg, heads(cfg)[2]), qk_norm="row", post_only=True, moe_of=moe)


def afmoe(cfg, names):
    import math
    eps, hd = get(cfg, "rms_norm_eps", 1e-5), heads(cfg)[2]
    n = get(cfg, "global_attn_every_n_layers", 4)
    types = layer_types(cfg, lambda i: "sliding_attention" if (i + 1) % n else "full_attention")
    w, r = get(cfg, "sliding_window", 1024), rope(cfg, hd)
    E, dense = get(cfg, "num_experts", 64), get(cfg, "num_dense_layers", 1)
    S = get(cfg, "num_shared_experts", 2)

    def moe(i, p):
        if i < dense:
            return None
        return MoeSpec(p + "mlp.router.gate.weight",
                       [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                        for e in range(E)], get(cfg, "num_experts_per_tok", 6), True,
                       tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                       if S else None, scoring="sigmoid", sel_bias=p + "mlp.expert_bias",
                       routed_scale=get(cfg, "route_scale", 1.0))
    spec = llama_like(cfg, names, "afmoe", eps=eps, qk_norm="head", moe_of=moe,
                      rope_of=lambda i: r if types[i] == "sliding_attention" else None,
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0,
                      norm_names=("input_layernorm", "pre_mlp_layernorm"),
                      embed_scale=math.sqrt(cfg["hidden_size"]) if get(cfg, "mup_enabled", False) else 1.0)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}."
        L.post_attn_norm, L.post_mlp_norm = rms(p + "post_attention_layernorm", eps), rms(p + "post_mlp_layernorm", eps)
        L.attn_gate = p + "self_attn.gate_proj.weight"
    return spec


def minicpm5_moe(cfg, names):
    L = cfg["num_hidden_layers"]
    k = get(cfg, "first_k_dense_replace", 1)
    mlp = cfg.get("mlp_layer_types") or ["dense" if i < k else "sparse" for i in range(L)]
    E, groups, S = get(cfg, "n_routed_experts", 160), get(cfg, "n_group", 1), get(cfg, "n_shared_experts", 1)
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e6)), heads(cfg)[2])

    def moe(i, p):
        if mlp[i] == "dense":
            return None
        return MoeSpec(p + "mlp.gate.weight",
                       [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                        for e in range(E)], get(cfg, "num_experts_per_tok", 16), get(cfg, "norm_topk_prob", True),
                       tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                       if S else None, scoring="sigmoid", sel_bias=p + "mlp.gate.e_score_correction_bias",
                       n_group=groups if groups > 1 else 0, topk_group=get(cfg, "topk_group", 1) if groups > 1 else 0,
                       group_score="top2_sum", routed_scale=get(cfg, "routed_scaling_factor", 3.66))
    spec = llama_like(cfg, names, "minicpm5_moe", eps=get(cfg, "rms_norm_eps", 1e-6), rope_of=lambda i: r,
                      moe_of=moe)
    for i, layer in enumerate(spec.layers):
        layer.attn_gate = f"model.layers.{i}.self_attn.q_gate.weight"
    return spec


def lfm3(cfg, names):
    """Per layer kind: conv (ShortConvSpec), sliding / full attention (q_norm / k_norm per head, o_proj, the gate
    as an element-wise one named self_attn.out_gate); every sublayer wrapped by its norms."""
    import numpy as np

    from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec, RopeSpec, ShortConvSpec
    H, KV, hd = heads(cfg)
    eps = get(cfg, "norm_eps", 1e-5)
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0
                                       else "conv" for i in range(n)]
    spec = ModelSpec("lfm3", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.embedding_norm", eps))
    local = rope(dict(cfg, rope_scaling=None), hd, theta=get(cfg, "rope_local_base_freq", 10000.0))
    pairs = int(get(cfg, "partial_rotary_factor", 0.5) * hd // 2)
    whole = rope(dict(cfg, rope_scaling=None), hd, theta=get(cfg, "rope_theta", 1e6))

    def proportional(seq_len):
        inv, att = whole.freqs(seq_len)
        inv = np.array(inv, copy=True)
        inv[pairs:] = 0.0
        return inv, att
    full = RopeSpec(hd, proportional)
    w, sandwich = get(cfg, "sliding_window", 256), get(cfg, "use_sandwich_norm", True)
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        ff = {n_: f"{p}feed_forward.{x}.weight" for n_, x in (("gate", "w1"), ("up", "w3"), ("down", "w2"))}
        if kind == "conv":
            c = p + "conv."
            L = LayerSpec(q=None, k=None, v=None, o=None, **ff,
                          short_conv=ShortConvSpec(c + "in_proj.weight", c + "conv.weight", c + "out_proj.weight"))
        else:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          rope=full if kind == "full_attention" else local, **ff)
            L.window = w if kind == "sliding_attention" else 0
            L.q_norm = NormSpec("rms", eps, a + "q_norm.weight")
            L.k_norm = NormSpec("rms", eps, a + "k_norm.weight")
            if get(cfg, "use_attention_gate", True):
                L.attn_gate = a + "out_gate.weight"
        L.attn_norm, L.mlp_norm = rms(p + "operator_norm", eps), rms(p + "ffn_norm", eps)
        if sandwich:
            L.post_attn_norm, L.post_mlp_norm = rms(p + "post_operator_norm", eps), rms(p + "post_ffn_norm", eps)
        spec.layers.append(L)
    return spec


FAMILIES = {"lfm2_moe": lfm2_moe, "lfm3": lfm3, "afmoe": afmoe, "minicpm5_moe": minicpm5_moe, "exaone_moe": exaone_moe,
            "minimax_m2": minimax_m2, "flex_olmo": flex_olmo}
