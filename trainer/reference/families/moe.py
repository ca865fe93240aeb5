"""The mixture-of-experts families, transformers' semantics, on the Llama block of llama.py: qwen3_moe, qwen2_moe
(a shared expert behind a sigmoid gate), olmoe (q / k norms over the whole rows), mixtral (w1 / w3 / w2 experts,
always renormalised), granitemoe (Granite's multipliers; its 3-D expert tensors are stored split in a `.petit`
file), granitemoeshared (and a shared MLP, unweighted), gpt_oss (attention sinks, biases, the clamped SwiGLU),
llama4_text (chunks, NoPE temperature, sigmoid routing of the input), glm4_moe, ernie4_5_moe, hunyuan_v1_moe,
dbrx. Which layers are sparse: Qwen's mlp_only_layers and decoder_sparse_step; every layer otherwise."""
from trainer.reference.families.common import get, heads, layer_types, rope
from trainer.reference.families.llama import _one_rope, _qwen_windows, llama_like
from trainer.reference.families.llama_variants import hunyuan_v1_dense
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec, NormSpec


def _experts(p, block, n, names=("gate_proj", "up_proj", "down_proj")):
    return [tuple(f"{p}{block}.experts.{e}.{x}.weight" for x in names) for e in range(n)]


def _qwen_sparse(cfg):
    only, step = get(cfg, "mlp_only_layers", []) or [], get(cfg, "decoder_sparse_step", 1)
    return lambda i: i not in only and cfg["num_experts"] > 0 and (i + 1) % step == 0


def qwen3_moe(cfg, names):
    sparse, bias = _qwen_sparse(cfg), get(cfg, "attention_bias", False)
    moe = lambda i, p: MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", cfg["num_experts"]),  # noqa: E731
                               cfg["num_experts_per_tok"], get(cfg, "norm_topk_prob", False)) if sparse(i) else None
    return llama_like(cfg, names, "qwen3_moe", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=_one_rope(cfg), window_of=_qwen_windows(cfg), qk_norm="head", moe_of=moe)


def qwen2_moe(cfg, names):
    sparse = _qwen_sparse(cfg)

    def moe(i, p):
        if not sparse(i):
            return None
        s = p + "mlp.shared_expert."
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", cfg["num_experts"]), cfg["num_experts_per_tok"],
                       get(cfg, "norm_topk_prob", False), tuple(s + f"{x}.weight" for x in ("gate_proj", "up_proj",
                                                                                             "down_proj")),
                       p + "mlp.shared_expert_gate.weight")
    return llama_like(cfg, names, "qwen2_moe", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=get(cfg, "qkv_bias", True),
                      rope_of=_one_rope(cfg), window_of=_qwen_windows(cfg), moe_of=moe)


def olmoe(cfg, names):
    bias = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, "olmoe", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      rope_of=_one_rope(cfg), qk_norm="row",
                      moe_of=lambda i, p: MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", cfg["num_experts"]),
                                                  cfg["num_experts_per_tok"], get(cfg, "norm_topk_prob", False)))


def mixtral(cfg, names):
    w = cfg.get("sliding_window") or 0
    return llama_like(cfg, names, "mixtral", eps=get(cfg, "rms_norm_eps", 1e-5), rope_of=_one_rope(cfg),
                      window_of=lambda i: w,
                      moe_of=lambda i, p: MoeSpec(p + "block_sparse_moe.gate.weight",
                                                  _experts(p, "block_sparse_moe", cfg["num_local_experts"],
                                                           ("w1", "w3", "w2")), cfg["num_experts_per_tok"], True))


def granitemoe(cfg, names, shared: int = 0):
    bias = get(cfg, "attention_bias", False)

    def sh(p):
        return tuple(f"{p}shared_mlp.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")) if shared else None

    return llama_like(cfg, names, cfg.get("model_type", "granitemoe"), eps=get(cfg, "rms_norm_eps", 1e-6),
                      qkv_bias=bias, o_bias=bias,
                      rope_of=_one_rope(cfg), embed_scale=get(cfg, "embedding_multiplier", 1.0),
                      attn_scale=get(cfg, "attention_multiplier", 1.0),
                      residual_scale=get(cfg, "residual_multiplier", 1.0),
                      logit_scale=1.0 / get(cfg, "logits_scaling", 1.0),
                      moe_of=lambda i, p: MoeSpec(p + "block_sparse_moe.router.layer.weight",
                                                  _experts(p, "block_sparse_moe", cfg["num_local_experts"]),
                                                  cfg["num_experts_per_tok"], True, sh(p)))


