"""The hybrid group of issue 30 (state-space hybrids transformers 5 has natively), each written from its
transformers 5.25 modeling file: bamba (Mamba-2 mixers and attention layers by attn_layer_indices, RoPE on the first
half of each head, a SwiGLU feed_forward after pre_ff_layernorm in every layer, the gated norm per group), zamba2
(a Mamba-2 mixer in every layer; in hybrid layers its input is the norm of x plus a shared transformer block's
output, the block reading [x | embeddings], its weights those of the first layer using it, adapters per use).
olmo_hybrid (Qwen3-Next's Gated DeltaNet with beta doubled by linear_allow_neg_eigval and an o_norm of eps 1e-5,
pre-norm; OLMo 2's attention layers with post-norms and q / k norms over the whole projection, RoPE unless use_rope
is false), minimax (DeepNorm's x = alpha x + beta f(x) between norms of the stream itself, lightning attention with
its per-head decay computed from the layer's place, softmax attention, Mixtral's experts; beta folded into the output
matrices as Petit stores them), kimi_linear (Kimi Delta Attention: Gated DeltaNet with a decay per key channel and a
sigmoid output gate, its low-rank gates joined into in_proj as Petit stores it; DeepSeek's latent attention with no
rotation; DeepSeek-V3's experts from the Hub's block_sparse_moe names).
Names are those a `.petit` file stores (Petit's split of the fused gate_up_proj into .gate / .up)."""
from trainer.reference.families.common import activation, get, heads, rms, rope
from trainer.reference.spec import DeltaNetSpec, LayerSpec, LightningSpec, Mamba2Spec, ModelSpec, MoeSpec, SharedSpec


def _limit(cfg) -> tuple:
    lim = cfg.get("time_step_limit") or (0.0, None)
    return tuple(float("inf") if v is None else float(v) for v in lim)


def bamba(cfg, names):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec("bamba", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.final_layernorm", eps), act=activation(cfg, "hidden_act", "silu"))
    # BambaConfig hard-codes partial_rotary_factor 0.5; a GGUF file's conversion rotates what it says, on pairs
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5)), interleaved=get(cfg, "rope_interleaved", False))
    attn = set(cfg.get("attn_layer_indices") or ())
    n_heads, groups = get(cfg, "mamba_n_heads", 128), get(cfg, "mamba_n_groups", 1)
    state = get(cfg, "mamba_d_state", 256)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        mlp = {n: f"{p}feed_forward.{n}_proj.weight" for n in ("gate", "up", "down")}
        if i in attn:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          rope=r, **mlp)
        else:
            m = p + "mamba."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp,
                          mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                            m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                            m + "dt_bias", m + "A_log", m + "D", m + "norm.weight",
                                            m + "out_proj.weight", n_heads, groups, state, eps, _limit(cfg),
                                            norm_groups=groups))
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "pre_ff_layernorm", eps)
        spec.layers.append(L)
    return spec


def zamba2(cfg, names):
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV, hd = get(cfg, "num_key_value_heads", H), 2 * D // H
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec("zamba2", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.final_layernorm", eps), act=activation(cfg, "hidden_act", "gelu"))
    types = [{"mamba": "linear_attention"}.get(t, t) for t in cfg["layers_block_type"]]
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    blocks = get(cfg, "num_mem_blocks", 1)
    r = rope(dict(cfg, head_dim=hd), hd) if get(cfg, "use_mem_rope", False) else None
    n_heads, groups = get(cfg, "n_mamba_heads", 8), get(cfg, "mamba_ngroups", 1)
    state = get(cfg, "mamba_d_state", 64)
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        shared = None
        if kind == "hybrid":
            j = hybrid.index(i)
            b = f"model.layers.{hybrid[j % blocks]}.shared_transformer."
            a, f = b + "self_attn.", b + "feed_forward."
            ad = {}
            if get(cfg, "use_shared_attention_adapter", False):
                ad = {n: (f"{a}linear_{n}_adapter_list.{j}.0.weight", f"{a}linear_{n}_adapter_list.{j}.1.weight")
                      for n in ("q", "k", "v")}
            g = f"{f}gate_up_proj_adapter_list.{j}."
            ad["gate"] = (g + "0.weight", g + "1.gate.weight")
            ad["up"] = (g + "0.weight", g + "1.up.weight")
            shared = SharedSpec(rms(b + "input_layernorm", eps), a + "q_proj.weight", a + "k_proj.weight",
                                a + "v_proj.weight", a + "o_proj.weight", rms(b + "pre_ff_layernorm", eps),
                                f + "gate_up_proj.gate.weight", f + "gate_up_proj.up.weight", f + "down_proj.weight",
                                p + "linear.weight", (hd / 2) ** -0.5, r, ad)
            p += "mamba_decoder."
        m = p + "mamba."
        lim = (float(get(cfg, "time_step_min", 0.001)), float("inf"))
        L = LayerSpec(q=None, k=None, v=None, o=None, shared=shared,
                      mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                        m + "conv1d.bias" if get(cfg, "use_conv_bias", True) else None,
                                        m + "dt_bias", m + "A_log", m + "D", m + "norm.weight",
                                        m + "out_proj.weight", n_heads, groups, state, 1e-5, lim,
                                        norm_groups=groups))
        L.attn_norm = rms(p + "input_layernorm", eps)
        spec.layers.append(L)
    return spec


