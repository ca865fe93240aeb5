"""The fam36i group of issue 36, written from transformers 5.25's modeling code.

Aria's language model (modeling_aria, AriaTextForCausalLM): Llama's block (RMSNorm, RoPE, q / k / v / o with
attention_bias); in every layer the top moe_topk of moe_num_experts SiLU-gated experts on the router's logits,
weighed by the softmax of the chosen logits (a softmax over all, renormalised), plus the moe_num_shared_experts
shared experts as one gated MLP of that many times intermediate_size (biases with mlp_bias), unweighted. The experts
are read per expert, as a `.petit` file holds them (the engine's hf_tensors splits the checkpoint's 3-D fc1 / fc2).

Cohere Compass's language model (modeling_cohere_compass, CohereCompassForCausalLM): Cohere 2's parallel block
(trainer/reference/families/cohere.py) with rotate-half RoPE (Qwen3-VL's M-RoPE, whose axes all hold the token's
position on text) in the layer types that have a RoPE (`rope_layer_types`, read from rope_parameters by the engine:
a null entry is a type without one), a sliding window in the sliding layers, layer_types by default all full,
logits x logit_scale (default 1).

MiniMax-M3's language model (modeling_minimax_m3_vl, MiniMaxM3VLForCausalLM): Llama's block with every RMSNorm x
(1 + w) (q and k normed per head), RoPE rotate-half on head_dim x partial_rotary_factor values; `minimax_m3_sparse`
layers attend only to the key blocks their lightning indexer chooses (spec.BlockSparseSpec); dense MLPs
(dense_intermediate_size) or experts on sigmoid + e_score_correction_bias, renormalised x routed_scaling_factor, plus a
shared expert; every MLP gpt-oss's clamped SwiGLU. Read as a `.petit` file holds it: gate / up apart, experts one by
one.

Beam (modeling_beam, BeamForCausalLM): q / k RMS-normed per head, RoPE in the layer types that have one
(`rope_layer_types`), sliding windows in the sliding layers, the NoPE layers' queries x (1 + (p + 1) / 2048) ** 0.1;
each head's output x sigmoid(gate_proj x + gate_bias); Gemma's four norms; each sublayer added as
h / sqrt(i) + r sqrt((i - 1) / i) (i = 2 (layer + 1), + 1 for the MLP), written as transformers writes it (the engine
folds it into its norms' eps); dense SwiGLU or DeepSeek-V3's grouped sigmoid experts (+ 1e-20 in the
renormalisation); logits soft-capped.
"""
import math

from trainer.reference.families.cohere import _cohere
from trainer.reference.families.common import get, heads, layer_types, rms, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import BlockSparseSpec, MoeSpec

_GUD = ("gate_proj", "up_proj", "down_proj")


def aria_text(cfg, names):
    r = rope(cfg, heads(cfg)[2])
    bias, mlp_bias = get(cfg, "attention_bias", False), get(cfg, "mlp_bias", False)

    def moe(i, p):
        s = p + "mlp.shared_experts."
        return MoeSpec(p + "mlp.router.weight", _experts(p, "mlp", get(cfg, "moe_num_experts", 8)),
                       get(cfg, "moe_topk", 2), True, shared=tuple(f"{s}{x}.weight" for x in _GUD),
                       shared_b=tuple(f"{s}{x}.bias" for x in _GUD) if mlp_bias else None)

    return llama_like(cfg, names, "aria_text", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      rope_of=lambda i: r, moe_of=moe)


FAMILIES = {"aria_text": aria_text}


def cohere_compass_text(cfg, names):
    r = rope(cfg, heads(cfg)[2])
    types = layer_types(cfg, lambda i: "full_attention")
    rotates, w = set(cfg["rope_layer_types"]), cfg.get("sliding_window") or 0
    slides = [t == "sliding_attention" for t in types]
    return _cohere(dict(cfg, logit_scale=get(cfg, "logit_scale", 1.0)), names, "cohere_compass_text",
                   lambda i: r if types[i] in rotates else None, lambda i: w if slides[i] else 0, False)


FAMILIES["cohere_compass_text"] = cohere_compass_text


