"""The moe_a group of issue 30, each written from its transformers 5.25 modeling file: qwen3_5_moe_text (Qwen3.5's
hybrid block, Gated DeltaNet and gated full attention, with experts in every layer: softmax router, top-k always
renormalised, a shared expert behind a sigmoid gate) and qwen3_5_moe (its released multimodal wrapper, as Petit
converts it: the text model's flat config and names)."""
import numpy as np

from trainer.reference.families.common import get, heads, layer, layer_types, rms, rope
from trainer.reference.families.llama import attn_names
from trainer.reference.families.hybrid import qwen3_next
from trainer.reference.families.llama import _one_rope, llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec, NormSpec, RopeSpec


def qwen3_5_moe_text(cfg, names, family="qwen3_5_moe_text"):
    # Qwen3_5MoeSparseMoeBlock: every layer routes; Qwen3_5MoeTopKRouter always renormalises the top-k weights
    fixed = {k: v for k, v in cfg.items() if k not in ("mlp_only_layers", "decoder_sparse_step", "norm_topk_prob")}
    fixed.update(decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
                 num_experts=cfg.get("num_experts", 256))
    return qwen3_next(fixed, names, family)


def qwen3_5_moe(cfg, names):
    return qwen3_5_moe_text(cfg, names, "qwen3_5_moe")


def _phimoe_rope(cfg, dim: int) -> RopeSpec:
    """PhiMoE's longrope (transformers 4.57, the model's code): long_factor past the top-level
    original_max_position_embeddings, cos / sin times long_mscale past the scaling's own, else short_factor /
    short_mscale; no scaling: plain RoPE."""
    theta, s = float(get(cfg, "rope_theta", 1e6)), cfg.get("rope_scaling") or {}
    base_inv = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    if not s:
        return RopeSpec(dim, lambda seq_len: (base_inv, 1.0))
    if s.get("rope_type", s.get("type")) != "longrope":
        raise ValueError("the reference models PhiMoE's longrope only")
    at_m = s["original_max_position_embeddings"]
    at_f = cfg.get("original_max_position_embeddings") or at_m
    long_f, short_f = np.asarray(s["long_factor"], np.float64), np.asarray(s["short_factor"], np.float64)
    return RopeSpec(dim, lambda seq_len: (base_inv / (long_f if seq_len > at_f else short_f),
                                          float(s["long_mscale"] if seq_len > at_m else s["short_mscale"])))


def phimoe(cfg, names):
    """Mixtral's experts (w1 / w3 / w2) routed by the sparsemixer, LayerNorms with biases, optional attention and
    LM-head biases (transformers' modeling_phimoe)."""
    eps, bias = get(cfg, "rms_norm_eps", 1e-5), get(cfg, "attention_bias", False)
    r, w = _phimoe_rope(cfg, heads(cfg)[2]), cfg.get("sliding_window") or 0
    moe = lambda i, p: MoeSpec(p + "block_sparse_moe.gate.weight",  # noqa: E731
                               _experts(p, "block_sparse_moe", get(cfg, "num_local_experts", 16), ("w1", "w3", "w2")),
                               2, False, scoring="sparsemixer", jitter_eps=float(get(cfg, "router_jitter_noise", 0.01)))
    return llama_like(cfg, names, "phimoe", eps=eps, qkv_bias=bias, o_bias=bias, rope_of=lambda i: r,
                      window_of=lambda i: w, moe_of=moe, norm=lambda name: layer(name, eps, names),
                      head_b="lm_head.bias" if get(cfg, "lm_head_bias", False) else None)


