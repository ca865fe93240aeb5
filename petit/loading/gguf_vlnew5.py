"""Issue 36, the vlnew group: llama.cpp's `hunyuan_vl` files (HunyuanOCR's language model; conversion/hunyuan.py
HunyuanVLTextModel, src/models/hunyuan-vl.cpp), read as the hunyuan_vl_text family.

The tensors are hunyuan-dense's (q / k RMSNorms per head after RoPE, which llama.cpp applies in that order too). The
converter writes transformers' dynamic + mrope_section back as XD-RoPE: `rope.freq_base` the RoPE theta (not baked
as hunyuan-dense's files are), `rope.scaling.alpha` the NTK alpha, which llama.cpp's loader applies as theta *
alpha^(d / (d - 2)) (in float32, where transformers and Petit compute in float64: llama.cpp's run is 1.9e-4 of the
logit range from transformers' on the fixture), and `rope.dimension_sections` the sections, which give every section
the token's position for text (llama.cpp's batch, as transformers). llama.cpp's graph loads no attention bias: a file
with one is refused by name (the family's attention_bias has all four)."""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch


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


VLNEW5_ARCHS = {"hunyuan_vl": GGUFArch("hunyuan_vl_text", dict(LLAMA_LAYER, attn_q_norm="self_attn.query_layernorm",
                                                               attn_k_norm="self_attn.key_layernorm"),
                                       extra=_hunyuan_vl)}
