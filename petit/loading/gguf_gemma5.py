"""GGUF files of the gemma group of issue 30 (llama.cpp's gemma4): their metadata keys as the Petit family's Hugging
Face config, their tensor names as its Hugging Face names. Imported by gguf_archs, whose ARCHS these join.

What llama.cpp's converter writes and its graph assumes (conversion/gemma.py Gemma4Model, src/models/gemma4.cpp):

- the full layers' head size in `attention.key_length` (= value_length), the sliding layers' in
  `attention.key_length_swa`; `attention.head_count_kv` one value a layer (the full layers' may differ);
  `feed_forward_length` one value a layer (twice as wide on the KV-sharing layers with use_double_wide_mlp);
  `attention.sliding_window_pattern` one bool a layer; `attention.shared_kv_layers`; `rope.freq_base` (full layers)
  and `rope.freq_base_swa`; `embedding_length_per_layer_input` (0: no per-layer inputs);
- the full layers' proportional RoPE as llama.cpp runs it: the whole head rotated in halves, with the per-frequency
  divisors of `rope_freqs` (1 for the turning pairs, 1e30 for the others), read by gguf.py as a scaling table, which
  gemma4's builder applies to the full layers only (llama.cpp: "only used by the full_attention layers");
- `blk.N.layer_output_scale` is transformers' layer_scalar; the norms are stored as x w (no 1 + w shift);
- a full layer with keys as values (attention_k_eq_v) has no attn_v: its values are its keys before the key norm.

llama.cpp's gemma3n (conversion/gemma.py Gemma3NModel, src/models/gemma3n.cpp) is read as llama.cpp runs it, which
hard-codes Gemma 3n E2B / E4B's choices instead of reading the file's keys:

- activation sparsity in layers 0..9 only, with the cutoff mean + 1.6448533 x std where std is the row's *unbiased*
  (n - 1) standard deviation (transformers: the biased one). Petit's kernel takes the biased std, so the reader
  sets each sparse layer's `activation_sparsity_pattern` to the p whose multiplier is 1.6448533 x sqrt(F / (F - 1))
  (F the MLP width): the same cutoff. On E2B's F = 8192 this is 6e-5 of the std from transformers' cutoff; on the
  F = 64 fixture it is 0.8 % (5 % of the logit range: tests/fixtures/gguf5_gemma/README.md);
- keys and values computed in layers 0..19 only; a later layer attends over layer 18's (sliding) or 19's (full)
  cache: transformers' KV sharing with num_kv_shared_layers = layers - 20 when layer 18 is sliding and 19 full;
- one MLP width (layer 0's), 4 AltUp streams, LAuReL's rank and the 256 per-layer inputs from the tensors' shapes;
- the stacked `altup_proj` / `altup_unembd_proj` [3, D, D] are transformers' three projections each;
- every id has a per-layer row (the converter pads the table with zero rows: transformers reads row 0 there).

The file's own `activation_sparsity_scale` and `attention.shared_kv_layers` must say what llama.cpp does (a file
whose keys say otherwise is refused: llama.cpp would run it differently from its source model).
"""
import math
import statistics

import numpy as np

from petit.loading.gguf_names import SANDWICH_LAYER, GGUFArch

GEMMA4_LAYER = dict(SANDWICH_LAYER, inp_gate="per_layer_input_gate", proj="per_layer_projection",
                    post_norm="post_per_layer_input_norm")
GEMMA4_GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
                 "per_layer_token_embd": "model.embed_tokens_per_layer",
                 "per_layer_model_proj": "model.per_layer_model_projection",
                 "per_layer_proj_norm": "model.per_layer_projection_norm"}


def _array(meta, key, name: str, n: int, default):
    v = meta.get(key(name), default)
    out = np.asarray(v).reshape(-1).tolist()
    if len(out) == 1:
        out = out * n
    if len(out) != n:
        raise ValueError(f"metadata {key(name)!r} has {len(out)} values for {n} layers")
    return out