def dots1(cfg, names):
    """Qwen3's attention (q / k norms per head, windows by layer_types: from max_window_layers on when
    sliding_window is set) with DeepSeek-V3's routing from first_k_dense_replace on (transformers' modeling_dots1)."""
    eps, bias = get(cfg, "rms_norm_eps", 1e-6), get(cfg, "attention_bias", False)
    w, first = cfg.get("sliding_window"), get(cfg, "max_window_layers", cfg["num_hidden_layers"])
    types = layer_types(cfg, lambda i: "sliding_attention" if w is not None and i >= first else "full_attention")
    E, G = cfg["n_routed_experts"], get(cfg, "n_group", 1) or 1
    n_sh = get(cfg, "n_shared_experts", 0)

    def moe(i, p):
        if i < (get(cfg, "first_k_dense_replace", 0) or 0):
            return None
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"],
                       bool(get(cfg, "norm_topk_prob", False)),
                       tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                       if n_sh else None, scoring="sigmoid", sel_bias=p + "mlp.gate.e_score_correction_bias",
                       n_group=G if G > 1 else 0, topk_group=(get(cfg, "topk_group", 1) or 1) if G > 1 else 0,
                       group_score="top2_sum", routed_scale=float(get(cfg, "routed_scaling_factor", 1.0)))
    return llama_like(cfg, names, "dots1", eps=eps, qkv_bias=bias, o_bias=bias, rope_of=_one_rope(cfg),
                      window_of=lambda i: (w or 0) if types[i] == "sliding_attention" else 0, qk_norm="head",
                      moe_of=moe)


def cohere2_moe(cfg, names):
    """Cohere 2's parallel block (transformers' modeling_cohere2_moe): RMSNorm when rms_norm_eps is set, else the
    bias-free LayerNorm; RoPE (interleaved pairs) in sliding layers and in dense ones when their pattern is 1; dense
    prefix MLPs; the top-k router logits weighed by their softmax (or sigmoids, renormalised with norm_topk_prob);
    shared experts summed, or averaged: the routed weights x 0.5 and the shared expert x sigmoid of the zero gate
    the engine's file holds for it (0.5)."""
    H, KV, hd = heads(cfg)
    n, k = cfg["num_hidden_layers"], get(cfg, "first_k_dense_replace", 0)
    eps = cfg.get("rms_norm_eps")
    nrm = (lambda name: rms(name, eps)) if eps is not None else \
        (lambda name: NormSpec("layer", get(cfg, "layer_norm_eps", 1e-5), name + ".weight"))
    types = cfg.get("layer_types") or (
        ["sliding_attention" if (i + 1) % get(cfg, "prefix_dense_sliding_window_pattern", 1) else "full_attention"
         for i in range(k)]
        + ["sliding_attention" if (i + 1) % get(cfg, "sliding_window_pattern", 4) else "full_attention"
           for i in range(n - k)])
    mlp_types = cfg.get("mlp_layer_types") or ["dense" if i < k else "sparse" for i in range(n)]
    r, w = rope(cfg, hd, interleaved=True), cfg.get("sliding_window") or 0
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec("cohere2_moe", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if tied else "lm_head.weight", nrm("model.norm"), parallel=True,
                     logit_scale=get(cfg, "logit_scale", 0.0625))
    sh = get(cfg, "num_shared_experts", 0)
    average = get(cfg, "shared_expert_combination_strategy", "average") == "average" and sh
    sigmoid = get(cfg, "expert_selection_fn", "softmax") == "sigmoid"
    for i in range(n):
        p = f"model.layers.{i}."
        sliding, dense = types[i] == "sliding_attention", mlp_types[i] == "dense"
        rotates = sliding or (dense and get(cfg, "prefix_dense_sliding_window_pattern", 1) == 1)
        if dense:
            mlp = {x: f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
        else:
            mlp = {"moe": MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", get(cfg, "num_experts", 8)),
                                  get(cfg, "num_experts_per_tok", 2),
                                  not sigmoid or get(cfg, "norm_topk_prob", True),
                                  tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj",
                                                                                     "down_proj")) if sh else None,
                                  p + "mlp.shared_experts_gate.weight" if average else None,
                                  scoring="sigmoid" if sigmoid else "softmax",
                                  routed_scale=0.5 if average else 1.0)}
        spec.layers.append(LayerSpec(**attn_names(p, get(cfg, "attention_bias", False),
                                                  get(cfg, "attention_bias", False)), **mlp,
                                     rope=r if rotates else None, window=w if sliding else 0,
                                     attn_norm=nrm(p + "input_layernorm")))
    return spec


FAMILIES = {"qwen3_5_moe_text": qwen3_5_moe_text, "qwen3_5_moe": qwen3_5_moe, "phimoe": phimoe, "dots1": dots1,
            "cohere2_moe": cohere2_moe}
