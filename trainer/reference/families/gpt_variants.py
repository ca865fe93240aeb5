"""GPT-style families with their own tensor names, each written from its transformers modeling file: gptj and codegen
(one LayerNorm, parallel block, interleaved partial rotary, LM head bias; codegen's sharded qkv_proj is stored split
in a `.petit` file), gpt_neo (learned positions, unscaled scores, local layers), gpt_bigcode (multi-query c_attn,
stored split), falcon (its three layouts, stored split; ALiBi scaled with the scores), bloom (embedding LayerNorm,
ALiBi after the scale), mpt (ALiBi, clip_qkv, softmax_scale, bias-free LayerNorms), opt (positions at + 2, pre- or
post-LN; OPT-350m's project_in / project_out are stored folded into the embedding and the head)."""
import math

from trainer.reference.families.common import activation, get, rope
from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec


def _ln(name, eps, bias=True):
    return NormSpec("layer", eps, name + ".weight", name + ".bias" if bias else None)


def _bloom_slopes(n):
    """ALiBi's geometric slopes for n heads (the ALiBi paper's rule for a power of two, interleaved beyond it)."""
    p = 2 ** int(math.floor(math.log2(n)))
    out = [2.0 ** (-8.0 * k / p) for k in range(1, p + 1)]
    out += [2.0 ** (-4.0 * k / p) for k in range(1, 2 * (n - p), 2)][:n - p]
    return out


def _mpt_slopes(n, bias_max):
    m = 2 ** int(math.ceil(math.log2(n)))
    s = [2.0 ** (-k * bias_max / m) for k in range(1, m + 1)]
    return (s[1::2] + s[::2])[:n] if m != n else s


def gptj(cfg, names, family="gptj"):
    D, H = cfg["n_embd"], cfg["n_head"]
    hd, eps, P = D // H, get(cfg, "layer_norm_epsilon", 1e-5), "transformer."
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec(family, H, H, hd, P + "wte.weight", P + "wte.weight" if tied else "lm_head.weight",
                     _ln(P + "ln_f", eps), act=activation(cfg, "activation_function", "gelu_new"), parallel=True,
                     head_b="lm_head.bias")
    r = rope(dict(cfg, rope_theta=10000.0, rope_scaling=None, max_position_embeddings=get(cfg, "n_positions", 2048)),
             get(cfg, "rotary_dim", hd) or hd, interleaved=True)
    for i in range(cfg["n_layer"]):
        p = f"{P}h.{i}."
        a, m = p + "attn.", p + "mlp."
        spec.layers.append(LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight",
                                     o=a + "out_proj.weight", up=m + "fc_in.weight", up_b=m + "fc_in.bias",
                                     down=m + "fc_out.weight", down_b=m + "fc_out.bias", attn_norm=_ln(p + "ln_1", eps),
                                     rope=r))
    return spec


def codegen(cfg, names):
    return gptj(cfg, names, "codegen")


def gpt_neo(cfg, names):
    D, H, P = cfg["hidden_size"], cfg["num_heads"], "transformer."
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    types = get(cfg, "attention_types", [[["global", "local"], 12]])
    kinds = [k for group, n in types for _ in range(n) for k in group]
    w = get(cfg, "window_size", 256)
    spec = ModelSpec("gpt_neo", H, H, D // H, P + "wte.weight",
                     P + "wte.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     _ln(P + "ln_f", eps), act=activation(cfg, "activation_function", "gelu_new"), attn_scale=1.0,
                     pos_embed=P + "wpe.weight")
    for i in range(cfg["num_layers"]):
        p = f"{P}h.{i}."
        a, m = p + "attn.attention.", p + "mlp."
        spec.layers.append(LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight",
                                     o=a + "out_proj.weight", o_b=a + "out_proj.bias", up=m + "c_fc.weight",
                                     up_b=m + "c_fc.bias", down=m + "c_proj.weight", down_b=m + "c_proj.bias",
                                     attn_norm=_ln(p + "ln_1", eps), mlp_norm=_ln(p + "ln_2", eps),
                                     window=w if kinds[i] == "local" else 0))
    return spec


def gpt_bigcode(cfg, names):
    D, H, P = cfg["n_embd"], cfg["n_head"], "transformer."
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    KV = 1 if get(cfg, "multi_query", True) else H
    spec = ModelSpec("gpt_bigcode", H, KV, D // H, P + "wte.weight",
                     P + "wte.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     _ln(P + "ln_f", eps), act=activation(cfg, "activation_function", "gelu_pytorch_tanh"),
                     attn_scale=(D // H) ** -0.5 if get(cfg, "scale_attn_weights", True) else 1.0,
                     pos_embed=P + "wpe.weight")
    for i in range(cfg["n_layer"]):
        p = f"{P}h.{i}."
        a, m = p + "attn.", p + "mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "c_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "c_proj.bias",
            up=m + "c_fc.weight", up_b=m + "c_fc.bias", down=m + "c_proj.weight", down_b=m + "c_proj.bias",
            attn_norm=_ln(p + "ln_1", eps), mlp_norm=_ln(p + "ln_2", eps)))
    return spec


