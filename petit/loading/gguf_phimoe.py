"""llama.cpp's phimoe files (Phi-3.5-MoE; converter conversion/phi.py PhiMoeModel over Phi3MiniModel) read as the
model, Petit's phimoe family (PhiMoE's sparsemixer and its longrope by sequence length), not as llama.cpp runs them
(src/models/phimoe.cpp: Mixtral's routing, softmax with the top two renormalised, and the long or short RoPE factors
chosen by the context size it was started with).

What the file holds: Phi-3's keys (LayerNorm eps under `attention.layer_norm_rms_epsilon`, `attention.sliding_window`
0 for none, `rope.scaling.original_context_length`), the experts stacked (`ffn_{gate,up,down}_exps` = w1 / w3 / w2),
the biases (LayerNorms, q / k / v / o, the LM head's `output.bias`) when the checkpoint has them, and longrope's
factors as the tensors `rope_factors_long` / `_short` with one `rope.scaling.attn_factor`, which the converter
computes as sqrt(1 + ln(s) / ln(original)), s = context / original.

What it does not hold, and Petit therefore ASSUMES (a warning at load says so):
- `router_jitter_noise`, which sets the sparsemixer's threshold: transformers' default 0.01 (Phi-3.5-MoE's own);
- PhiMoE's `short_mscale` / `long_mscale` (cos / sin scales): both taken as the file's attn_factor, llama.cpp's
  scale. Phi-3.5-MoE-instruct's own are 1.0 / 1.243 where its file says 1.19, so its file runs with that scale.
`input_jitter_noise` and the sparsemixer's sampling are training-only.
"""
from petit.loading.gguf_names import MIXTRAL_EXPERTS, MIXTRAL_LAYER, GGUFArch

JITTER = 0.01           # PhimoeConfig's router_jitter_noise default
ASSUMED = ("the phimoe file keeps neither router_jitter_noise nor PhiMoE's short_mscale / long_mscale: the "
           "sparsemixer runs at transformers' default jitter 0.01 and both RoPE scales are the file's "
           "rope.scaling.attn_factor (exact for a checkpoint with those values)")


def _phimoe(meta, key, cfg, has):
    window = meta.get(key("attention.sliding_window"))
    cfg.update(sliding_window=int(window) if window else None, router_jitter_noise=JITTER,
               attention_bias=has("blk.0.attn_q.bias"), lm_head_bias=has("output.bias"),
               original_max_position_embeddings=meta.get(key("rope.scaling.original_context_length")))


def mscales(meta, scaling: dict) -> dict:
    """longrope's scaling as PhimoeConfig spells it: the attention factor as both mscales, the original length."""
    s = dict(scaling)
    attn = float(s.pop("attention_factor", 1.0))
    orig = meta.get("phimoe.rope.scaling.original_context_length")
    if orig is None:
        raise ValueError("metadata 'phimoe.rope.scaling.original_context_length' is missing: PhiMoE's longrope "
                         "chooses its factors and scale by it")
    return dict(s, short_mscale=attn, long_mscale=attn, original_max_position_embeddings=int(orig))


PHIMOE_ARCHS = {
    "phimoe": GGUFArch("phimoe", MIXTRAL_LAYER, experts=MIXTRAL_EXPERTS, expert_key="num_local_experts",
                       extra=_phimoe),
}
