"""Llama-named families that change a few pieces of its block, each written from its transformers modeling file:
helium (interleaved RoPE), seed_oss (its own o_proj bias switch), ernie4_5 (interleaved RoPE, one bias switch),
internlm3 (q/k/v biases by qkv_bias, o_proj and MLP biases by bias, from its remote modeling code),
ministral (per-layer sliding windows), arcee (down(relu²(up x))), olmo (LayerNorm without weights, clip_qkv),
olmo3 (OLMo 2 with sliding layers whose RoPE is unscaled), glm / glm4 (interleaved partial rotary, glm4's
post-sublayer norms), exaone4 (post-norms, per-head q/k norms, NoPE full layers), vaultgemma (Gemma 2 without
post-norms), apertus (xIELU MLP, per-head q/k norms), nemotron (LayerNorm1P, relu², partial rotary),
hunyuan_v1_dense (per-head q/k norms after RoPE), persimmon (LayerNorm with bias, per-head q/k LayerNorms, relu²),
bitnet (ternary projections, sub-norms before o_proj and down_proj).
Fused checkpoint matrices (glm's gate_up_proj, persimmon's query_key_value) are stored split in a `.petit` file."""
from trainer.reference.families.common import get, heads, layer_types, rms, rope
from trainer.reference.families.gemma import _gemma, _windows
from trainer.reference.families.llama import llama_like
from trainer.reference.spec import LayerSpec, ModelSpec, NormSpec


def _rope(cfg, dim=None, **kw):
    r = rope(cfg, dim or heads(cfg)[2], **kw)
    return lambda i: r


def helium(cfg, names):
    return llama_like(cfg, names, "helium", eps=get(cfg, "rms_norm_eps", 1e-8), qkv_bias=get(cfg, "attention_bias",
                      False), mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=_rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 1e5)), interleaved=True))


def seed_oss(cfg, names):
    return llama_like(cfg, names, "seed_oss", eps=get(cfg, "rms_norm_eps", 1e-6),
                      qkv_bias=get(cfg, "attention_bias", True), o_bias=get(cfg, "attention_out_bias", False),
                      mlp_bias=get(cfg, "mlp_bias", False), rope_of=_rope(cfg))


def internlm3(cfg, names):
    return llama_like(cfg, names, "internlm3", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=get(cfg, "qkv_bias", False),
                      o_bias=get(cfg, "bias", False), mlp_bias=get(cfg, "bias", False), rope_of=_rope(cfg))


def ernie4_5(cfg, names):
    bias = get(cfg, "use_bias", False)
    return llama_like(cfg, names, "ernie4_5", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=bias, rope_of=_rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5)),
                                                   interleaved=True), tied=True)


def _windows_of(cfg, types):
    w = cfg.get("sliding_window") or 0
    return lambda i: w if types[i] == "sliding_attention" else 0


def ministral(cfg, names):
    types = layer_types(cfg, lambda i: "sliding_attention" if cfg.get("sliding_window") else "full_attention")
    return llama_like(cfg, names, "ministral", eps=get(cfg, "rms_norm_eps", 1e-6), rope_of=_rope(cfg),
                      window_of=_windows_of(cfg, types))


def arcee(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "arcee", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=_rope(cfg, interleaved=get(cfg, "rope_interleaved", False)),     # a GGUF file's pairs
                      plain_mlp=True, act="relu2")


def olmo(cfg, names):
    bias = get(cfg, "attention_bias", False)
    spec = llama_like(cfg, names, "olmo", eps=1e-5, qkv_bias=bias, o_bias=bias,
                      rope_of=_rope(cfg, interleaved=get(cfg, "rope_interleaved", False)),     # a GGUF file's pairs
                      norm=lambda name: NormSpec("layer", 1e-5, None))
    for L in spec.layers:
        L.clip = float(cfg.get("clip_qkv") or 0.0)
    return spec


def olmo3(cfg, names):
    bias = get(cfg, "attention_bias", False)
    types = layer_types(cfg, lambda i: "full_attention" if (i + 1) % 4 == 0 else "sliding_attention")
    full, local = rope(cfg, heads(cfg)[2]), rope(cfg, heads(cfg)[2], scaling=None)
    return llama_like(cfg, names, "olmo3", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      rope_of=lambda i: local if types[i] == "sliding_attention" else full,
                      window_of=_windows_of(cfg, types), qk_norm="row", post_only=True)


def glm(cfg, names, family="glm"):
    hd = get(cfg, "head_dim", 128)
    cfg = dict(cfg, head_dim=hd)
    spec = llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1.5625e-07),
                      qkv_bias=get(cfg, "attention_bias", True),
                      rope_of=_rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5)), interleaved=True))
    return spec


def glm4(cfg, names):
    spec = glm(cfg, names, "glm4")
    eps = get(cfg, "rms_norm_eps", 1.5625e-07)
    for i, L in enumerate(spec.layers):
        L.post_attn_norm = rms(f"model.layers.{i}.post_self_attn_layernorm", eps)
        L.post_mlp_norm = rms(f"model.layers.{i}.post_mlp_layernorm", eps)
    return spec


def exaone4(cfg, names):
    w = cfg.get("sliding_window", 4096)
    n = get(cfg, "sliding_window_pattern", 4)
    types = layer_types(cfg, lambda i: "sliding_attention" if w and (i + 1) % n else "full_attention")
    r = rope(cfg, heads(cfg)[2])
    return llama_like(cfg, names, "exaone4", eps=get(cfg, "rms_norm_eps", 1e-5),
                      rope_of=lambda i: None if w and types[i] == "full_attention" else r,
                      window_of=_windows_of(dict(cfg, sliding_window=w), types), qk_norm="head", post_only=True)


