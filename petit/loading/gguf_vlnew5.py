"""Issue 36, the vlnew group: llama.cpp's `hunyuan_vl` files (HunyuanOCR's language model; conversion/hunyuan.py
HunyuanVLTextModel, src/models/hunyuan-vl.cpp), read as the hunyuan_vl_text family, and its `deepseek2-ocr` files
(DeepSeek-OCR's language model; conversion/deepseek.py DeepseekV2Model for DeepseekOCRForCausalLM,
src/models/deepseek2ocr.cpp and deepseek2.cpp's is_ocr branch), read as the deepseek_ocr2_text family.

The tensors are hunyuan-dense's (q / k RMSNorms per head after RoPE, which llama.cpp applies in that order too). The
converter writes transformers' dynamic + mrope_section back as XD-RoPE: `rope.freq_base` the RoPE theta (not baked
as hunyuan-dense's files are), `rope.scaling.alpha` the NTK alpha, which llama.cpp's loader applies as theta *
alpha^(d / (d - 2)) (in float32, where transformers and Petit compute in float64: llama.cpp's run is 1.9e-4 of the
logit range from transformers' on the fixture), and `rope.dimension_sections` the sections, which give every section
the token's position for text (llama.cpp's batch, as transformers). llama.cpp's graph loads no attention bias: a file
with one is refused by name (the family's attention_bias has all four).

deepseek2-ocr: Llama's attention with a key / value head per query head (llama.cpp builds no other) and RoPE on
halves of the whole head, q / k unpermuted; `leading_dense_block_count` dense SwiGLU layers, then DeepSeek-V2's
experts (the stacked `ffn_*_exps`, the router `ffn_gate_inp`, `ffn_*_shexp` the shared experts): softmax over the
router's logits, the top `expert_used_count`, times `expert_weights_scale`, not renormalised. A file that says
otherwise (`expert_weights_norm`, a gating function other than softmax, a selection bias, partial RoPE) is refused
by name."""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_moe import DEEPSEEK_LAYER
from petit.loading.gguf_names import LLAMA_LAYER, QWEN_EXPERTS, GGUFArch

SOFTMAX = 1         # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX (0: none, the arch's default, softmax here)


def _hunyuan_vl(meta, key, cfg, has):
    sections = meta.get(key("rope.dimension_sections"))
    if sections is None:
        raise ValueError(f"metadata {key('rope.dimension_sections')!r} is missing: llama.cpp's hunyuan_vl requires it "
                         f"(the XD-RoPE sections)")
    sections = [int(s) for s in np.asarray(sections).reshape(-1)]
    while len(sections) > 3 and sections[-1] == 0:      # llama.cpp pads to four
        sections.pop()
    if has("blk.0.attn_q.bias") or has("blk.0.attn_output.bias"):
        raise ValueError("attention biases: llama.cpp's hunyuan_vl loads none (its o_proj has no bias slot), so the "
                         "file's graph is not the model's")
    alpha = _number(meta, key, "rope.scaling.alpha", 0.0, float, "hunyuan_vl")
    rope = {"rope_type": "dynamic", "alpha": alpha} if alpha > 0 else {"rope_type": "default"}
    cfg.update(rope_scaling=dict(rope, mrope_section=sections), attention_bias=False)


def _deepseek2_ocr(meta, key, cfg, has):
    arch = "deepseek2-ocr"
    n = cfg["num_hidden_layers"]
    dense = _number(meta, key, "leading_dense_block_count", 0, int, arch)
    if not 0 <= dense <= n:
        raise ValueError(f"metadata {key('leading_dense_block_count')!r} is {dense}, not a layer count of 0..{n}")
    if meta.get(key("expert_weights_norm")):
        raise ValueError(f"metadata {key('expert_weights_norm')!r} is true: DeepSeek-OCR's experts' weights are "
                         f"not renormalised (the deepseek_ocr2_text family)")
    gating = _number(meta, key, "expert_gating_func", 0, int, arch)
    if gating not in (0, SOFTMAX):
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: DeepSeek-OCR routes on a softmax")
    if has("blk.{}.exp_probs_b.bias".format(dense)):
        raise ValueError("a selection bias (exp_probs_b): DeepSeek-OCR's router has none")
    if cfg["num_key_value_heads"] != cfg["num_attention_heads"]:
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} ({cfg['num_key_value_heads']}) differs from "
                         f"{key('attention.head_count')!r}: llama.cpp's deepseek2-ocr builds a key / value head per "
                         f"query head")
    if has("blk.0.attn_q.bias") or has("blk.0.attn_output.bias"):
        raise ValueError("attention biases: llama.cpp's deepseek2-ocr adds no o_proj bias, so the file's graph is "
                         "not the model's")
    if cfg.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size: DeepSeek-OCR rotates whole "
                         f"heads")
    cfg.update(moe_intermediate_size=_number(meta, key, "expert_feed_forward_length", None, int, arch),
               n_shared_experts=_number(meta, key, "expert_shared_count", 0, int, arch),
               routed_scaling_factor=_number(meta, key, "expert_weights_scale", 1.0, float, arch),
               mlp_layer_types=["dense"] * dense + ["sparse"] * (n - dense), topk_method="greedy")
    cfg.pop("head_dim", None)                       # hidden / heads, as the family's config forces


VLNEW5_ARCHS = {"deepseek2-ocr": GGUFArch("deepseek_ocr2_text", DEEPSEEK_LAYER, experts=QWEN_EXPERTS,
                                          expert_key="n_routed_experts", extra=_deepseek2_ocr),
                "hunyuan_vl": GGUFArch("hunyuan_vl_text", dict(LLAMA_LAYER, attn_q_norm="self_attn.query_layernorm",
                                                               attn_k_norm="self_attn.key_layernorm"),
                                       extra=_hunyuan_vl)}
