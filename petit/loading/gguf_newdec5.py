"""GGUF files of issue 36's newdec group: llama.cpp's `mistral4` (Mistral Small 4's text model, converted from a
`mistral3` folder whose text_config is mistral4), `step35` (Step 3.5 / 3.7's language model) and
`muse-glimmer` (Muse Glimmer's), read as Petit's mistral4, step3p5 and muse_glimmer_text families. Imported by
gguf_archs, whose ARCHS these join.

What the files hold and what llama.cpp assumes (conversion/mistral3.py's Mistral4Model, src/models/mistral4.cpp:
deepseek2's graph):

- everything deepseek2's reader reads (gguf_moe.py: the absorbed attn_k_b / attn_v_b, the latent norms, yarn with
  its log multiplier, the router without `exp_probs_b`), the experts' gate and up rows fused per expert
  (`ffn_gate_up_exps`, as transformers 5 stores them), split here by row ranges;
- the router: softmax when the file has no `expert_gating_func` (llama.cpp's deepseek2 default), grouped by
  `expert_group_count` / `expert_group_used_count`; a sigmoid router is refused (Mistral 4 has none);
- Llama 4's query scaling only where the file has `attention.temperature_scale` (beta) and
  `attention.temperature_length` (n), which llama.cpp's converter of Hugging Face folders does not write: such a file
  runs without it, as llama.cpp runs it, and so from position n on (rope_parameters' original_max_position_embeddings:
  8192 for Mistral Small 4) differs from transformers, which scales every query by 1 + beta ln(1 + floor(p / n)).

step35 (conversion/step3.py Step35Model, src/models/step35.cpp), read as the step3p5 family:
- `attention.head_count` / `head_count_kv` a value per layer (the query heads per layer as per_layer_config; one kv
  count for every layer, else refused), the sliding layers those of `attention.sliding_window_pattern`;
- every norm stored as 1 + w (q / k's too); RoPE on halves (NEOX), the full layers on half of
  `rope.dimension_count` with `rope.freq_base` (llama.cpp halves it whatever the file), the sliding ones on all of it
  with `rope.freq_base_swa`; the softmax scale head_dim^-0.5 (llama.cpp reads no query_pre_attn_scalar); a rope
  scaling or a `rope_freqs` tensor is refused (not checked against a file);
- each head's output x sigmoid(attn_gate x); dense MLPs before `leading_dense_block_count`, then experts on
  sigmoid(router x) + `exp_probs_b` (`expert_gating_func` 2, its default), renormalised (`expert_weights_norm`, which
  the family always does: required) x `expert_weights_scale`, plus the shared expert; the SwiGLU clamps after the
  activation from `swiglu_clamp_exp` / `swiglu_clamp_shexp` (one a layer, the MTP layers' dropped);
- `nextn_predict_layers` MTP blocks past the trunk are not run (their tensors left unread, as llama.cpp's trunk).

muse-glimmer (conversion/muse_glimmer.py, src/models/muse-glimmer.cpp), read as the muse_glimmer_text family:
- the four layer norms stored as 1 + w (the final norm as w); q / k's weightless norms written as weights, q's
  holding qk_scale_factor in every value and k's ones (read as the norms' weights, qk_scale_factor 1: the same
  products); the embeddings RMS-normed without weight;
- q / k permuted for RoPE on adjacent pairs (NORM), run so; RoPE (`rope.freq_base_swa`, absent: `rope.freq_base`) in
  the sliding layers of `attention.sliding_window_pattern` only, none in the full ones (transformers' default
  layer_rope_theta; a file cannot say otherwise);
- the post-attention / post-feedforward norms' eps 1e-8 whatever the config said (llama.cpp's constant, the
  release's post_norm_eps); the logits x `logit_scale`, then `final_logit_softcapping`.
"""
import numpy as np

from petit.loading.gguf_gg36s5 import _per_layer
from petit.loading.gguf_moe import MOE_ARCHS, _deepseek2, _number, _q_and_kv
from petit.loading.gguf_names import LLAMA_LAYER, QWEN_EXPERTS, SANDWICH_LAYER, GGUFArch
from petit.loading.gguf_ssm import Fix

STEP35 = "step35"


def _mistral4(meta, key, cfg, has):
    beta, n = meta.get(key("attention.temperature_scale")), meta.get(key("attention.temperature_length"))
    meta = {k: v for k, v in meta.items() if k != key("attention.temperature_scale")}
    _deepseek2(meta, key, cfg, has)
    if cfg.pop("scoring_func") != "softmax":
        raise ValueError(f"metadata {key('expert_gating_func')!r} asks for the sigmoid: Mistral 4's router is the "
                         f"softmax (mistral4 family)")
    if beta and not n:
        raise ValueError(f"metadata {key('attention.temperature_scale')!r} is set without "
                         f"{key('attention.temperature_length')!r}: llama.cpp scales no query then")
    cfg["llama_4_scaling"] = [float(beta), int(n)] if beta else [0.0, 1]
    cfg.setdefault("rope_scaling", None)
    cfg["model_type"] = "mistral4"


