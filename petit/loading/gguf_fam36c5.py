"""llama.cpp's bailingmoe2 files (issue 36, the fam36c group), read as the sarvam_moe family: llama.cpp's converter
writes Sarvam-30B (SarvamMoEForCausalLM) as bailingmoe2 (conversion/bailingmoe.py), Ling 2.0's architecture, whose
graph (src/models/bailingmoe2.cpp, llama-graph.cpp's build_moe_ffn) is GLM-4.5's block as sarvam_moe runs it:

- the fused `attn_qkv` (q, k, v rows, no bias: llama.cpp loads none) split when read, RMS norms over each head of q
  and k (required), RoPE on halves (NEOX) over the first `rope.dimension_count` of each head, `attn_output` unbiased;
- dense layers before `leading_dense_block_count`, then experts: the router's `expert_gating_func` (llama.cpp
  requires the key; Petit runs the sigmoid, 2), the choice on those plus `exp_probs_b` (optional: without it the
  scores alone, a zero bias here; Sarvam's converter centres the bias, which changes no choice) within the
  `expert_group_used_count` of `expert_group_count` groups, renormalised with `expert_weights_norm`, times
  `expert_weights_scale` (absent: 1); `expert_shared_count` shared experts, one SwiGLU of
  (`expert_shared_feed_forward_length`, absent: `expert_feed_forward_length`) x that count, which the family has of
  the experts' width times the count (another width is refused);
- the multi-token-prediction layers the converter appends (`nextn_predict_layers`, counted in `block_count`) are
  skipped, as llama.cpp's decoder skips them."""
from petit.loading.gguf_moe import DEEPSEEK_LAYER, _number, _zero_selection_bias
from petit.loading.gguf_names import QKV, QWEN_EXPERTS, GGUFArch

ARCH = "bailingmoe2"


def _bailingmoe2(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, ARCH)

    gating = get("expert_gating_func")
    if gating != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: Petit's sarvam_moe family runs the "
                         f"sigmoid (2) only")
    nextn = get("nextn_predict_layers", 0)
    if not 0 <= nextn < cfg["num_hidden_layers"]:
        raise ValueError(f"metadata {key('nextn_predict_layers')!r} ({nextn}) should be below "
                         f"{key('block_count')!r} ({cfg['num_hidden_layers']})")
    inter, shared = get("expert_feed_forward_length"), get("expert_shared_count")
    shexp = get("expert_shared_feed_forward_length", 0) or inter
    if shexp != inter:
        raise ValueError(f"metadata {key('expert_shared_feed_forward_length')!r} ({shexp}) differs from "
                         f"{key('expert_feed_forward_length')!r} ({inter}): llama.cpp's shared MLP is it x "
                         f"{key('expert_shared_count')!r} wide, the sarvam_moe family's the experts' width x the count")
    groups = get("expert_group_count", 0) or 1
    cfg.update(num_hidden_layers=cfg["num_hidden_layers"] - nextn, partial_rotary_factor=cfg.get(
                   "partial_rotary_factor", 1.0), attention_bias=False, use_qk_norm=True,
               moe_intermediate_size=inter, n_shared_experts=shared,
               first_k_dense_replace=get("leading_dense_block_count", 0),
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               n_group=groups, topk_group=get("expert_group_used_count") if groups > 1 else 1)


FAM36C5_ARCHS = {
    ARCH: GGUFArch("sarvam_moe", DEEPSEEK_LAYER, splits={"attn_qkv": QKV},
                   whole_names={"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"}, experts=QWEN_EXPERTS,
                   expert_key="n_routed_experts", extra=_bailingmoe2, meta_tensors=_zero_selection_bias),
}