def falcon(cfg, names):
    D = get(cfg, "hidden_size", cfg.get("n_embed"))
    H = get(cfg, "num_attention_heads", cfg.get("n_head"))
    hd, eps, P = D // H, get(cfg, "layer_norm_epsilon", 1e-5), "transformer."
    new, alibi = get(cfg, "new_decoder_architecture", False), get(cfg, "alibi", False)
    parallel = get(cfg, "parallel_attn", True)
    KV = get(cfg, "num_kv_heads", H) if new else (1 if get(cfg, "multi_query", True) else H)
    two_norms = new and get(cfg, "num_ln_in_parallel_attn", 2) == 2
    spec = ModelSpec("falcon", H, KV, hd, P + "word_embeddings.weight",
                     P + "word_embeddings.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     _ln(P + "ln_f", eps), act=activation(cfg, "activation", "gelu"), parallel=parallel)
    r = None if alibi else rope(cfg, hd)
    slopes = [s * hd ** -0.5 for s in _bloom_slopes(H)] if alibi else None    # softmax((q.k + alibi) / sqrt(d))
    bias = get(cfg, "bias", False)
    for i in range(get(cfg, "num_hidden_layers", cfg.get("n_layer"))):
        p = f"{P}h.{i}."
        a, m = p + "self_attention.", p + "mlp."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
                      up=m + "dense_h_to_4h.weight", down=m + "dense_4h_to_h.weight", rope=r, alibi=slopes)
        if bias:
            L.q_b, L.k_b, L.v_b, L.o_b = a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias", a + "dense.bias"
            L.up_b, L.down_b = m + "dense_h_to_4h.bias", m + "dense_4h_to_h.bias"
        if two_norms:
            # a GGUF file (llama.cpp's attn_norm, attn_norm_2) read by Petit names ln_mlp input_layernorm
            second = p + ("ln_mlp" if p + "ln_mlp.weight" in names else "input_layernorm")
            L.attn_norm, L.mlp_norm = _ln(p + "ln_attn", eps), _ln(second, eps)
        else:
            L.attn_norm = _ln(p + "input_layernorm", eps)
            if not parallel:
                L.mlp_norm = _ln(p + "post_attention_layernorm", eps)
        spec.layers.append(L)
    return spec


def bloom(cfg, names):
    D = get(cfg, "hidden_size", cfg.get("n_embed"))
    H, eps, P = cfg["n_head"], get(cfg, "layer_norm_epsilon", 1e-5), "transformer."
    spec = ModelSpec("bloom", H, H, D // H, P + "word_embeddings.weight",
                     P + "word_embeddings.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     _ln(P + "ln_f", eps), act="gelu_tanh", embed_norm=_ln(P + "word_embeddings_layernorm", eps))
    slopes = _bloom_slopes(H)
    for i in range(cfg["n_layer"]):
        p = f"{P}h.{i}."
        a, m = p + "self_attention.", p + "mlp."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "dense.bias",
            up=m + "dense_h_to_4h.weight", up_b=m + "dense_h_to_4h.bias", down=m + "dense_4h_to_h.weight",
            down_b=m + "dense_4h_to_h.bias", attn_norm=_ln(p + "input_layernorm", eps),
            mlp_norm=_ln(p + "post_attention_layernorm", eps), alibi=slopes))
    return spec


def mpt(cfg, names):
    D, H, P = cfg["d_model"], cfg["n_heads"], "transformer."
    eps, a_cfg = get(cfg, "layer_norm_epsilon", 1e-5), cfg.get("attn_config") or {}
    spec = ModelSpec("mpt", H, H, D // H, P + "wte.weight",
                     P + "wte.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     _ln(P + "norm_f", eps, False), act="gelu",
                     attn_scale=a_cfg.get("softmax_scale") or (D // H) ** -0.5)
    slopes = _mpt_slopes(H, a_cfg.get("alibi_bias_max") or 8)
    for i in range(cfg["n_layers"]):
        p = f"{P}blocks.{i}."
        a, m = p + "attn.", p + "ffn."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
            up=m + "up_proj.weight", down=m + "down_proj.weight", attn_norm=_ln(p + "norm_1", eps, False),
            mlp_norm=_ln(p + "norm_2", eps, False), alibi=slopes, clip=float(a_cfg.get("clip_qkv") or 0.0)))
    return spec


def opt(cfg, names):
    D, H, P = cfg["hidden_size"], cfg["num_attention_heads"], "model.decoder."
    pre = get(cfg, "do_layer_norm_before", True)
    affine = get(cfg, "layer_norm_elementwise_affine", True)
    ln = (lambda n: _ln(n, 1e-5)) if affine else (lambda n: NormSpec("layer", 1e-5, None))
    projected = get(cfg, "word_embed_proj_dim", D) != D
    tied = get(cfg, "tie_word_embeddings", True)
    embed = P + "embed_tokens.projected.weight" if projected else P + "embed_tokens.weight"
    head = "lm_head.projected.weight" if projected else (P + "embed_tokens.weight" if tied else "lm_head.weight")
    final = ln(P + "final_layer_norm") if pre and not get(cfg, "_remove_final_layer_norm", False) else None
    spec = ModelSpec("opt", H, H, D // H, embed, head, final, act=activation(cfg, "activation_function", "relu"),
                     pos_embed=P + "embed_positions.weight", pos_offset=2)
    bias = get(cfg, "enable_bias", True)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{P}layers.{i}."
        a = p + "self_attn."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
                      up=p + "fc1.weight", down=p + "fc2.weight")
        if bias:
            L.q_b, L.k_b, L.v_b, L.o_b = (a + n + ".bias" for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
            L.up_b, L.down_b = p + "fc1.bias", p + "fc2.bias"
        if pre:
            L.attn_norm, L.mlp_norm = ln(p + "self_attn_layer_norm"), ln(p + "final_layer_norm")
        else:
            L.resid_attn_norm, L.resid_mlp_norm = ln(p + "self_attn_layer_norm"), ln(p + "final_layer_norm")
        spec.layers.append(L)
    return spec


FAMILIES = {"gptj": gptj, "codegen": codegen, "gpt_neo": gpt_neo, "gpt_bigcode": gpt_bigcode, "falcon": falcon,
            "bloom": bloom, "mpt": mpt, "opt": opt}
