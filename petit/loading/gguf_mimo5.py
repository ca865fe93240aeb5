"""GGUF files of llama.cpp's `mimo2` (MiMo-V2-Flash; issue 30, the mimo group), read as the mimo_v2_flash family:
its metadata keys as the family's Hugging Face config, its tensor names as the Hugging Face names. Imported by
gguf_archs, whose ARCHS this joins.

What the files hold and what llama.cpp assumes (src/models/mimo2.cpp, llama-graph.cpp's build_moe_ffn; its
converter's conversion/mimo.py):

- `attention.head_count_kv` one value per layer (the sliding layers' twice the full layers'), the layer kinds in
  `attention.sliding_window_pattern` (1: sliding), the window `attention.sliding_window`; keys of
  `attention.key_length`, values of `attention.value_length`; `attn_sinks` in the sliding layers (the family
  requires them there and the file must have none in the full layers);
- RoPE on halves over `rope.dimension_count` values of each head, theta `rope.freq_base` in the full layers and
  `rope.freq_base_swa` in the sliding ones; the attention output times `attention.value_scale` (absent: 1), which
  equals the values' scale the family folds into v_proj;
- the MLP dense where the layer has no router (`ffn_gate_inp`), else stacked experts, routed on the sigmoid always
  (whatever `expert_gating_func` says), chosen on score + `exp_probs_b` within `expert_group_used_count` of
  `expert_group_count` groups (a group's best two summed), always renormalised, times `expert_weights_scale` when
  the file has one (llama.cpp's mimo2 reads none: the converter does not write the checkpoint's
  routed_scaling_factor, so a file runs at 1, as llama.cpp runs it);
- the multi-token-prediction blocks the converter appends (`nextn_predict_layers`, counted in `block_count`) are not
  run by llama.cpp's decoder, nor by Petit.
"""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, QWEN_EXPERTS, GGUFArch
from petit.models.families.moe.mimo_layout import padded_attention

ARCH = "mimo2"


def _mimo2(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, ARCH)

    nextn = get("nextn_predict_layers", 0)
    n = cfg["num_hidden_layers"] - nextn
    if n <= 0:
        raise ValueError(f"metadata {key('nextn_predict_layers')!r} ({nextn}) should be below "
                         f"{key('block_count')!r} ({cfg['num_hidden_layers']})")
    pattern = np.asarray(meta.get(key("attention.sliding_window_pattern"), [])).reshape(-1).tolist()
    kv = np.asarray(meta.get(key("attention.head_count_kv"), [])).reshape(-1).tolist()
    if len(pattern) < n or len(kv) < n:
        raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} and {key('attention.head_count_kv')!r} "
                         f"should hold a value for each of the {n} layers")
    types = ["sliding_attention" if p else "full_attention" for p in pattern[:n]]
    full = {int(k) for k, t in zip(kv, types) if t == "full_attention"}
    swa = {int(k) for k, t in zip(kv, types) if t == "sliding_attention"}
    base = min(full) if full else min(swa) // 2
    if len(full) > 1 or len(swa) > 1 or (swa and swa != {2 * base}):
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} is {kv[:n]}: the mimo_v2_flash family runs "
                         f"one count in the full layers and twice it in the sliding ones")
    for i, t in enumerate(types):
        if has(f"blk.{i}.attn_sinks.weight") != (t == "sliding_attention"):
            raise ValueError(f"blk.{i} ({t}) {'has no' if t == 'sliding_attention' else 'has'} attn_sinks: the "
                             f"mimo_v2_flash family has sinks in the sliding layers only")
    rot = get("rope.dimension_count")
    groups = get("expert_group_count", 0) or 1
    cfg.update(num_hidden_layers=n, layer_types=types, num_key_value_heads=base,
               v_head_dim=get("attention.value_length"), sliding_window=get("attention.sliding_window"),
               # int(head_dim x factor) is the family's RoPE width: a factor half a dim above it gives it exactly
               partial_rotary_factor=(rot + 0.5) / cfg["head_dim"],
               rope_local_base_freq=get("rope.freq_base_swa", cfg["rope_theta"], float),
               attention_value_scale=get("attention.value_scale", 0.0, float) or 1.0,
               mlp_layer_types=["sparse" if has(f"blk.{i}.ffn_gate_inp.weight") else "dense" for i in range(n)],
               moe_intermediate_size=get("expert_feed_forward_length"), norm_topk_prob=True,
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               n_group=groups, topk_group=get("expert_group_used_count") if groups > 1 else 1)


def _padded(tensors, cfg) -> dict:
    """The family's padded k / v / o projections (petit/models/families/moe/mimo_v2_flash.py), made from the file's
    rows."""
    gguf = {"k": "attn_k", "v": "attn_v", "o": "attn_output"}

    def name(i, which):
        return f"blk.{i}.{gguf[which]}.weight"

    def reader(rows):
        return lambda i, which: rows(name(i, which), 0, tensors[name(i, which)].shape[0])

    def make(rows, hf):
        return padded_attention(cfg, reader(rows))[hf][1]()
    return {hf: (shape, lambda rows, hf=hf: make(rows, hf), [name(i, which)])
            for hf, (shape, _, i, which) in padded_attention(cfg, None).items()}


MIMO5_ARCHS = {
    ARCH: GGUFArch("mimo_v2_flash", dict(LLAMA_LAYER, ffn_gate_inp="mlp.gate"),
                   whole_names={"attn_sinks.weight": "self_attn.attention_sink_bias",
                                "exp_probs_b.bias": "mlp.gate.e_score_correction_bias"},
                   experts=QWEN_EXPERTS, expert_key="n_routed_experts", extra=_mimo2, derived=_padded,
                   own_head_sizes=True, layer_arrays=("attention.head_count_kv",)),
}
