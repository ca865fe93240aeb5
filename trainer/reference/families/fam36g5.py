"""The fam36g group of issue 36, written from transformers 5.25's modeling code.

A.X-K1 (modeling_axk1): DeepSeek-V3's latent attention (always the low-rank query) and noaux_tc router (sigmoid +
e_score_correction_bias within the topk_group best of n_group groups, renormalised, x routed_scaling_factor, shared
experts), the routed layers listed by mlp_layer_types (else from first_k_dense_replace / moe_layer_freq, 1 / 1), and
the MoE block's output RMS-normed (post_mlp_layernorm, stored at the decoder layer) before its residual add. A file
without e_score_correction_bias (A.X-K1's released ones) routes on the sigmoids alone.

Laguna (modeling_laguna), ZAYA (modeling_zaya): see laguna and zaya below.
"""
import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import get, heads, layer_types, rms
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.rope import rope_freqs
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec, NormSpec, RopeSpec


def _either(names, saved, module):
    return saved if saved in names else module


def axk_config(cfg, experts: int, **defaults) -> dict:
    """A.X-K1's or A.X-K2's config as transformers resolves it: mlp_layer_types, else from the legacy
    first_k_dense_replace / moe_layer_freq (1 / 1); num_local_experts for n_routed_experts (default `experts`); the
    class's other `defaults` where the config leaves them out or null."""
    n = cfg["num_hidden_layers"]
    k, freq = cfg.get("first_k_dense_replace") or 1, get(cfg, "moe_layer_freq", 1)
    types = cfg.get("mlp_layer_types") or ["sparse" if i >= k and i % freq == 0 else "dense" for i in range(n)]
    return dict(cfg, mlp_layer_types=types, **{key: get(cfg, key, v) for key, v in defaults.items()},
                n_routed_experts=cfg.get("n_routed_experts") or cfg.get("num_local_experts") or experts)


def axk1(cfg, names):
    c = axk_config(cfg, 192, n_group=8, topk_group=4, routed_scaling_factor=2.5, rms_norm_eps=1e-6,
                   num_experts_per_tok=8, n_shared_experts=1)
    spec = _deepseek(c, names, "axk1", v3=True)
    for i, L in enumerate(spec.layers):
        if L.moe is None:
            continue
        p = f"model.layers.{i}."
        if L.moe.sel_bias not in names:
            L.moe.sel_bias = None
        L.post_mlp_norm = rms(_either(names, p + "post_mlp_layernorm.weight", p + "mlp.post_mlp_layernorm.weight")
                              [:-len(".weight")], c["rms_norm_eps"])
    return spec


FAMILIES = {"axk1": axk1}


def _rope_types(cfg, types, hd: int, default: dict) -> dict:
    """{layer type: RopeSpec} from rope_types (Petit's copy of transformers 5's per-type rope_parameters): each
    type's theta and scaling on its first head_dim x partial_rotary_factor values, by halves."""
    rp, out = cfg.get("rope_types") or default, {}
    for kind in set(types):
        e = rp[kind]
        dim = int(hd * e.get("partial_rotary_factor", 1.0))
        scaling = {k: v for k, v in e.items() if k not in ("rope_theta", "partial_rotary_factor")}
        out[kind] = RopeSpec(dim, rope_freqs(dim, float(e["rope_theta"]), scaling,
                                             get(cfg, "max_position_embeddings", 131072)))
    return out


LAGUNA_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}}


def laguna(cfg, names):
    """Laguna: the Llama block with per-head q / k RMSNorms, each layer's own query heads
    (num_attention_heads_per_layer), RoPE by halves per layer type on head_dim x that type's partial_rotary_factor
    values (transformers 5's rope_parameters per type, Petit's rope_types), the heads' output times softplus(g_proj x)
    (one gate a head with gating true / "per-head", else one a value), sliding windows on the sliding layers; the MLP
    dense where mlp_layer_types says (default the first layer), else experts chosen on sigmoid(cap tanh(logits / cap))
    + e_score_correction_bias, the chosen sigmoids renormalised, x moe_routed_scaling_factor, plus an ungated shared
    expert. The checkpoint's names (mlp.experts.e_score_correction_bias, mlp.shared_expert) or the modules'."""
    n, E = cfg["num_hidden_layers"], get(cfg, "num_experts", 256)
    hd = heads(cfg)[2]
    types = layer_types(cfg, lambda i: "full_attention")
    ropes = _rope_types(cfg, types, hd, LAGUNA_ROPE)
    mlp_types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    per_layer = cfg.get("num_attention_heads_per_layer") or [cfg["num_attention_heads"]] * n
    w = get(cfg, "sliding_window", 512)

    def moe(i, p):
        if mlp_types[i] != "sparse":
            return None
        sh = p + ("mlp.shared_expert." if p + "mlp.shared_expert.down_proj.weight" in names else "mlp.shared_experts.")
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), get(cfg, "num_experts_per_tok", 8), True,
                       shared=tuple(sh + x + ".weight" for x in ("gate_proj", "up_proj", "down_proj")),
                       scoring="sigmoid", routed_scale=float(get(cfg, "moe_routed_scaling_factor", 1.0)),
                       sel_bias=_either(names, p + "mlp.experts.e_score_correction_bias",
                                        p + "mlp.gate.e_score_correction_bias"),
                       logit_softcap=float(get(cfg, "moe_router_logit_softcapping", 0.0)))

    bias = get(cfg, "attention_bias", False)
    spec = llama_like(cfg, names, "laguna", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      qk_norm="head", moe_of=moe, rope_of=lambda i: ropes[types[i]],
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0)
    spec.heads = max(per_layer)
    per_head = get(cfg, "gating", True) in (True, "per-head")
    for i, L in enumerate(spec.layers):
        L.heads, L.attn_gate = per_layer[i], f"model.layers.{i}.self_attn.g_proj.weight"
        L.attn_gate_softplus, L.attn_gate_width = True, hd if per_head else 1
    return spec