def olmo_hybrid(cfg, names):
    H = cfg["num_attention_heads"]
    KV, hd = get(cfg, "num_key_value_heads", H), get(cfg, "head_dim", cfg["hidden_size"] // H)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    spec = ModelSpec("olmo_hybrid", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), act=activation(cfg, "hidden_act", "silu"))
    r = rope(cfg, hd) if get(cfg, "use_rope", True) else None
    nv = get(cfg, "linear_num_value_heads", H)
    dk = get(cfg, "linear_key_head_dim", int(0.75 * cfg["hidden_size"] / get(cfg, "linear_num_key_heads", H)))
    dv = get(cfg, "linear_value_head_dim", 2 * dk)
    for i, kind in enumerate(cfg["layer_types"]):
        p = f"model.layers.{i}."
        mlp = {n: f"{p}mlp.{n}_proj.weight" for n in ("gate", "up", "down")}
        if kind == "linear_attention":
            a = p + "linear_attn."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp, deltanet=DeltaNetSpec(
                a + "in_proj.weight", a + "conv1d.weight", a + "dt_bias", a + "A_log", a + "o_norm.weight",
                a + "o_proj.weight", nv, nv, dk, dv, 1e-5, 2.0 if get(cfg, "linear_allow_neg_eigval", True) else 1.0))
            L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "post_attention_layernorm", eps)
        else:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          rope=r, **mlp, q_norm=rms(a + "q_norm", eps), k_norm=rms(a + "k_norm", eps),
                          qk_norm_over_heads=False, post_attn_norm=rms(p + "post_attention_layernorm", eps),
                          post_mlp_norm=rms(p + "post_feedforward_layernorm", eps))
        spec.layers.append(L)
    return spec


def minimax(cfg, names):
    H = cfg["num_attention_heads"]
    KV, hd = get(cfg, "num_key_value_heads", H), get(cfg, "head_dim", cfg["hidden_size"] // H)
    eps, n = get(cfg, "rms_norm_eps", 1e-5), cfg["num_hidden_layers"]
    spec = ModelSpec("minimax", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), act=activation(cfg, "hidden_act", "silu"),
                     embed_norm=rms("model.layers.0.input_layernorm", eps))
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 1e6)), hd)
    E, k = get(cfg, "num_local_experts", 8), get(cfg, "num_experts_per_tok", 2)
    mb = get(cfg, "mlp_beta_factor", 1.0)
    w2 = "w2.scaled" if mb != 1.0 else "w2"
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        ex = [tuple(f"{p}block_sparse_moe.experts.{e}.{w}.weight" for w in ("w1", "w3", w2)) for e in range(E)]
        moe = MoeSpec(p + "block_sparse_moe.gate.weight", ex, k, True)
        if kind == "linear_attention":
            beta = get(cfg, "linear_attn_beta_factor", 1.0)
            factor = 1 - i / (n - 1 + 1e-5) + 1e-5
            slopes = [(1 / 2 ** (8 / H)) ** (h + 1) * factor for h in range(H)]
            L = LayerSpec(q=None, k=None, v=None, o=None, moe=moe, lightning=LightningSpec(
                a + "in_proj.weight", a + "norm.weight", a + ("out_proj.scaled.weight" if beta != 1.0 else
                                                              "out_proj.weight"), slopes, H, hd, 1e-6))
            alpha = get(cfg, "linear_attn_alpha_factor", 1.0)
        else:
            beta = get(cfg, "full_attn_beta_factor", 1.0)
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight",
                          o=a + ("o_proj.scaled.weight" if beta != 1.0 else "o_proj.weight"), rope=r, moe=moe,
                          window=get(cfg, "sliding_window", 0))
            alpha = get(cfg, "full_attn_alpha_factor", 1.0)
        L.resid_alpha = (float(alpha), float(get(cfg, "mlp_alpha_factor", 1.0)))
        L.resid_attn_norm = rms(p + "post_attention_layernorm", eps)
        L.resid_mlp_norm = rms(f"model.layers.{i + 1}.input_layernorm", eps) if i + 1 < n else None
        spec.layers.append(L)
    return spec