def minimax_m3_vl_text(cfg, names):
    H, KV, hd = heads(cfg)
    eps, n = get(cfg, "rms_norm_eps", 1e-6), cfg["num_hidden_layers"]
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 1.0)))
    E = get(cfg, "num_local_experts", 128)
    mlp_types = cfg.get("mlp_layer_types") or ["sparse"] * n

    def moe(i, p):
        if mlp_types[i] == "dense":
            return None
        s = p + "mlp.shared_experts."
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), get(cfg, "num_experts_per_tok", 4), True,
                       shared=tuple(f"{s}{x}.weight" for x in _GUD), scoring="sigmoid",
                       sel_bias=p + "mlp.gate.e_score_correction_bias",
                       routed_scale=float(get(cfg, "routed_scaling_factor", 2.0)), act="swiglu_oai")

    spec = llama_like(cfg, names, "minimax_m3_vl_text", eps=eps, rope_of=lambda i: r, moe_of=moe,
                      norm=lambda name: rms(name, eps, 1.0), act="swiglu_oai")
    attn_types = cfg.get("layer_types") or ["full_attention"] * n
    for i, L in enumerate(spec.layers):
        a = f"model.layers.{i}.self_attn."
        L.q_norm, L.k_norm = rms(a + "q_norm", eps, 1.0), rms(a + "k_norm", eps, 1.0)
        if attn_types[i] == "minimax_m3_sparse":
            x = a + "indexer."
            L.block_sparse = BlockSparseSpec(x + "q_proj.weight", x + "k_proj.weight", rms(x + "q_norm", eps, 1.0),
                                             rms(x + "k_norm", eps, 1.0), get(cfg, "index_n_heads", 4),
                                             get(cfg, "index_head_dim", 128), get(cfg, "index_block_size", 128),
                                             get(cfg, "index_topk_blocks", 16), get(cfg, "index_local_blocks", 1))
    return spec


FAMILIES["minimax_m3_vl_text"] = minimax_m3_vl_text


def beam(cfg, names):
    eps, n = get(cfg, "rms_norm_eps", 1e-6), cfg["num_hidden_layers"]
    r = rope(cfg, heads(cfg)[2])
    types = layer_types(cfg, lambda i: "sliding_attention" if (i + 1) % 6 and i != n - 1 else "full_attention")
    rotates, w = set(cfg["rope_layer_types"]), cfg.get("sliding_window") or 0
    norm_topk = get(cfg, "norm_topk_prob", True)

    def moe(i, p):
        if cfg["mlp_layer_types"][i] == "dense":
            return None
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", get(cfg, "num_experts", 256)),
                       get(cfg, "num_experts_per_tok", 8), norm_topk, scoring="sigmoid",
                       sel_bias=p + "mlp.gate.e_score_correction_bias", n_group=cfg["n_group"],
                       topk_group=cfg["topk_group"], group_score="top2_sum",
                       routed_scale=float(get(cfg, "routed_scaling_factor", 2.5)), norm_eps=1e-20 if norm_topk else 0.0)

    b = get(cfg, "attention_bias", False)
    spec = llama_like(cfg, names, "beam", eps=eps, qkv_bias=b, o_bias=b, qk_norm="head", moe_of=moe,
                      rope_of=lambda i: r if types[i] in rotates else None,
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0,
                      norm_names=("input_layernorm", "pre_feedforward_layernorm"),
                      logit_softcap=get(cfg, "final_logit_softcapping", 0.0))
    for i, L in enumerate(spec.layers):
        p, a = f"model.layers.{i}.", 2 * (i + 1)
        L.post_attn_norm, L.post_mlp_norm = rms(p + "post_attention_layernorm", eps), rms(
            p + "post_feedforward_layernorm", eps)
        L.attn_gate, L.attn_gate_b = p + "self_attn.gate_proj.weight", p + "self_attn.gate_bias"
        L.resid_alpha = (math.sqrt((a - 1) / a), math.sqrt(a / (a + 1)))
        L.branch_scale = (a ** -0.5, (a + 1) ** -0.5)
        if L.rope is None:
            L.temperature = (2048.0, 0.1, 2)
    return spec


FAMILIES["beam"] = beam
