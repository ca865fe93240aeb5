"""The fam36e group of issue 36, written from transformers 5.25's modeling code.

Kolibri 1 (modeling_kolibri1): q / k RMS-normed per head, RoPE on the sliding layers only (the full ones have no
position encoding), each sublayer between a pre-norm and a post-norm (input_layernorm, post_self_attn_layernorm;
post_attention_layernorm, post_mlp_layernorm), every MLP a mixture of SwiGLU experts chosen on the router logits plus
e_score_correction_bias (in logit space), weighed by the chosen logits' sigmoids (renormalised with norm_topk_prob),
plus an ungated shared expert. The checkpoint's own names (moe.router.expert_bias, post_attn_norm, post_ffn_norm)
are read when the file has them, as transformers renames them at load.

Flint (modeling_flint): see flint below.
"""
from trainer.reference.families.common import get, heads, layer_types, rms, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import MoeSpec


def _either(names, saved, module):
    return saved if saved in names else module


def kolibri1(cfg, names):
    E = cfg.get("num_local_experts") or get(cfg, "num_experts", 384)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    w = cfg["sliding_window"]
    types = layer_types(cfg, lambda i: "full_attention" if (i + 1) % 5 == 0 else "sliding_attention")
    r = rope(cfg, heads(cfg)[2])

    def moe(i, p):
        shared = tuple(f"{p}mlp.shared_experts.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"],
                       get(cfg, "norm_topk_prob", False), shared=shared, scoring="sigmoid", bias_logits=True,
                       sel_bias=_either(names, p + "moe.router.expert_bias", p + "mlp.gate.e_score_correction_bias"))

    spec = llama_like(cfg, names, "kolibri1", eps=eps, qk_norm="head", moe_of=moe,
                      rope_of=lambda i: r if types[i] == "sliding_attention" else None,
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}."
        L.post_attn_norm = rms(_either(names, p + "post_attn_norm.weight", p + "post_self_attn_layernorm.weight")
                               [:-len(".weight")], eps)
        L.post_mlp_norm = rms(_either(names, p + "post_ffn_norm.weight", p + "post_mlp_layernorm.weight")
                              [:-len(".weight")], eps)
    return spec


FAMILIES = {"kolibri1": kolibri1}


def flint(cfg, names):
    """Flint: Qwen3-MoE's pre-norm block with per-head q / k norms, a sink logit per head (saved as
    self_attn.softmax_offset), RoPE on the sliding layers only; dense SwiGLU MLPs in mlp_only_layers (default the
    first two) or off decoder_sparse_step, elsewhere experts chosen on the router logits' sigmoids (renormalised
    with norm_topk_prob) plus an ungated shared expert."""
    n, E = cfg["num_hidden_layers"], get(cfg, "num_experts", 256)
    w = cfg["sliding_window"]
    types = layer_types(cfg, lambda i: "full_attention" if i < 2 or i % 4 == 1 or i == n - 1 else "sliding_attention")
    only, step = get(cfg, "mlp_only_layers", [0, 1]), get(cfg, "decoder_sparse_step", 1)
    r = rope(cfg, heads(cfg)[2])

    def moe(i, p):
        if i in only or E <= 0 or (i + 1) % step:
            return None
        shared = tuple(f"{p}mlp.shared_expert.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
        return MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", E), cfg["num_experts_per_tok"],
                       get(cfg, "norm_topk_prob", True), shared=shared, scoring="sigmoid")

    bias = get(cfg, "attention_bias", False)
    spec = llama_like(cfg, names, "flint", eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=bias, o_bias=bias,
                      qk_norm="head", moe_of=moe, rope_of=lambda i: r if types[i] == "sliding_attention" else None,
                      window_of=lambda i: w if types[i] == "sliding_attention" else 0)
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}.self_attn."
        L.sinks = _either(names, p + "softmax_offset", p + "sinks")
    return spec


FAMILIES["flint"] = flint