def vaultgemma(cfg, names):
    _, windows = _windows(cfg, 2)
    spec = _gemma(cfg, names, "vaultgemma", "hidden_activation", windows=windows,
                  attn_scale=get(cfg, "query_pre_attn_scalar", 256) ** -0.5,
                  attn_softcap=cfg.get("attn_logit_softcapping", 50.0) or 0.0,
                  logit_softcap=cfg.get("final_logit_softcapping", 30.0) or 0.0)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    for i, L in enumerate(spec.layers):
        L.mlp_norm = rms(f"model.layers.{i}.pre_feedforward_layernorm", eps, 1.0)
    return spec


def apertus(cfg, names):
    bias = get(cfg, "attention_bias", False)
    scaling = cfg.get("rope_scaling", {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0})
    cfg = dict(cfg, rope_theta=get(cfg, "rope_theta", 12e6), rope_scaling=scaling,
               max_position_embeddings=get(cfg, "max_position_embeddings", 65536))
    spec = llama_like(cfg, names, "apertus", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      rope_of=_rope(cfg), qk_norm="head", plain_mlp=True, act="none",
                      norm_names=("attention_layernorm", "feedforward_layernorm"))
    for i, L in enumerate(spec.layers):
        a = f"model.layers.{i}.mlp.act_fn."
        L.xielu = (a + "alpha_p", a + "alpha_n", a + "beta", a + "eps")
        L.xielu_bf16 = get(cfg, "xielu_bf16", True)       # False: a GGUF file, as llama.cpp computes xIELU
    return spec


def nemotron(cfg, names):
    eps, bias = get(cfg, "norm_eps", 1e-5), get(cfg, "attention_bias", False)
    hd = heads(cfg)[2]
    return llama_like(cfg, names, "nemotron", eps=eps, qkv_bias=bias, o_bias=bias, mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=_rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5))), plain_mlp=True,
                      act="relu2", norm=lambda name: NormSpec("layer", eps, name + ".weight", name + ".bias", 1.0))


def hunyuan_v1_dense(cfg, names, kind="hunyuan_v1_dense", moe_of=None):
    """Also Hunyuan V1 MoE's attention and norms (`kind`, `moe_of` from moe.py)."""
    hd = heads(cfg)[2]
    s = cfg.get("rope_scaling") or {}
    theta = get(cfg, "rope_theta", 10000.0)
    if s.get("rope_type", s.get("type")) == "dynamic" and s.get("alpha"):    # NTK-alpha: a fixed larger base
        theta, s = theta * s["alpha"] ** (hd / (hd - 2)), None
    r = rope(dict(cfg, rope_scaling=s or None), hd, theta=theta)
    bias, eps = get(cfg, "attention_bias", False), get(cfg, "rms_norm_eps", 1e-5)
    spec = llama_like(cfg, names, kind, eps=eps, qkv_bias=bias, o_bias=bias, rope_of=lambda i: r, moe_of=moe_of)
    for i, L in enumerate(spec.layers):
        a = f"model.layers.{i}.self_attn."
        L.q_norm, L.k_norm = rms(a + "query_layernorm", eps), rms(a + "key_layernorm", eps)
        L.norm_after_rope = True
    return spec


def persimmon(cfg, names):
    H = cfg["num_attention_heads"]
    hd, eps = cfg["hidden_size"] // H, get(cfg, "layer_norm_eps", 1e-5)
    ln = lambda name: NormSpec("layer", eps, name + ".weight", name + ".bias")      # noqa: E731
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec("persimmon", H, H, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight", ln("model.final_layernorm"),
                     act="relu2")
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 25000.0)), int(hd * get(cfg, "partial_rotary_factor", 0.5)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a, m = p + "self_attn.", p + "mlp."
        L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "dense.weight",
                      q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "dense.bias",
                      up=m + "dense_h_to_4h.weight", up_b=m + "dense_h_to_4h.bias", down=m + "dense_4h_to_h.weight",
                      down_b=m + "dense_4h_to_h.bias", attn_norm=ln(p + "input_layernorm"),
                      mlp_norm=ln(p + "post_attention_layernorm"), rope=r)
        if get(cfg, "qk_layernorm", True):
            L.q_norm, L.k_norm = ln(a + "q_layernorm"), ln(a + "k_layernorm")
        spec.layers.append(L)
    return spec


def bitnet(cfg, names):
    """Its projections are stored as tq2 (ternary) rows in a .petit file, which the forward multiplies with BitNet's
    per-token int8 rounding of their inputs (transformers' ActQuant): what the model computes, not an engine
    approximation. llama.cpp's bitnet files run with a silu MLP (hidden_act silu) and float projections, stored as
    such."""
    eps = get(cfg, "rms_norm_eps", 1e-5)
    act = get(cfg, "hidden_act", "relu2")
    if act not in ("relu2", "silu"):
        raise ValueError(f"the reference does not model hidden_act={act!r} of bitnet")
    spec = llama_like(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5)), names, "bitnet", eps=eps, act=act,
                      rope_of=_rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5))))
    for i, L in enumerate(spec.layers):
        L.o_norm = rms(f"model.layers.{i}.self_attn.attn_sub_norm", eps)
        L.down_norm = rms(f"model.layers.{i}.mlp.ffn_sub_norm", eps)
    return spec


FAMILIES = {"helium": helium, "seed_oss": seed_oss, "ernie4_5": ernie4_5, "ministral": ministral, "arcee": arcee,
            "olmo": olmo, "olmo3": olmo3, "glm": glm, "glm4": glm4, "exaone4": exaone4, "vaultgemma": vaultgemma,
            "apertus": apertus, "nemotron": nemotron, "hunyuan_v1_dense": hunyuan_v1_dense, "persimmon": persimmon,
            "bitnet": bitnet, "internlm3": internlm3}
