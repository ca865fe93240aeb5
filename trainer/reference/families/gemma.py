"""Gemma, Gemma 2, Gemma 3 (text): embeddings x sqrt(hidden_size), RMSNorm with (1 + w) weights, a gated GELU MLP
(Gemma 1 computes with hidden_act, 2 and 3 with hidden_activation), tied head. Gemma 2 / 3 wrap both sublayers in
norms, scale the scores by query_pre_attn_scalar^-1/2 and slide the window on some layers; Gemma 2 soft-caps the
scores and the logits; Gemma 3 norms each head of q and k and gives sliding layers their own RoPE base (no
scaling), and ignores attn_logit_softcapping."""
from trainer.reference.families.common import activation, get, heads, layer_types, rms, rope
from trainer.reference.families.llama import attn_names, mlp_names
from trainer.reference.spec import LayerSpec, ModelSpec


def _gemma(cfg, names, family, act_key, sandwich=False, windows=None, rope_of=None, qk_norm=False, **model_kw):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    bias = get(cfg, "attention_bias", False)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec(family, H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight", rms("model.norm", eps, 1.0),
                     act=activation(cfg, act_key, "gelu_pytorch_tanh"), embed_scale=cfg["hidden_size"] ** 0.5,
                     **model_kw)
    default = rope(cfg, hd)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        L = LayerSpec(**attn_names(p, bias, bias), **mlp_names(p, False), rope=rope_of(i) if rope_of else default,
                      window=windows(i) if windows else 0, attn_norm=rms(p + "input_layernorm", eps, 1.0))
        if sandwich:
            L.post_attn_norm = rms(p + "post_attention_layernorm", eps, 1.0)
            L.mlp_norm = rms(p + "pre_feedforward_layernorm", eps, 1.0)
            L.post_mlp_norm = rms(p + "post_feedforward_layernorm", eps, 1.0)
        else:
            L.mlp_norm = rms(p + "post_attention_layernorm", eps, 1.0)
        if qk_norm:
            L.q_norm, L.k_norm = rms(p + "self_attn.q_norm", eps, 1.0), rms(p + "self_attn.k_norm", eps, 1.0)
        spec.layers.append(L)
    return spec


def gemma(cfg, names):
    return _gemma(cfg, names, "gemma", "hidden_act")


def _windows(cfg, pattern):
    types = layer_types(cfg, lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention")
    w = cfg.get("sliding_window", 4096) or 0
    return types, (lambda i: w if types[i] == "sliding_attention" else 0)


def gemma2(cfg, names):
    _, windows = _windows(cfg, 2)
    return _gemma(cfg, names, "gemma2", "hidden_activation", sandwich=True, windows=windows,
                  attn_scale=get(cfg, "query_pre_attn_scalar", 256) ** -0.5,
                  attn_softcap=cfg.get("attn_logit_softcapping", 50.0) or 0.0,
                  logit_softcap=cfg.get("final_logit_softcapping", 30.0) or 0.0)


def gemma3_text(cfg, names):
    if cfg.get("use_bidirectional_attention"):
        raise ValueError("the reference does not model use_bidirectional_attention=true of gemma3_text")
    types, windows = _windows(cfg, get(cfg, "sliding_window_pattern", 6))
    hd = heads(cfg)[2]
    full = rope(cfg, hd, theta=get(cfg, "rope_theta", 1_000_000.0))        # transformers' default for Gemma 3
    local = rope(cfg, hd, theta=get(cfg, "rope_local_base_freq", 10000.0), scaling=None)
    return _gemma(cfg, names, "gemma3_text", "hidden_activation", sandwich=True, windows=windows, qk_norm=True,
                  rope_of=lambda i: local if types[i] == "sliding_attention" else full,
                  attn_scale=get(cfg, "query_pre_attn_scalar", 256) ** -0.5,
                  logit_softcap=cfg.get("final_logit_softcapping") or 0.0)


FAMILIES = {"gemma": gemma, "gemma2": gemma2, "gemma3_text": gemma3_text}
