"""llama.cpp's Qwen2-VL / Qwen3-VL language-model files (issue 36, the fam36r group), read as the text families they
are for text: qwen2vl as qwen2, qwen3vl as qwen3, qwen3vlmoe as qwen3_moe. Their converters (conversion/qwenvl.py,
conversion/qwen3vl.py) write the language model alone (the vision tower goes to a separate mmproj file), under the
text families' tensor names; the graphs (src/models/qwen2vl.cpp, qwen3vl.cpp, qwen3vlmoe.cpp) are the text families'
with M-RoPE:

- `rope.dimension_sections` (required, as llama.cpp requires it) splits the rotary pairs among the temporal / height
  / width positions of an image token; a text token has one position, which llama.cpp's batch gives every section
  (src/llama-batch.cpp), so each pair rotates by the token's position at the usual frequency: the families'
  rotate-half RoPE, whatever the sections;
- `n_deepstack_layers` (Qwen3-VL) adds image features to the first layers' outputs; a text token's are zeros (its
  embedding is padded), so they add nothing.

Petit reads text: image inputs (the mmproj file) are not read. PaddleOCR-VL's language model (`paddleocr`;
conversion/ernie.py PaddleOCRModel, src/models/paddleocr.cpp) is llama's block under M-RoPE on halves, its q / k
unpermuted: read as llama, its biases as the file holds them (use_bias: all of q / k / v / o and the MLP's).

XVERSE's files (remote code, no transformers class; conversion/xverse.py, src/models/xverse.cpp) are llama's block
under another name: q / k rows permuted for adjacent-pair RoPE, RMSNorms, SwiGLU, an untied output; read as llama.
Orion's (remote code; conversion/orion.py, src/models/orion.cpp) are a LayerNorm llama: LayerNorms with weight and
bias, RoPE on halves over the whole head (its converter writes no rope.dimension_count: llama.cpp rotates head_dim),
SwiGLU, no attention bias, sequential residuals, an untied output: the stablelm family with those options.
openPangu-Embedded's (remote code; conversion/pangu.py, src/models/pangu-embed.cpp) are llama's block with attention
biases, q / k not permuted (RoPE on halves): the llama family with attention_bias; its graph requires the o_proj bias
and takes q / k / v biases when stored, so a file without them (o_proj's alone) is refused.
The first Qwen's (QWenLMHeadModel, remote code; conversion/qwen.py, src/models/qwen.cpp) are Qwen2's block with a key /
value head per query head: the fused attn_qkv (and its bias) split into q / k / v, RoPE on halves, and an MLP
feed_forward_length / 2 wide (Qwen's config counts both of w1 and w2; llama.cpp's graph halves it).
Mellum's (transformers' mellum, conversion/mellum.py, src/models/mellum.cpp) are qwen3_moe's names with every layer
sparse, `attention.sliding_window` and its per-layer `sliding_window_pattern`, and `rope.freq_base_swa` the sliding
layers' base (absent: rope.freq_base), as transformers' rope_parameters["sliding_attention"]. llama.cpp 0.3.36's
graph loads that base but rotates sliding layers with rope.freq_base: where the two differ (the release's 10000 and
500000) its logits are not transformers'; Petit reads the file as transformers runs the model."""
from dataclasses import replace

import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, QKV, GGUFArch


def _sections(base_extra, arch):
    def extra(meta, key, cfg, has):
        sections = meta.get(key("rope.dimension_sections"))
        if sections is None:
            raise ValueError(f"metadata {key('rope.dimension_sections')!r} is missing: llama.cpp's {arch} requires "
                             f"it (the M-RoPE sections)")
        if len(sections) != 4 or any(int(s) < 0 for s in sections):
            raise ValueError(f"metadata {key('rope.dimension_sections')!r} is {list(sections)!r}: llama.cpp's "
                             f"{arch} reads four section sizes")
        _number(meta, key, "n_deepstack_layers", 0, int, arch)   # a number when present; nothing for text
        if base_extra:
            base_extra(meta, key, cfg, has)
    return extra


def _full_rotary(base_extra):
    def extra(meta, key, cfg, has):
        base_extra(meta, key, cfg, has)
        cfg.setdefault("partial_rotary_factor", 1.0)       # no rope.dimension_count: llama.cpp rotates head_dim
    return extra


def _pangu(meta, key, cfg, has):
    if not has("blk.0.attn_q.bias"):
        raise ValueError("an o_proj bias without q / k / v biases: the llama family's attention_bias has all four")
    cfg.update(attention_bias=True, mlp_bias=False)


def _qwen(meta, key, cfg, has):
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    if kv != heads:
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} ({kv}) differs from "
                         f"{key('attention.head_count')!r} ({heads}): llama.cpp's qwen has a key / value head per "
                         f"query head")
    if cfg["intermediate_size"] % 2:
        raise ValueError(f"metadata {key('feed_forward_length')!r} ({cfg['intermediate_size']}) is odd: llama.cpp's "
                         f"qwen runs an MLP half as wide")
    cfg["intermediate_size"] //= 2


def _mellum(base_extra):
    def extra(meta, key, cfg, has):
        base_extra(meta, key, cfg, has)
        n, window = cfg["num_hidden_layers"], _number(meta, key, "attention.sliding_window", 0, int, "mellum")
        pattern = np.asarray(meta.get(key("attention.sliding_window_pattern"), [])).reshape(-1).tolist()
        if window and len(pattern) != n:
            raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} should hold a value for each of "
                             f"the {n} layers (sliding or not) when {key('attention.sliding_window')!r} is set")
        cfg.update(sliding_window=window or None, mlp_layer_types=["sparse"] * n,
                   layer_types=["sliding_attention" if window and p else "full_attention" for p in pattern or [0] * n],
                   rope_local_base_freq=_number(meta, key, "rope.freq_base_swa", cfg["rope_theta"], float, "mellum"))
    return extra


def fam36r_archs(archs: dict) -> dict:
    """The group's architectures from the ones in `archs` (gguf_archs.ARCHS) they are: the VL ones with the M-RoPE
    metadata checked, xverse as llama, orion as stablelm rotating whole heads, pangu-embedded as llama unpermuted, qwen
    as qwen2, mellum with qwen3moe's names, paddleocr as llama unpermuted."""
    vl = {name: replace(archs[text], extra=_sections(archs[text].extra, name))
          for name, text in (("qwen2vl", "qwen2"), ("qwen3vl", "qwen3"), ("qwen3vlmoe", "qwen3moe"))}
    return {**vl, "xverse": archs["llama"],
            "orion": replace(archs["stablelm"], extra=_full_rotary(archs["stablelm"].extra)),
            "pangu-embedded": GGUFArch("llama", LLAMA_LAYER, extra=_pangu),
            "qwen": GGUFArch("qwen2", LLAMA_LAYER, splits={"attn_qkv": QKV}, extra=_qwen),
            "mellum": replace(archs["qwen3moe"], model_type="mellum", extra=_mellum(archs["qwen3moe"].extra)),
            "paddleocr": replace(archs["llama"], rope_pairs=False)}