def kimi_linear(cfg, names, family="kimi_linear", moe=("block_sparse_moe", ("w1", "w3", "w2"))):
    """moe: the experts' prefix and gate / up / down names (issue 36, fam36m: Ling 3's mlp, *_proj)."""
    from trainer.reference.spec import MlaSpec, NormSpec
    H = cfg["num_attention_heads"]
    dn, dr = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec(family, H, 1, dr, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), attn_scale=(dn + dr) ** -0.5)
    Hl, dl = cfg["linear_num_heads"], cfg["linear_head_dim"]
    E, k = cfg["num_experts"], cfg["num_experts_per_token"]
    q_lora = cfg.get("q_lora_rank")
    latent_eps = get(cfg, "latent_norm_eps", None) or 1e-6      # kimi_gguf: a llama.cpp file's RMS eps
    for i, kind in enumerate(cfg["layer_types"]):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        m = p + moe[0] + "."
        if cfg["mlp_layer_types"][i] == "sparse":
            mlp = {"moe": MoeSpec(m + "gate.weight", [tuple(f"{m}experts.{e}.{x}.weight" for x in moe[1])
                                                     for e in range(E)], k, get(cfg, "moe_renormalize", True),
                                  tuple(f"{m}shared_experts.{x}_proj.weight" for x in ("gate", "up", "down"))
                                  if get(cfg, "num_shared_experts", 1) else None,
                                  scoring="sigmoid", sel_bias=m + "gate.e_score_correction_bias", n_group=1,
                                  topk_group=1, group_score="top2_sum",
                                  routed_scale=float(get(cfg, "routed_scaling_factor", 1.0)))}
        else:                   # the Hub's `mlp`, or transformers 5.25's block_sparse_moe spelling of it
            pre = p + "mlp." if f"{p}mlp.gate_proj.weight" in names else m
            mlp = {x: f"{pre}{x}_proj.weight" for x in ("gate", "up", "down")}
        if kind == "linear_attention":
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp, deltanet=DeltaNetSpec(
                a + "in_proj.weight", a + "conv1d.weight", a + "dt_bias", a + "A_log", a + "o_norm.weight",
                a + "o_proj.weight", Hl, Hl, dl, dl, eps, 1.0, True))
        else:
            mla = MlaSpec(a + "q_nope.weight", a + "q_pe.weight", a + "kv_c.weight", a + "kv_pe.weight",
                          NormSpec("rms", latent_eps, a + "kv_a_layernorm.weight"),
                          [f"{a}k_absorb.{h}.weight" for h in range(H)], [f"{a}v_absorb.{h}.weight" for h in range(H)],
                          a + "q_a_proj.weight" if q_lora else None,
                          NormSpec("rms", latent_eps, a + "q_a_layernorm.weight") if q_lora else None)
            L = LayerSpec(q=None, k=None, v=None, o=a + "o_proj.weight", rope=None, mla=mla, **mlp)
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "post_attention_layernorm", eps)
        spec.layers.append(L)
    return spec


FAMILIES = {"bamba": bamba, "zamba2": zamba2, "olmo_hybrid": olmo_hybrid, "minimax": minimax,
            "kimi_linear": kimi_linear}