def _joins(tensors, cfg) -> dict:
    """deepseek2's q / kv row ranges, and each expert's gate and up rows of ffn_gate_up_exps."""
    out = _q_and_kv(tensors, cfg)
    for i in range(cfg["num_hidden_layers"]):
        name = f"blk.{i}.ffn_gate_up_exps.weight"
        gu = tensors.get(name)
        if gu is None:
            continue
        F2 = gu.shape[1]
        for e in range(gu.shape[0]):
            for part, at in (("gate_proj", 0), ("up_proj", F2 // 2)):
                out[f"model.layers.{i}.mlp.experts.{e}.{part}.weight"] = [(name, (e * F2 + at, e * F2 + at + F2 // 2))]
    return out


def _step35(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, STEP35)

    n, hd = cfg["num_hidden_layers"], cfg["head_dim"]
    if get("expert_gating_func", 2) != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {get('expert_gating_func')}: the step3p5 "
                         f"family routes on sigmoids (2)")
    if not meta.get(key("expert_weights_norm"), False):
        raise ValueError(f"metadata {key('expert_weights_norm')!r} is absent or false: llama.cpp then does not "
                         f"renormalise the chosen experts' weights, which the step3p5 family (transformers) always "
                         f"does")
    if cfg.pop("rope_scaling", None) or has("rope_freqs.weight"):
        raise ValueError("a RoPE scaling (rope.scaling.* or rope_freqs): not read for step35 by Petit yet")
    if get("moe_every_n_layers", 1) != 1:
        raise ValueError(f"metadata {key('moe_every_n_layers')!r} is not 1: the step3p5 family routes every layer "
                         f"after the leading dense ones")
    kv = set(_per_layer(meta, key, "attention.head_count_kv", n, None))
    if len(kv) != 1:
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} differs between layers: the step3p5 family "
                         f"has one count of key / value heads")
    heads = _per_layer(meta, key, "attention.head_count", n, None)
    swa = _per_layer(meta, key, "attention.sliding_window_pattern", n, None, bool)
    rot, theta = get("rope.dimension_count", hd), cfg.pop("rope_theta")
    lead = get("leading_dense_block_count", 0)
    clamp = {name: [float(x) for x in np.asarray(meta.get(key(k), [0.0] * n)).reshape(-1)[:n]]
             for name, k in (("swiglu_limits", "swiglu_clamp_exp"), ("swiglu_limits_shared", "swiglu_clamp_shexp"))}
    cfg.pop("partial_rotary_factor", None)
    cfg.update(num_key_value_heads=kv.pop(), num_attention_heads=max(heads),
               per_layer_config={str(i): {"num_attention_heads": h} for i, h in enumerate(heads)},
               layer_types=["sliding_attention" if s else "full_attention" for s in swa],
               sliding_window=get("attention.sliding_window"), query_pre_attn_scalar=None,
               rope_types={"full_attention": {"rope_type": "default", "rope_theta": theta,
                                              "partial_rotary_factor": rot // 2 / hd},
                           "sliding_attention": {"rope_type": "default",
                                                 "rope_theta": get("rope.freq_base_swa", theta, float),
                                                 "partial_rotary_factor": rot / hd}},
               mlp_layer_types=["dense" if i < lead else "sparse" for i in range(n)],
               n_routed_experts=cfg.pop("num_experts"), moe_intermediate_size=get("expert_feed_forward_length"),
               share_expert_dim=get("expert_shared_feed_forward_length"),
               moe_router_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0, **clamp)


def _muse(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, MUSE)

    n = cfg["num_hidden_layers"]
    if meta.get(key("attention.sliding_window_pattern")) is None or not np.ndim(
            meta.get(key("attention.sliding_window_pattern"))):
        raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} should list a flag a layer: "
                         f"llama.cpp's default pattern (period 4, counted from the first layer) is not transformers' "
                         f"(counted from the last), so Petit does not guess it")
    swa = _per_layer(meta, key, "attention.sliding_window_pattern", n, None, bool)
    if cfg.pop("rope_scaling", None):
        raise ValueError("a RoPE scaling (rope.scaling.*): llama.cpp's muse-glimmer graph runs none")
    theta = get("rope.freq_base_swa", cfg["rope_theta"], float)
    if cfg.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size: the muse_glimmer_text "
                         f"family rotates whole heads")
    cfg.update(layer_types=["sliding_attention" if s else "full_attention" for s in swa], rope_theta=theta,
               layer_rope_theta=[theta if s else 0 for s in swa], sliding_window=get("attention.sliding_window"),
               final_logit_softcapping=get("final_logit_softcapping", 0.0, float) or None,
               output_multiplier=get("logit_scale", kind=float), qk_scale_factor=1.0, post_norm_eps=1e-8,
               rope_interleaved=True, hidden_activation="silu", attention_bias=False)


MUSE = "muse-glimmer"
ONE_PLUS_W = Fix(values=lambda a: a - np.float32(1.0))
STEP35_LAYER = dict(LLAMA_LAYER, attn_gate="self_attn.g_proj", ffn_gate_inp="mlp.gate",
                    ffn_gate_shexp="mlp.shared_experts.gate_proj", ffn_up_shexp="mlp.shared_experts.up_proj",
                    ffn_down_shexp="mlp.shared_experts.down_proj")
_ds = MOE_ARCHS["deepseek2"]
NEWDEC5_ARCHS = {
    "mistral4": GGUFArch("mistral4", _ds.layer_names, experts=_ds.experts, expert_key="n_routed_experts",
                         joins=_joins, extra=_mistral4, own_head_sizes=True),
    STEP35: GGUFArch("step3p5", STEP35_LAYER, whole_names={"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"},
                     experts=QWEN_EXPERTS, norm_shift=1.0, extra=_step35,
                     layer_arrays=("attention.head_count", "attention.head_count_kv")),
    MUSE: GGUFArch("muse_glimmer_text", dict(SANDWICH_LAYER, attn_gate="self_attn.gate_proj"), extra=_muse,
                   fixes={k: ONE_PLUS_W for k in ("attn_norm.weight", "post_attention_norm.weight",
                                                  "ffn_norm.weight", "post_ffw_norm.weight")}),
}