def granitemoeshared(cfg, names):
    """granitemoe with a shared MLP (shared_mlp, stored split as a gated MLP's three matrices), unweighted."""
    return granitemoe(cfg, names, shared=cfg["shared_intermediate_size"])


def gpt_oss(cfg, names):
    """Attention sinks, alternating sliding / full layers, biases everywhere, and experts with the clamped SwiGLU
    (stored split into per-expert matrices and biases by the engine's hf_tensors)."""
    E = cfg["num_local_experts"]
    types = layer_types(cfg, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    w = cfg.get("sliding_window") or 0

    def moe(i, p):
        b = p + "mlp.experts."
        return MoeSpec(p + "mlp.router.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"], True,
                       router_b=p + "mlp.router.bias", act="swiglu_oai",
                       biases=[tuple(f"{b}{e}.{x}.bias" for x in ("gate_proj", "up_proj", "down_proj"))
                               for e in range(E)])
    spec = llama_like(cfg, names, "gpt_oss", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=True, o_bias=True,
                      rope_of=_one_rope(cfg), window_of=lambda i: w if types[i] == "sliding_attention" else 0,
                      moe_of=moe)
    for i, L in enumerate(spec.layers):
        L.sinks = f"model.layers.{i}.self_attn.sinks"
    return spec


def llama4_text(cfg, names):
    """Interleaved RoPE with a weightless per-head q / k RMS norm in the RoPE layers, chunked attention, NoPE layers
    with temperature-tuned queries; MoE layers (moe_layers): the top logit's sigmoid scaling the expert's input, plus
    a shared expert; dense layers of intermediate_size_mlp (feed_forward.*)."""
    n = cfg["num_hidden_layers"]
    step = get(cfg, "interleave_moe_layer_step", 1)
    moe_layers = set(cfg.get("moe_layers") or range(step - 1, n, step))
    nope = cfg.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    types = cfg.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in nope]
    eps, rope_all = get(cfg, "rms_norm_eps", 1e-5), _one_rope(cfg, interleaved=True)

    def moe(i, p):
        if i not in moe_layers:
            return None
        f = p + "feed_forward."
        return MoeSpec(f + "router.weight", _experts(p, "feed_forward", cfg["num_local_experts"]),
                       cfg["num_experts_per_tok"], False,
                       tuple(f"{f}shared_expert.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")),
                       scoring="sigmoid", scale_input=True)
    spec = llama_like(cfg, names, "llama4_text", eps=eps, rope_of=lambda i: rope_all(i) if nope[i] else None,
                      moe_of=moe)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}.feed_forward."
        if L.moe is None:
            L.gate, L.up, L.down = (p + f"{x}_proj.weight" for x in ("gate", "up", "down"))
        if types[i] == "chunked_attention":
            L.chunk = cfg["attention_chunk_size"]
        if get(cfg, "use_qk_norm", True) and nope[i]:
            L.q_norm = L.k_norm = NormSpec("rms", eps, None)
        if get(cfg, "attn_temperature_tuning", True) and not nope[i]:
            L.temperature = (float(get(cfg, "floor_scale", 8192)), float(get(cfg, "attn_scale", 0.1)))
    return spec


def glm4_moe(cfg, names):
    """GLM-4.5: Llama's block (q/k/v biases, per-head q/k RMSNorm, partial rotary rotate-half), experts from
    first_k_dense_replace on, chosen as DeepSeek-V3 chooses (sigmoid, correction bias, top-2-sum groups,
    renormalised, times routed_scaling_factor), shared experts unweighted."""
    H, KV, hd = heads(cfg)
    bias, E = get(cfg, "attention_bias", False), cfg["n_routed_experts"]
    first = get(cfg, "first_k_dense_replace", 1)
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.5)))

    def moe_of(i, p):
        if i < first:
            return None
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"],
                       get(cfg, "norm_topk_prob", True),
                       tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                       if get(cfg, "n_shared_experts", 1) else None,
                       scoring="sigmoid", sel_bias=p + "mlp.gate.e_score_correction_bias",
                       n_group=get(cfg, "n_group", 1) if get(cfg, "n_group", 1) > 1 else 0,
                       topk_group=get(cfg, "topk_group", 1), group_score="top2_sum",
                       routed_scale=get(cfg, "routed_scaling_factor", 1.0))
    return llama_like(cfg, names, "glm4_moe", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias,
                      rope_of=lambda i: r, qk_norm="head" if get(cfg, "use_qk_norm", False) else None, moe_of=moe_of)


