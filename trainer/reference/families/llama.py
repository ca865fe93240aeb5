"""Families with Llama's tensor names (`model.layers.N.self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`, ...):
llama (every rope_scaling), mistral, qwen2, qwen3, phi3, olmo2, granite, smollm3. The semantics are transformers'
(see tests/fixtures/hf/README.md); phi3's fused qkv_proj / gate_up_proj are stored split in a `.petit` file."""
from trainer.reference.families.common import activation, get, heads, layer_types, refuse, rms, rope
from trainer.reference.spec import LayerSpec, ModelSpec


def attn_names(p: str, bias: bool, o_bias: bool) -> dict:
    a = p + "self_attn."
    out = {n: a + f"{n}_proj.weight" for n in "qkvo"}
    if bias:
        out.update({f"{n}_b": a + f"{n}_proj.bias" for n in "qkv"})
    if o_bias:
        out["o_b"] = a + "o_proj.bias"
    return out


def mlp_names(p: str, bias: bool) -> dict:
    m = p + "mlp."
    out = {n: m + f"{n}_proj.weight" for n in ("gate", "up", "down")}
    if bias:
        out.update({f"{n}_b": m + f"{n}_proj.bias" for n in ("gate", "up", "down")})
    return out


def llama_like(cfg, names, family, *, eps, qkv_bias=False, o_bias=False, mlp_bias=False, rope_of=None,
               window_of=None, qk_norm=None, post_only=False, moe_of=None, plain_mlp=False, norm=None,
               norm_names=("input_layernorm", "post_attention_layernorm"), tied=False, **model_kw) -> ModelSpec:
    """The Llama block: x + attn(norm(x)), then x + mlp(norm(x)); rope_of(i) / window_of(i) per layer.
    plain_mlp: down(act(up x)) with no gate; norm(name) -> NormSpec: the norms' kind (default RMSNorm with eps);
    norm_names: the two pre-norms; tied: the default of tie_word_embeddings. A model_kw act other than silu
    replaces the check of hidden_act."""
    H, KV, hd = heads(cfg)
    if "act" not in model_kw and activation(cfg, "hidden_act", "silu") != "silu":
        raise ValueError(f"the reference does not model hidden_act={cfg['hidden_act']!r} of {family}")
    norm = norm or (lambda name: rms(name, eps))
    spec = ModelSpec(family, H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", tied) else "lm_head.weight",
                     norm("model.norm"), **model_kw)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        moe = moe_of(i, p) if moe_of else None
        mlp = {"moe": moe} if moe else mlp_names(p, mlp_bias)
        if plain_mlp:
            mlp = {k: v for k, v in mlp.items() if not k.startswith("gate")}
        L = LayerSpec(**attn_names(p, qkv_bias, o_bias), **mlp,
                      rope=rope_of(i) if rope_of else None, window=window_of(i) if window_of else 0)
        if post_only:                       # OLMo 2: norms after each sublayer, none before
            L.post_attn_norm, L.post_mlp_norm = norm(p + "post_attention_layernorm"), \
                norm(p + "post_feedforward_layernorm")
        else:
            L.attn_norm, L.mlp_norm = norm(p + norm_names[0]), norm(p + norm_names[1])
        if qk_norm:
            L.q_norm, L.k_norm = rms(p + "self_attn.q_norm", eps), rms(p + "self_attn.k_norm", eps)
            L.qk_norm_over_heads = qk_norm == "head"
        spec.layers.append(L)
    return spec


def _one_rope(cfg, dim=None, interleaved=False):
    r = rope(cfg, dim or heads(cfg)[2], interleaved=interleaved)
    return lambda i: r


def llama(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "llama", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=_one_rope(cfg, interleaved=get(cfg, "rope_interleaved", False)))


def mistral(cfg, names):
    w = cfg.get("sliding_window", 4096) or 0
    return llama_like(cfg, names, "mistral", eps=get(cfg, "rms_norm_eps", 1e-6), rope_of=_one_rope(cfg),
                      window_of=lambda i: w)


def _qwen_windows(cfg):
    """A layer slides only when use_sliding_window and i >= max_window_layers (or as layer_types says)."""
    sliding = get(cfg, "use_sliding_window", False) and cfg.get("sliding_window")
    first = get(cfg, "max_window_layers", 28)
    types = layer_types(cfg, lambda i: "sliding_attention" if sliding and i >= first else "full_attention")
    w = cfg.get("sliding_window") or 0
    return lambda i: w if types[i] == "sliding_attention" else 0


def qwen2(cfg, names):
    return llama_like(cfg, names, "qwen2", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=True,
                      rope_of=_one_rope(cfg), window_of=_qwen_windows(cfg))


def qwen3(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "qwen3", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=_one_rope(cfg), window_of=_qwen_windows(cfg), qk_norm="head")


def phi3(cfg, names):
    refuse(cfg, attention_bias=False)
    hd = heads(cfg)[2]
    w = cfg.get("sliding_window") or 0
    return llama_like(cfg, names, "phi3", eps=get(cfg, "rms_norm_eps", 1e-5),
                      rope_of=_one_rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 1.0))),
                      window_of=lambda i: w)


def olmo2(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "olmo2", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      rope_of=_one_rope(cfg), qk_norm="row", post_only=True)


def granite(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "granite", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=_one_rope(cfg, interleaved=get(cfg, "rope_interleaved", False)),
                      embed_scale=get(cfg, "embedding_multiplier", 1.0),
                      attn_scale=get(cfg, "attention_multiplier", 1.0),
                      residual_scale=get(cfg, "residual_multiplier", 1.0),
                      logit_scale=1.0 / get(cfg, "logits_scaling", 1.0))


def smollm3(cfg, names):
    """no_rope_layers[i] == 1: layer i uses RoPE; 0: no position encoding (by default every 4th layer)."""
    n, interval = cfg["num_hidden_layers"], get(cfg, "no_rope_layer_interval", 4)
    uses = get(cfg, "no_rope_layers", [int((i + 1) % interval != 0) for i in range(n)])
    r = rope(cfg, heads(cfg)[2], interleaved=get(cfg, "rope_interleaved", False))
    sliding = get(cfg, "use_sliding_window", False) and cfg.get("sliding_window")
    first = get(cfg, "max_window_layers", 0)
    types = layer_types(cfg, lambda i: "sliding_attention" if sliding and i >= first else "full_attention")
    bias = get(cfg, "attention_bias", False)
    spec = llama_like(dict(cfg, tie_word_embeddings=get(cfg, "tie_word_embeddings", True)), names, "smollm3",
                      eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False), rope_of=lambda i: r if uses[i] else None,
                      window_of=lambda i: (cfg.get("sliding_window") or 0) if types[i] == "sliding_attention" else 0)
    return spec


FAMILIES = {"llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3, "phi3": phi3, "olmo2": olmo2,
            "granite": granite, "smollm3": smollm3}
