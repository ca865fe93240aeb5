"""Cohere (Command R) and Cohere 2 (Command R7B): one bias-free LayerNorm feeding attention and MLP in parallel,
RoPE on interleaved pairs (2i, 2i+1), logits x logit_scale, tied head. Cohere may norm each head of q and k
(weights [heads, head_dim]); Cohere 2 applies RoPE only on its sliding-window layers, full layers have none."""
from trainer.reference.families.common import activation, get, heads, layer_types, rope
from trainer.reference.families.llama import attn_names, mlp_names
from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec


def _cohere(cfg, names, family, rope_of, window_of, qk_norm):
    H, KV, hd = heads(cfg)
    eps, bias = get(cfg, "layer_norm_eps", 1e-5), get(cfg, "attention_bias", False)
    if activation(cfg, "hidden_act", "silu") != "silu":
        raise ValueError(f"the reference does not model hidden_act={cfg['hidden_act']!r} of {family}")
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec(family, H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight",
                     NormSpec("layer", eps, "model.norm.weight"), parallel=True,
                     logit_scale=get(cfg, "logit_scale", 0.0625))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        L = LayerSpec(**attn_names(p, bias, bias), **mlp_names(p, False), rope=rope_of(i), window=window_of(i),
                      attn_norm=NormSpec("layer", eps, p + "input_layernorm.weight"))
        if qk_norm:
            L.q_norm = NormSpec("layer", eps, p + "self_attn.q_norm.weight")
            L.k_norm = NormSpec("layer", eps, p + "self_attn.k_norm.weight")
        spec.layers.append(L)
    return spec


def cohere(cfg, names):
    r = rope(cfg, heads(cfg)[2], interleaved=True)
    return _cohere(cfg, names, "cohere", lambda i: r, lambda i: 0, get(cfg, "use_qk_norm", False))


def cohere2(cfg, names):
    r = rope(cfg, heads(cfg)[2], interleaved=True)
    pattern = get(cfg, "sliding_window_pattern", 4)
    types = layer_types(cfg, lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention")
    w = cfg.get("sliding_window", 4096) or 0
    slides = [t == "sliding_attention" for t in types]
    return _cohere(cfg, names, "cohere2", lambda i: r if slides[i] else None, lambda i: w if slides[i] else 0,
                   False)


FAMILIES = {"cohere": cohere, "cohere2": cohere2}
