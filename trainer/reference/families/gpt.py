"""Families with LayerNorm and biases, each with its own tensor names: gpt2 (learned positions, Conv1D weights stored
transposed and c_attn split into q/k/v in a `.petit` file), gpt_neox (Pythia: partial rotary, parallel residual
with two norms), phi (one norm, parallel block, head bias), starcoder2 (plain GELU MLP, biases everywhere), stablelm
(partial rotary, optional per-head q/k LayerNorm, optional parallel block)."""
from trainer.reference.families.common import activation, get, heads, layer, refuse, rope
from trainer.reference.families.llama import attn_names, mlp_names
from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec


def gpt2(cfg, names):
    refuse(cfg, scale_attn_by_inverse_layer_idx=False)
    D, H, P = cfg["n_embd"], cfg["n_head"], "transformer."
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("gpt2", H, H, D // H, P + "wte.weight", P + "wte.weight" if tied else "lm_head.weight",
                     layer(P + "ln_f", eps, names), act=activation(cfg, "activation_function", "gelu_new"),
                     attn_scale=(D // H) ** -0.5 if get(cfg, "scale_attn_weights", True) else 1.0,
                     pos_embed=P + "wpe.weight")
    for i in range(cfg["n_layer"]):
        a, m = f"{P}h.{i}.attn.", f"{P}h.{i}.mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "c_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "c_proj.bias",
            up=m + "c_fc.weight", up_b=m + "c_fc.bias", down=m + "c_proj.weight", down_b=m + "c_proj.bias",
            attn_norm=layer(f"{P}h.{i}.ln_1", eps, names), mlp_norm=layer(f"{P}h.{i}.ln_2", eps, names)))
    return spec


def gpt_neox(cfg, names):
    H, P = cfg["num_attention_heads"], "gpt_neox."
    hd, eps = cfg["hidden_size"] // H, get(cfg, "layer_norm_eps", 1e-5)
    pct = cfg.get("rotary_pct") or cfg.get("partial_rotary_factor") or 0.25       # rotary_pct wins (transformers)
    theta = cfg.get("rotary_emb_base") or cfg.get("rope_theta") or 10000
    bias = get(cfg, "attention_bias", True)
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec("gpt_neox", H, H, hd, P + "embed_in.weight", P + "embed_in.weight" if tied else "embed_out.weight",
                     layer(P + "final_layer_norm", eps, names), act=activation(cfg, "hidden_act", "gelu"),
                     parallel=get(cfg, "use_parallel_residual", True))
    r = rope(cfg, int(hd * pct), theta=theta)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{P}layers.{i}."
        a, m = p + "attention.", p + "mlp."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
                      up=m + "dense_h_to_4h.weight", up_b=m + "dense_h_to_4h.bias",
                      down=m + "dense_4h_to_h.weight", down_b=m + "dense_4h_to_h.bias", rope=r,
                      attn_norm=layer(p + "input_layernorm", eps, names),
                      mlp_norm=layer(p + "post_attention_layernorm", eps, names))
        if bias:
            L.q_b, L.k_b, L.v_b, L.o_b = (a + n + ".bias" for n in ("q_proj", "k_proj", "v_proj", "dense"))
        spec.layers.append(L)
    return spec


def phi(cfg, names):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "layer_norm_eps", 1e-5)
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec("phi", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight",
                     layer("model.final_layernorm", eps, names), act=activation(cfg, "hidden_act", "gelu_new"),
                     parallel=True, head_b="lm_head.bias")
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
                      q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "dense.bias",
                      up=m + "fc1.weight", up_b=m + "fc1.bias", down=m + "fc2.weight", down_b=m + "fc2.bias",
                      attn_norm=layer(p + "input_layernorm", eps, names), rope=r)
        if get(cfg, "qk_layernorm", False):
            L.q_norm, L.k_norm = layer(a + "q_layernorm", eps, names), layer(a + "k_layernorm", eps, names)
        spec.layers.append(L)
    return spec


def starcoder2(cfg, names):
    H, KV, hd = heads(cfg)
    eps, bias = get(cfg, "norm_epsilon", 1e-5), get(cfg, "use_bias", True)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("starcoder2", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight", layer("model.norm", eps, names),
                     act=activation(cfg, "hidden_act", "gelu_pytorch_tanh"))
    r, w = rope(cfg, hd), cfg.get("sliding_window") or 0
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        m = p + "mlp."
        L = LayerSpec(**attn_names(p, bias, bias), up=m + "c_fc.weight", down=m + "c_proj.weight", rope=r, window=w,
                      attn_norm=layer(p + "input_layernorm", eps, names),
                      mlp_norm=layer(p + "post_attention_layernorm", eps, names))
        if bias:
            L.up_b, L.down_b = m + "c_fc.bias", m + "c_proj.bias"
        spec.layers.append(L)
    return spec


def stablelm(cfg, names):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "layer_norm_eps", 1e-5)
    if activation(cfg, "hidden_act", "silu") != "silu":
        raise ValueError(f"the reference does not model hidden_act={cfg['hidden_act']!r} of stablelm")
    parallel = get(cfg, "use_parallel_residual", False)
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec("stablelm", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight", layer("model.norm", eps, names),
                     parallel=parallel)
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.25)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        L = LayerSpec(**attn_names(p, get(cfg, "use_qkv_bias", False), False), **mlp_names(p, False), rope=r,
                      attn_norm=layer(p + "input_layernorm", eps, names))
        if not parallel:
            L.mlp_norm = layer(p + "post_attention_layernorm", eps, names)
        if get(cfg, "qk_layernorm", False):          # one bias-free LayerNorm per head: weights [heads, head_dim]
            L.q_norm = NormSpec("layer", eps, p + "self_attn.q_layernorm.weight")
            L.k_norm = NormSpec("layer", eps, p + "self_attn.k_layernorm.weight")
        spec.layers.append(L)
    return spec


FAMILIES = {"gpt2": gpt2, "gpt_neox": gpt_neox, "phi": phi, "starcoder2": starcoder2, "stablelm": stablelm}