FAMILIES["laguna"] = laguna


def zaya(cfg, names):
    """ZAYA (modeling_zaya), its own forward in float64 (ModelSpec.forward): embeddings (e + b_in) * s_in; per layer
    h = RMSNorm(x); CCA: q, k, v the projections of h (v's rows [current ; delayed]), X = [q | k] through the causal
    depthwise conv (kernel 2, X padded with two zero rows) and the grouped conv (kernel 2, a group a head), q plus
    (q + its kv head's k) / 2, k plus the mean of its heads' (q + k) / 2, v's delayed half one position later (the
    delayed projection's bias at position 0); q, k L2-normed to sqrt(head_dim), k x qk_norm.temp; RoPE by halves
    on each layer type's share (rope_types); attention (window on hybrid_sliding); x = (o + b_h) s_h + (x + b_r) s_r;
    the router r = down x' + b (+ the previous layer's r x router_states_scale), logits = out_proj gelu(fc2
    gelu(fc1 RMSNorm(r))) over the experts and the skip expert, the top 1 of softmax + balancing_biases (the skip
    expert's at -1, as transformers 5.25 loads it), weighed by its probability, the skip expert adding nothing;
    x = (moe + b_h) s_h + (x + b_r) s_r; logits = head(RMSNorm(x)) (+ its bias)."""
    n, H, KV, hd = cfg["num_hidden_layers"], cfg["num_attention_heads"], get(cfg, "num_key_value_heads", 2), \
        get(cfg, "head_dim", 128)
    E, eps, G = get(cfg, "num_experts", 16), get(cfg, "rms_norm_eps", 1e-5), H // KV
    C, Vh = (H + KV) * hd, KV * hd // 2
    types = cfg.get("layer_types") or ["hybrid"] * n
    ropes = _rope_types(cfg, types, hd, ZAYA_ROPE)
    w_ = get(cfg, "sliding_window", 0) or 0
    bias = get(cfg, "attention_bias", False)
    head = "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight"
    spec = ModelSpec("zaya", H, KV, hd, "model.embed_tokens.weight", head, rms("model.norm", eps),
                     head_b="lm_head.bias" if get(cfg, "lm_head_bias", False) else None)
    extra = ["model.input_hidden_states_scale", "model.input_hidden_states_bias"]
    for i in range(n):
        p = f"model.layers.{i}."
        a, c, g = p + "self_attn.", p + "self_attn.qkv_proj.", p + "mlp.gate."
        L = LayerSpec(q=c + "q_proj.weight", k=c + "k_proj.weight", v=c + "v_proj.weight", o=a + "o_proj.weight",
                      moe=MoeSpec(g + "router_mlp.out_proj.weight", _experts(p, "mlp", E), 1, False))
        if bias:
            L.q_b, L.k_b, L.v_b, L.o_b = c + "q_proj.bias", c + "k_proj.bias", c + "v_proj.bias", a + "o_proj.bias"
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "post_attention_layernorm", eps)
        extra += [c + f"conv_qk_{k}.{x}" for k in ("depthwise", "grouped") for x in ("weight", "bias")]
        extra += [a + "qk_norm.temp", g + "balancing_biases", g + "down_proj.weight", g + "down_proj.bias"]
        extra += [g + "router_mlp." + x for x in ("norm.weight", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]
        extra += [g + "router_states_scale"] if i else []
        extra += [f"{p}post_{s}_residual_scale.{x}_{y}" for s in ("attention", "mlp")
                  for x in ("hidden_states", "residual") for y in ("scale", "bias")]
        spec.layers.append(L)
    spec.extra_names = tuple(extra)

    def affine(fwd, x, pre, what):
        return (x + fwd.w(f"{pre}{what}_bias")) * fwd.w(f"{pre}{what}_scale")

    def cca(fwd, L, h, c):
        T = len(h)
        q, k, v = fwd.mm(h, L.q, L.q_b), fwd.mm(h, L.k, L.k_b), fwd.mm(h, L.v, L.v_b)
        X = np.concatenate([np.zeros((2, C)), np.concatenate([q, k], axis=1)])
        dw = fwd.w(c + "conv_qk_depthwise.weight").reshape(C, 2)
        y1 = (X[:-1] * dw[:, 0] + X[1:] * dw[:, 1] + fwd.w(c + "conv_qk_depthwise.bias")).reshape(T + 1, H + KV, hd)
        gw = fwd.w(c + "conv_qk_grouped.weight").reshape(H + KV, hd, hd, 2)        # [group, out, in, tap]
        y2 = (np.einsum("tgi,goi->tgo", y1[:-1], gw[..., 0]) + np.einsum("tgi,goi->tgo", y1[1:], gw[..., 1]))
        y2 = y2.reshape(T, C) + fwd.w(c + "conv_qk_grouped.bias")
        qr = (q.reshape(T, H, hd) + np.repeat(k.reshape(T, KV, hd), G, axis=1)) * 0.5
        q, k = y2[:, :H * hd].reshape(T, H, hd) + qr, y2[:, H * hd:].reshape(T, KV, hd) + qr.reshape(T, KV, G,
                                                                                                       hd).mean(2)
        first = fwd.w(L.v_b)[Vh:] if L.v_b else np.zeros(Vh)
        v = np.concatenate([v[:, :Vh], np.concatenate([first[None], v[:-1, Vh:]])], axis=1)
        return q, k, v.reshape(T, KV, hd)

    def forward(fwd, ids):
        T = len(ids)
        x = affine(fwd, fwd.w(spec.embed)[ids], "model.input_", "hidden_states")
        prev = None
        for i, L in enumerate(spec.layers):
            p = f"model.layers.{i}."
            a, g = p + "self_attn.", p + "mlp.gate."
            q, k, v = cca(fwd, L, fwd.norm(x, L.attn_norm), a + "qkv_proj.")
            l2 = lambda z: z * hd ** 0.5 / np.maximum(np.sqrt((z * z).sum(-1, keepdims=True)), 1.1920929e-07)  # noqa
            q, k = l2(q), l2(k) * fwd.w(a + "qk_norm.temp")[None, :, None]
            r = ropes[types[i]]
            inv, factor = r.freqs(T)
            q, k = ops.rotate(q, r.dim, inv, factor, False), ops.rotate(k, r.dim, inv, factor, False)
            out = ops.attention(q, k, v, hd ** -0.5, 0.0, w_ if types[i] == "hybrid_sliding" else 0)
            x = affine(fwd, fwd.mm(out, L.o, L.o_b), p + "post_attention_residual_scale.", "hidden_states") + \
                affine(fwd, x, p + "post_attention_residual_scale.", "residual")
            h = fwd.norm(x, L.mlp_norm)
            r = fwd.mm(h, g + "down_proj.weight", g + "down_proj.bias")
            r = r if prev is None else r + prev * fwd.w(g + "router_states_scale")
            prev = r
            m = g + "router_mlp."
            z = fwd.norm(r, NormSpec("rms", eps, m + "norm.weight"))
            z = ops.act("gelu", fwd.mm(ops.act("gelu", fwd.mm(z, m + "fc1.weight", m + "fc1.bias")), m + "fc2.weight",
                                       m + "fc2.bias"))
            logits = fwd.mm(z, L.moe.router)
            prob = np.exp(logits - logits.max(1, keepdims=True))
            prob /= prob.sum(1, keepdims=True)
            bal = fwd.w(g + "balancing_biases").copy()
            bal[-1] = -1.0                                   # as transformers 5.25 loads it
            top = np.argmax(prob + bal, axis=1)              # ties: the lower expert
            fwd.routing.append(top[:, None])
            moe = np.zeros_like(h)
            for e, (gate, up, down) in enumerate(L.moe.experts):
                rows = np.flatnonzero(top == e)
                if rows.size:
                    y = fwd.mm(ops.glu("silu", fwd.mm(h[rows], gate), fwd.mm(h[rows], up)), down)
                    moe[rows] = y * prob[rows, e][:, None]
            x = affine(fwd, moe, p + "post_mlp_residual_scale.", "hidden_states") + \
                affine(fwd, x, p + "post_mlp_residual_scale.", "residual")
        return fwd.mm(fwd.norm(x, spec.final_norm), spec.head, spec.head_b)

    spec.forward = forward
    return spec


ZAYA_ROPE = {"hybrid": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.5},
             "hybrid_sliding": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}}
FAMILIES["zaya"] = zaya