def ernie4_5_moe(cfg, names):
    """ERNIE 4.5 MoE: interleaved RoPE, use_bias everywhere (the head too), experts in the layers start..end every
    interval: softmax, the top moe_k chosen on p + e_score_correction_bias, p renormalised; shared experts (one SwiGLU,
    biased) unweighted."""
    bias, E, n = get(cfg, "use_bias", False), cfg["moe_num_experts"], cfg["num_hidden_layers"]
    start, step = get(cfg, "moe_layer_start_index", 1), get(cfg, "moe_layer_interval", 1)
    end = get(cfg, "moe_layer_end_index", -1)
    end = n - 1 if end < 0 else end
    three = ("gate_proj", "up_proj", "down_proj")

    def moe_of(i, p):
        if not ((i + 1) % step == 0 and start <= i <= end):
            return None
        sh = f"{p}mlp.shared_experts."
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["moe_k"], True,
                       tuple(f"{sh}{x}.weight" for x in three) if get(cfg, "moe_num_shared_experts", 2) else None,
                       biases=[tuple(f"{p}mlp.experts.{e}.{x}.bias" for x in three) for e in range(E)] if bias
                       else None, sel_bias=p + "mlp.moe_statics.e_score_correction_bias",
                       shared_b=tuple(f"{sh}{x}.bias" for x in three) if bias else None)
    return llama_like(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5)), names, "ernie4_5_moe",
                      eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias, mlp_bias=bias,
                      rope_of=_one_rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5)), interleaved=True),
                      moe_of=moe_of, tied=True, head_b="lm_head.bias" if bias else None)


def hunyuan_v1_moe(cfg, names):
    """Hunyuan V1 MoE: Hunyuan V1 dense's attention; in every layer softmax routing over mlp.gate.wg, the top moe_topk
    renormalised, plus mlp.shared_mlp unweighted. num_experts / moe_topk may be per-layer lists."""
    n = cfg["num_hidden_layers"]
    per = lambda v: v if isinstance(v, list) else [v] * n           # noqa: E731
    E, K = per(get(cfg, "num_experts", 1)), per(get(cfg, "moe_topk", 1))

    def moe_of(i, p):
        return MoeSpec(p + "mlp.gate.wg.weight", _experts(p, "mlp", E[i]), K[i], True,
                       tuple(f"{p}mlp.shared_mlp.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")))
    return hunyuan_v1_dense(cfg, names, "hunyuan_v1_moe", moe_of)


def dbrx(cfg, names):
    """DBRX: Wqkv (stored split) clamped to +-clip_qkv, kv_n_heads, rotate-half RoPE; bias-free LayerNorms of eps
    1e-5; in every layer softmax routing over ffn.router.layer, the top moe_top_k divided by their sum (p = 1) or
    kept (None), each expert w1 (gate), v1 (up), w2 (down, transposed) stored split."""
    a, f = cfg.get("attn_config") or {}, cfg.get("ffn_config") or {}
    D, H = cfg["d_model"], cfg["n_heads"]
    hd, E, P = D // H, f.get("moe_num_experts", 4), "transformer."
    r = rope(dict(max_position_embeddings=cfg.get("max_seq_len", 2048)), hd, theta=a.get("rope_theta", 10000.0),
             scaling=None)
    ln = lambda n: NormSpec("layer", 1e-5, n + ".weight", None)         # noqa: E731
    tied = get(cfg, "tie_word_embeddings", False)
    spec = ModelSpec("dbrx", H, a.get("kv_n_heads", 1), hd, P + "wte.weight",
                     P + "wte.weight" if tied else "lm_head.weight", ln(P + "norm_f"))
    for i in range(cfg["n_layers"]):
        p = f"{P}blocks.{i}."
        at = p + "norm_attn_norm.attn."
        moe = MoeSpec(p + "ffn.router.layer.weight", _experts(p, "ffn", E), f.get("moe_top_k", 1),
                      f.get("moe_normalize_expert_weights", 1.0) is not None)
        spec.layers.append(LayerSpec(q=at + "q_proj.weight", k=at + "k_proj.weight", v=at + "v_proj.weight",
                                     o=at + "out_proj.weight", moe=moe, rope=r,
                                     attn_norm=ln(p + "norm_attn_norm.norm_1"),
                                     mlp_norm=ln(p + "norm_attn_norm.norm_2"), clip=float(a.get("clip_qkv") or 0.0)))
    return spec


FAMILIES = {"qwen3_moe": qwen3_moe, "qwen2_moe": qwen2_moe, "olmoe": olmoe, "mixtral": mixtral,
            "granitemoe": granitemoe, "granitemoeshared": granitemoeshared, "gpt_oss": gpt_oss,
            "llama4_text": llama4_text, "glm4_moe": glm4_moe, "ernie4_5_moe": ernie4_5_moe,
            "hunyuan_v1_moe": hunyuan_v1_moe, "dbrx": dbrx}
