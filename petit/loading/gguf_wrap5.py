"""GGUF files of the wrap group of issue 30: llama.cpp's `mistral3` (what its converter writes for Ministral3ForCausalLM
and for Mistral3ForConditionalGeneration's text model: Ministral 3, Mistral Small 3.1 / 3.2), read as the ministral3
family, and `exaone` (EXAONE 3 / 3.5), read as the exaone family. Imported by gguf_archs, whose ARCHS these join.
(Gemma 3's and Llama 4's wrappers convert to llama.cpp's `gemma3` and `llama4`, which gguf_archs reads as
gemma3_text and llama4_text.)

What the files hold, and what llama.cpp assumes (src/models/mistral3.cpp, src/llama-context.cpp, its converter's
conversion/mistral3.py):

- Llama's block under Llama's GGUF names, q / k permuted for adjacent-pair RoPE; no sliding window (llama.cpp's
  mistral3 has none).
- The query scaling 1 + beta ln(1 + floor(p / n)): beta is `attention.temperature_scale` (the converter writes
  `llama_4_scaling_beta`; none: no scaling) and n is `rope.scaling.original_context_length` (llama.cpp's
  n_ctx_orig_yarn), the offset 0 (floor(p / n), as transformers).
- yarn: llama.cpp assumes mscale 1 and takes mscale_all_dim from `rope.scaling.yarn_log_multiplier` (the converter
  writes it from the checkpoint's mscale_all_dim), so the RoPE's attention factor is mscale(f, 1) / mscale(f,
  log_mul); without the key, mscale(f, 1).
- exaone: Llama's block under Llama's GGUF names with q / k left as they are (llama.cpp rotates halves, NEOX), llama3
  RoPE as the file's `rope_freqs` table (gguf.py reads it; without one llama.cpp scales nothing), no biases.
"""
from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch


def _mistral3(meta, key, cfg, has):
    s = cfg.get("rope_scaling")
    if s and s.get("rope_type") == "yarn":
        log_mul = meta.get(key("rope.scaling.yarn_log_multiplier"))
        if log_mul:
            s.update(mscale=1.0, mscale_all_dim=float(log_mul))
    else:
        cfg["rope_scaling"] = s or None
    beta = float(meta.get(key("attention.temperature_scale"), 0.0) or 0.0)
    n = meta.get(key("rope.scaling.original_context_length")) or cfg["max_position_embeddings"]
    if beta and not n:
        raise ValueError("metadata attention.temperature_scale is set but the floor scale "
                         "(rope.scaling.original_context_length) is 0")
    cfg.update(llama_4_scaling=[beta, int(n) or 1], sliding_window=None)


def _exaone(meta, key, cfg, has):
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size ({cfg['head_dim']}): the "
                         f"exaone family rotates whole heads")
    cfg.setdefault("rope_scaling", None)           # no rope_freqs table: llama.cpp scales nothing
    cfg.update(attention_bias=False, mlp_bias=False)


WRAP5_ARCHS = {
    "mistral3": GGUFArch("ministral3", LLAMA_LAYER, rope_pairs=True, extra=_mistral3),
    "exaone": GGUFArch("exaone", LLAMA_LAYER, extra=_exaone),
}
