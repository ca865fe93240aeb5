"""GGUF files of the dense group of issue 30 (llama.cpp's granite_swa, minicpm, internlm2 and jais2): their
metadata keys as the Petit family's Hugging Face config, their tensor names as its Hugging Face names. Imported by
gguf_archs, whose ARCHS these join.

What the files hold, and what llama.cpp assumes (src/models/granite-swa.cpp, minicpm.cpp, internlm2.cpp, and its
converter's conversion/granite.py, minicpm.py, internlm.py):

- granite_swa (Granite 4 with sliding windows): Granite's multipliers as granite's files hold them, the window
  (`attention.sliding_window`), which layers slide (`attention.sliding_window_pattern`, one bool a layer), which
  layers rotate (`attention.rope_pattern`, optional: every layer without it), and each layer's sinks in
  `attn_sinks.weight`. llama.cpp has one RoPE base for every rotating layer: transformers' `layer_rope_theta` is
  not in the file beyond its zeros (the converter reads them as `no_rope_layers`), so a checkpoint with per-layer
  bases runs as llama.cpp runs it. With experts (GraniteMoeSWA) the converter fuses each layer's expert gate / up
  (`ffn_gate_up_exps`) and the shared MLP's (`ffn_up_shexp`); Petit does not read those yet and says so.
- minicpm (MiniCPM v1 / v2): Granite's graph in llama.cpp with its three scales, `embedding_scale` (scale_emb),
  `residual_scale` (scale_depth / sqrt(layers)) and `logit_scale` (hidden_size / dim_model_base, the logits
  divided by it); without the keys llama.cpp takes 12, 1.4 / sqrt(layers) and 256 / hidden (older files).
- jais2 (Jais 2): LayerNorms with biases (`attention.layer_norm_epsilon`), biases on q / k / v / o and up / down
  when the file has them, and the plain MLP with relu² whatever the checkpoint's hidden_act (llama.cpp's graph
  hard-codes it); RoPE on halves, unpermuted.
- internlm2: the converter splits the grouped `wqkv` into attn_q / attn_k / attn_v and permutes q / k for
  adjacent-pair RoPE as for Llama; the file then is a Llama block under Llama's GGUF names (no biases).
"""
import math

import numpy as np

from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch, _granite


def _bools(meta, key, name: str, n: int, default: bool) -> list:
    v = meta.get(key(name))
    if v is None:
        return [default] * n
    out = [bool(x) for x in np.asarray(v).reshape(-1).tolist()]
    if len(out) != n:
        raise ValueError(f"metadata {key(name)!r} has {len(out)} values for {n} layers")
    return out


def _granite_swa(meta, key, cfg, has):
    if meta.get(key("expert_count")):
        raise ValueError("a granite_swa file with experts (GraniteMoeSWA: the converter fuses their gate / up in "
                         "ffn_gate_up_exps) is not read by Petit yet")
    _granite(meta, key, cfg, has)
    n = cfg["num_hidden_layers"]
    sliding = _bools(meta, key, "attention.sliding_window_pattern", n, False)
    rotating = _bools(meta, key, "attention.rope_pattern", n, True)
    cfg.update(model_type="granite_swa", sliding_window=int(meta.get(key("attention.sliding_window"), 0)) or None,
               layer_types=["sliding_attention" if s else "full_attention" for s in sliding],
               layer_rope_theta=[cfg["rope_theta"] if r else 0.0 for r in rotating])


def _minicpm(meta, key, cfg, has):
    L, hidden = cfg["num_hidden_layers"], cfg["hidden_size"]
    residual = float(meta.get(key("residual_scale"), 1.4 / math.sqrt(L)))
    cfg.update(scale_emb=float(meta.get(key("embedding_scale"), 12.0)), scale_depth=residual * math.sqrt(L),
               dim_model_base=hidden / float(meta.get(key("logit_scale"), 256.0 / hidden)))


def _jais2(meta, key, cfg, has):
    cfg.pop("rms_norm_eps", None)
    cfg["layer_norm_eps"] = float(meta.get(key("attention.layer_norm_epsilon"), 1e-5))
    cfg.update(attention_bias=has("blk.0.attn_q.bias"), mlp_bias=has("blk.0.ffn_up.bias"), hidden_act="relu2")


DENSE5_ARCHS = {
    "jais2": GGUFArch("jais2", LLAMA_LAYER, extra=_jais2),
    "granite_swa": GGUFArch("granite_swa", LLAMA_LAYER, rope_pairs=True,
                            whole_names={"attn_sinks.weight": "self_attn.sinks"}, extra=_granite_swa),
    "minicpm": GGUFArch("minicpm", LLAMA_LAYER, rope_pairs=True, extra=_minicpm),
    "internlm2": GGUFArch("internlm2", LLAMA_LAYER, rope_pairs=True,
                          extra=lambda meta, key, cfg, has: cfg.update(bias=False)),
}