def _gemma4(meta, key, cfg, has):
    if meta.get(key("expert_count")):
        raise ValueError("a gemma4 file with experts (Gemma 4 26B-A4B's routed experts beside the MLP) is not read by "
                         "Petit yet: the converter's expert tensors (the router's scale, the per-expert down scales) "
                         "have no mapping checked against llama.cpp; its Hugging Face folder runs")
    n = cfg["num_hidden_layers"]
    sliding = [bool(x) for x in _array(meta, key, "attention.sliding_window_pattern", n, False)]
    kv = [int(x) for x in _array(meta, key, "attention.head_count_kv", n, cfg["num_attention_heads"])]
    ff = [int(x) for x in _array(meta, key, "feed_forward_length", n, 0)]
    full_hd = int(meta.get(key("attention.key_length")))
    swa_hd = int(meta.get(key("attention.key_length_swa"), full_hd))
    shared = int(meta.get(key("attention.shared_kv_layers"), 0))
    first_shared = n - shared
    base = min(ff)
    if any(f != (2 * base if i >= first_shared else base) for i, f in enumerate(ff)) and len(set(ff)) > 1:
        raise ValueError(f"metadata {key('feed_forward_length')!r} {ff} is neither one width nor gemma4's double "
                         f"width on its {shared} KV-sharing layers")
    swa_kv = next((k for k, s in zip(kv, sliding) if s), kv[0])
    if any(k != swa_kv for k, s in zip(kv, sliding) if s):
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} {kv} differs between sliding layers")
    per_layer = {str(i): {"head_dim": full_hd, "num_key_value_heads": kv[i]} for i in range(n) if not sliding[i]}
    P = int(meta.get(key("embedding_length_per_layer_input"), 0))
    cfg.pop("partial_rotary_factor", None)
    cfg.update(model_type="gemma4_text", head_dim=swa_hd, num_key_value_heads=swa_kv, intermediate_size=base,
               use_double_wide_mlp=len(set(ff)) > 1, per_layer_config=per_layer, num_kv_shared_layers=shared,
               layer_types=["sliding_attention" if s else "full_attention" for s in sliding],
               sliding_window=int(meta.get(key("attention.sliding_window"), 512)),
               rope_local_base_freq=float(meta.get(key("rope.freq_base_swa"), 10000.0)),
               full_rope_type="default", partial_rotary_factor=1.0,
               hidden_size_per_layer_input=P, vocab_size_per_layer_input=cfg["vocab_size"],
               attention_k_eq_v=any(not s and not has(f"blk.{i}.attn_v.weight") and has(f"blk.{i}.attn_k.weight")
                                    for i, s in enumerate(sliding)),
               final_logit_softcapping=float(meta[key("final_logit_softcapping")])
               if meta.get(key("final_logit_softcapping")) else None,
               hidden_activation="gelu_pytorch_tanh")


GEMMA3N_LAYER = dict(SANDWICH_LAYER, inp_gate="per_layer_input_gate", proj="per_layer_projection",
                     post_norm="post_per_layer_input_norm", altup_correct_coef="altup.correction_coefs",
                     altup_predict_coef="altup.prediction_coefs", altup_router="altup.modality_router",
                     altup_router_norm="altup.router_norm", laurel_l="laurel.linear_left",
                     laurel_r="laurel.linear_right", laurel_post_norm="laurel.post_laurel_norm")
G3N_SPARSE_LAYERS = 10              # llama.cpp: n_layer_sparsity
G3N_KV_LAYERS = 20                  # llama.cpp: n_layer_kv_from_start
G3N_STD_MUL = 1.6448533535003662    # llama.cpp: f_sparsity_std_mul, over the unbiased std


