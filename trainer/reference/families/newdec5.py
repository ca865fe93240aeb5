"""The newdec group of issue 36, written from transformers 5.25's modeling_mistral4.py: mistral4 (DeepSeek-V3's spec,
trainer/reference/families/deepseek.py, with the router choosing on the softmax of its logits and no correction bias,
Mistral 4's defaults, and every query x (1 + beta ln(1 + floor(p / n))), llama_4_scaling [beta, n]); mistral3 whose
text_model_type is mistral4 (Mistral Small 4's folder as Petit converts it), the other mistral3 files as the wrap
group reads them; step3p5 and step3p7 (Step 3.7's language model, from modeling_step3p7.py, as Petit converts it:
the text model's config flat, legacy keys read, Petit's rope_types): Laguna's spec (fam36g5) with Gemma's (1 + w)
norms (q / k's too), the softmax scale query_pre_attn_scalar^-0.5, sigmoid head gates, the sliding layers' own
query heads, MiniMax-M3's router x moe_router_scaling_factor and the SwiGLU clamped after the activation per layer;
muse_glimmer_text and muse_glimmer (from modeling_muse_glimmer.py): Gemma 2's sandwich (trainer/reference/families/
gemma.py's _gemma) with the embeddings RMS-normed without a weight and not scaled, q / k RMS-normed per head without
a weight, the scale qk_scale_factor / sqrt(head_dim), no attention soft-cap, the output x sigmoid(gate_proj x) per
value, the post norms' eps post_norm_eps, RoPE where layer_rope_theta is not 0, the final norm x w, the logits x
output_multiplier then soft-capped."""
from trainer.reference.families import wrap5
from trainer.reference.families.common import get, heads, layer_types, rms
from trainer.reference.families.gemma import _gemma
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.fam36g5 import _rope_types
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import MoeSpec, NormSpec

M4_ROPE = {"rope_type": "yarn", "factor": 128.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0,
           "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0}
M4_DEFAULTS = {"rms_norm_eps": 1e-6, "first_k_dense_replace": 0, "n_group": 1, "topk_group": 1,
               "routed_scaling_factor": 1.0, "norm_topk_prob": True, "max_position_embeddings": 1048576,
               "rope_scaling": M4_ROPE}


def mistral4(cfg, names, family="mistral4"):
    c = {**M4_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}, "scoring_func": "softmax"}
    spec = _deepseek(c, names, family, v3=True)
    for L in spec.layers:
        if L.moe is not None:
            L.moe.sel_bias = None
    beta, n = cfg.get("llama_4_scaling") or (0.1, 8192)
    if beta:
        for L in spec.layers:
            L.temperature = (float(n), float(beta), 1)
    return spec


def mistral3(cfg, names):
    if cfg.get("text_model_type") == "mistral4":
        return mistral4(cfg, names, "mistral3")
    return wrap5.mistral3(cfg, names)


STEP_ROPE = {k: {"rope_type": "default", "rope_theta": 10000.0} for k in ("full_attention", "sliding_attention")}


def step3p5(cfg, names, family="step3p5"):
    n, E = cfg["num_hidden_layers"], cfg["n_routed_experts"]
    hd, eps = heads(cfg)[2], get(cfg, "rms_norm_eps", 1e-5)
    types = layer_types(cfg, lambda i: "full_attention")
    ropes = _rope_types(cfg, types, hd, STEP_ROPE)
    plc = cfg.get("per_layer_config")
    sliding = cfg.get("num_sliding_attention_heads") or cfg["num_attention_heads"]
    per_layer = [(plc.get(str(i), {}) if plc is not None else {}).get(
        "num_attention_heads", cfg["num_attention_heads"] if plc is not None or t != "sliding_attention" else sliding)
        for i, t in enumerate(types)]
    lim, lim_sh = cfg.get("swiglu_limits") or [0.0] * n, cfg.get("swiglu_limits_shared") or [0.0] * n
    w = cfg.get("sliding_window") or 0

    def moe(i, p):
        if cfg["mlp_layer_types"][i] != "sparse":
            return None
        m = MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"], True,
                    shared=tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")),
                    scoring="sigmoid", routed_scale=float(get(cfg, "moe_router_scaling_factor", 1.0)),
                    sel_bias=p + "mlp.gate.e_score_correction_bias")
        m.swiglu_limit, m.limit_after_act, m.sh_swiglu_limit = float(lim[i] or 0.0), True, float(lim_sh[i] or 0.0)
        return m

    spec = llama_like(cfg, names, family, eps=eps, qk_norm="head", moe_of=moe, rope_of=lambda i: ropes[types[i]],
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0,
                      norm=lambda name: NormSpec("rms", eps, name + ".weight", add=1.0),
                      attn_scale=float(cfg.get("query_pre_attn_scalar") or hd) ** -0.5)
    spec.heads = max(per_layer)
    for i, L in enumerate(spec.layers):
        L.q_norm.add = L.k_norm.add = 1.0
        L.heads, L.attn_gate = per_layer[i], f"model.layers.{i}.self_attn.g_proj.weight"
        L.attn_gate_width = hd
    return spec


def step3p7(cfg, names):
    return step3p5(cfg, names, "step3p7")


def muse_glimmer_text(cfg, names, family="muse_glimmer_text"):
    n, hd = cfg["num_hidden_layers"], heads(cfg)[2]
    eps, post = get(cfg, "rms_norm_eps", 1e-5), get(cfg, "post_norm_eps", 1e-8)
    types = layer_types(cfg, lambda i: "full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention")
    thetas = cfg.get("layer_rope_theta") or [0 if (n - 1 - i) % 4 == 0 else 1 for i in range(n)]
    w = get(cfg, "sliding_window", 2048) or 0
    c = dict(cfg, tie_word_embeddings=get(cfg, "tie_word_embeddings", False),
             hidden_activation=get(cfg, "hidden_activation", "silu"))
    spec = _gemma(c, names, family, "hidden_activation", sandwich=True,
                  windows=lambda i: w if types[i] == "sliding_attention" else 0,
                  attn_scale=float(get(cfg, "qk_scale_factor", 3.87)) * hd ** -0.5,
                  logit_scale=float(get(cfg, "output_multiplier", 0.19611613513818404)),
                  logit_softcap=float(get(cfg, "final_logit_softcapping", 20.0)))
    spec.embed_scale, spec.embed_norm = 1.0, NormSpec("rms", eps, None)
    spec.final_norm = rms("model.norm", eps)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}."
        L.rope = L.rope if thetas[i] else None
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps, 1.0), rms(p + "pre_feedforward_layernorm", eps, 1.0)
        L.post_attn_norm = rms(p + "post_attention_layernorm", post, 1.0)
        L.post_mlp_norm = rms(p + "post_feedforward_layernorm", post, 1.0)
        L.q_norm, L.k_norm = NormSpec("rms", eps, None), NormSpec("rms", eps, None)
        L.qk_norm_over_heads = True
        L.attn_gate = p + "self_attn.gate_proj.weight"
    return spec


def muse_glimmer(cfg, names):
    return muse_glimmer_text(cfg, names, "muse_glimmer")


FAMILIES = {"mistral4": mistral4, "mistral3": mistral3, "step3p5": step3p5, "step3p7": step3p7,
            "muse_glimmer_text": muse_glimmer_text, "muse_glimmer": muse_glimmer}
