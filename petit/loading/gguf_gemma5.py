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

llama.cpp's gemma3n is not read (petit/models/refusals.py says why): it hard-codes Gemma 3n E2B / E4B's shapes (keys
and values from the first 20 layers, sparsity in the first 10, LAuReL rank 64, 256 per-layer inputs a layer), so the
smallest file it runs is far above a fixture's budget and no reader can be checked against it.
"""
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


GEMMA5_ARCHS = {
    "gemma4": GGUFArch("gemma4_text", GEMMA4_LAYER, global_names=GEMMA4_GLOBAL, extra=_gemma4,
                       whole_names={"layer_output_scale.weight": "layer_scalar"},
                       layer_arrays=("attention.head_count_kv", "feed_forward_length")),
}