def _gemma3n(meta, key, cfg, has):
    n = cfg["num_hidden_layers"]
    sliding = [bool(x) for x in _array(meta, key, "attention.sliding_window_pattern", n, None)] \
        if meta.get(key("attention.sliding_window_pattern")) is not None else [(i + 1) % 5 != 0 for i in range(n)]
    if int(meta.get(key("altup.num_inputs"), 4)) != 4 or int(meta.get(key("altup.active_idx"), 0)) != 0:
        raise ValueError("llama.cpp's gemma3n runs 4 AltUp streams with stream 0 active; this file says "
                         f"{meta.get(key('altup.num_inputs'))} streams, active {meta.get(key('altup.active_idx'))}")
    F = cfg["intermediate_size"]
    scale = [float(x) for x in _array(meta, key, "activation_sparsity_scale", n, 0.0)]
    want = [G3N_STD_MUL if i < G3N_SPARSE_LAYERS else 0.0 for i in range(n)]
    if any(abs(a - b) > 1e-5 for a, b in zip(scale, want)):
        raise ValueError(f"metadata {key('activation_sparsity_scale')!r} is {scale}, but llama.cpp's gemma3n cuts "
                         f"at {G3N_STD_MUL:.7f} std in the first {G3N_SPARSE_LAYERS} layers whatever the file says "
                         f"(Gemma 3n E2B / E4B's pattern): it would not run this file's model")
    # llama.cpp's cutoff, mean + m x unbiased std, is mean + m sqrt(F / (F - 1)) x the biased std Petit takes: the p
    # whose standard normal quantile is that multiplier
    p = statistics.NormalDist().cdf(G3N_STD_MUL * math.sqrt(F / (F - 1)))
    shared = max(0, n - G3N_KV_LAYERS)
    if int(meta.get(key("attention.shared_kv_layers"), shared)) != shared:
        raise ValueError(f"metadata {key('attention.shared_kv_layers')!r} is "
                         f"{meta.get(key('attention.shared_kv_layers'))}, but llama.cpp's gemma3n computes keys and "
                         f"values in the first {G3N_KV_LAYERS} layers whatever the file says ({shared} shared here)")
    if shared and (sliding[G3N_KV_LAYERS - 1] or not sliding[G3N_KV_LAYERS - 2]):
        raise ValueError(f"llama.cpp's gemma3n has layers {G3N_KV_LAYERS}.. attend over layer "
                         f"{G3N_KV_LAYERS - 2}'s (sliding) or {G3N_KV_LAYERS - 1}'s (full) cache; in this file those "
                         f"layers are not sliding then full, so no Gemma 3n model computes what llama.cpp does")
    cfg.update(model_type="gemma3n_text", layer_types=["sliding_attention" if s else "full_attention"
                                                       for s in sliding],
               sliding_window=int(meta.get(key("attention.sliding_window"), 512)),
               rope_local_base_freq=float(meta.get(key("rope.freq_base_swa"), 10000.0)),
               vocab_size_per_layer_input=cfg["vocab_size"],
               hidden_size_per_layer_input=int(meta[key("embedding_length_per_layer_input")]),
               altup_num_inputs=4, altup_active_idx=0, num_kv_shared_layers=shared,
               activation_sparsity_pattern=[p if i < G3N_SPARSE_LAYERS else 0.0 for i in range(n)],
               final_logit_softcapping=float(meta[key("final_logit_softcapping")])
               if meta.get(key("final_logit_softcapping")) else None,
               hidden_activation="gelu_pytorch_tanh")


def _gemma3n_joins(tensors, cfg) -> dict:
    """The stacked AltUp projections [3, D, D]: transformers' altup_(unembed_)projections.0..2, rows e D..(e+1) D."""
    out = {}
    for gname, hf in (("altup_proj.weight", "model.altup_projections"),
                      ("altup_unembd_proj.weight", "model.altup_unembed_projections")):
        if gname in tensors:
            shape = tensors[gname].shape
            rows = shape[-2] if len(shape) == 3 else shape[0] // 3
            out.update({f"{hf}.{e}.weight": [(gname, (e * rows, (e + 1) * rows))] for e in range(3)})
    return out


GEMMA5_ARCHS = {
    "gemma3n": GGUFArch("gemma3n_text", GEMMA3N_LAYER, global_names=GEMMA4_GLOBAL, extra=_gemma3n,
                        joins=_gemma3n_joins, whole_names={"altup_correct_scale.weight": "altup.correct_output_scale"}),
    "gemma4": GGUFArch("gemma4_text", GEMMA4_LAYER, global_names=GEMMA4_GLOBAL, extra=_gemma4,
                       whole_names={"layer_output_scale.weight": "layer_scalar"},
                       layer_arrays=("attention.head_count_kv", "feed_forward_length")),
}
