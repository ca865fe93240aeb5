"""GGUF files of more Llama variants (llama.cpp's apertus, exaone4, chatglm and gpt-oss): their metadata keys as the
Petit family's Hugging Face config, their tensor names as its Hugging Face names. Imported by gguf_archs, whose ARCHS
these join.

What the files hold differently from a Hugging Face checkpoint, and what llama.cpp assumes (src/models/apertus.cpp,
exaone4.cpp, chatglm.cpp):

- apertus: the xIELU parameters of each layer are metadata (`xielu.alpha_p`, `alpha_n`, `beta`, `eps`, one number a
  layer or one for all), read as the family's `mlp.act_fn.*` tensors. llama.cpp takes their softplus in float32
  (`ggml_xielu`), where transformers keeps the parameters in bfloat16 and rounds softplus(alpha_p) and beta +
  softplus(alpha_n) to bfloat16: such a file runs with `xielu_bf16` off, as llama.cpp runs it. Llama 3's RoPE
  scaling is the `rope_freqs` table (gguf.py reads it); without one llama.cpp scales nothing, where the family's
  config would default to llama3.
- exaone4: llama.cpp runs local / global attention only for 64 layers (the 32B model: window `sliding_window` or
  4096, pattern `sliding_window_pattern`, an array or every 4th layer full; the full layers without RoPE); any
  other depth runs every layer full, with RoPE, whatever its keys say (so the fixture's file gives llama.cpp's
  logits, 0.66 of their range from transformers').
- chatglm (GLM-4-9B and ChatGLM, Petit's glm family): gate|up fused in `ffn_up` and, in ChatGLM's own files, q|k|v in
  `attn_qkv` (split by rows, no copy); partial RoPE on adjacent pairs, as the family runs it, over
  `rope.dimension_count` values of each head (all of them when the key is absent, as llama.cpp takes it).
- gpt-oss: experts stacked as for the other MoE architectures, their biases [experts, n] read by rows; sinks in
  `attn_sinks.weight`; sliding / full layers by llama.cpp's pattern (every other one). llama.cpp's YaRN always rounds
  the correction range to whole dimensions, where the releases' config has truncate false: such a file runs with
  truncate true (on the fixture, llama.cpp's logits are 0.073 of their range from transformers' for that alone).
- olmo2 with `attention.sliding_window` (OLMo 3, which the converter writes as olmo2): Petit's olmo3 family, see
  `_olmo2`; olmo (OLMo-1) and ernie4_5 (ERNIE 4.5's dense models): see `_olmo` and `_ernie4_5` (src/models/olmo.cpp,
  olmo2.cpp, ernie4-5.cpp).
- bitnet (BitNet b1.58): Petit's bitnet family as llama.cpp runs it, see `_bitnet` (src/models/bitnet.cpp).
"""
import numpy as np

from petit.loading.gguf_names import LLAMA_LAYER, OLMO2_LAYER, QKV, QWEN_EXPERTS, GGUFArch
from petit.loading.gguf_ssm import _per_layer

XIELU = ("alpha_p", "alpha_n", "beta", "eps")
ALSO_READ = {"olmo3"}       # read from olmo2 files with a sliding window (no arch of its own): not written


def _full_rotary(arch: str, cfg: dict, key) -> None:
    """llama.cpp's apertus and exaone4 rotate every value of a head (it asserts n_rot == the head size)."""
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size ({cfg['head_dim']}): "
                         f"llama.cpp's {arch} rotates whole heads")


def _apertus(meta, key, cfg, has):
    _full_rotary("apertus", cfg, key)
    cfg.setdefault("rope_scaling", None)           # no rope_freqs table: llama.cpp scales nothing
    cfg.update(attention_bias=has("blk.0.attn_q.bias"), xielu_bf16=False)
    for n in XIELU:                                # checked here, so a bad key fails before any weight is read
        _per_layer(meta, f"xielu.{n}", cfg["num_hidden_layers"])


def _xielu_tensors(meta, cfg, has) -> dict:
    """The xIELU parameters as the family's per-layer `mlp.act_fn.*` tensors of one value."""
    n = cfg["num_hidden_layers"]
    out = {}
    for name in XIELU:
        values = _per_layer(meta, f"xielu.{name}", n)
        for i, v in enumerate(values):
            out[f"model.layers.{i}.mlp.act_fn.{name}"] = np.array([v], np.float32)
    return out


def _sliding_layers(meta, key, cfg, period: int) -> None:
    """layer_types as llama.cpp's load_swa_pattern sets them: `attention.sliding_window_pattern` true / false per
    layer, or a period n (the last layer of every n full; 0: all sliding), else `period`."""
    n = cfg["num_hidden_layers"]
    pattern = meta.get(key("attention.sliding_window_pattern"), period)
    if isinstance(pattern, (np.ndarray, np.generic)):
        pattern = pattern.tolist()
    if isinstance(pattern, list):
        if len(pattern) != n or not all(isinstance(p, bool) for p in pattern):
            raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} is {pattern!r:.80}: it should "
                             f"hold true / false for each of the {n} layers")
        sliding = pattern
    elif isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 0:
        sliding = [pattern == 0 or i % pattern < pattern - 1 for i in range(n)]
    else:
        raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} is {pattern!r}: it should be a "
                         f"layer period or true / false for each layer")
    cfg["layer_types"] = ["sliding_attention" if s else "full_attention" for s in sliding]


def _exaone4(meta, key, cfg, has):
    _full_rotary("exaone4", cfg, key)
    if cfg["num_hidden_layers"] != 64:             # llama.cpp: local / global attention for the 32B model only
        cfg["sliding_window"] = None
        return
    cfg["sliding_window"] = int(meta.get(key("attention.sliding_window")) or 4096)
    _sliding_layers(meta, key, cfg, 4)


def _gpt_oss(meta, key, cfg, has):
    """gpt-oss: sliding and full layers (every other one, unless the pattern key says otherwise), the experts'
    width in expert_feed_forward_length; YaRN as llama.cpp computes it, its correction range rounded to whole
    dimensions (ggml_rope_yarn_corr_dims) where the releases' config has truncate false."""
    _full_rotary("gpt-oss", cfg, key)
    window = meta.get(key("attention.sliding_window"))
    if window is None:
        raise ValueError(f"metadata {key('attention.sliding_window')!r} is missing: llama.cpp's gpt-oss requires it")
    if meta.get(key("rope.freq_base_swa"), cfg["rope_theta"]) != cfg["rope_theta"]:
        raise ValueError(f"metadata {key('rope.freq_base_swa')!r} differs from {key('rope.freq_base')!r}: the "
                         f"gpt_oss family has one RoPE base")
    cfg.update(sliding_window=int(window), attention_bias=has("blk.0.attn_q.bias"),
               intermediate_size=int(meta.get(key("expert_feed_forward_length")) or cfg["intermediate_size"]))
    _sliding_layers(meta, key, cfg, 2)
    if (cfg.get("rope_scaling") or {}).get("rope_type") == "yarn":
        cfg["rope_scaling"]["truncate"] = True


def _chatglm(meta, key, cfg, has):
    cfg.setdefault("partial_rotary_factor", 1.0)   # no rope.dimension_count: llama.cpp rotates whole heads
    cfg["attention_bias"] = has("blk.0.attn_q.bias") or has("blk.0.attn_qkv.bias")


def _olmo2(meta, key, cfg, has):
    """OLMo 2, or OLMo 3 when the file has a sliding window (llama.cpp's converter writes both as olmo2). With a
    window above 0 llama.cpp runs sliding layers by `attention.sliding_window_pattern` (true / false per layer; else
    a period, else every 4th layer full), their RoPE without the file's scaling (no YaRN: frequency scale 1, no
    attention factor), the full layers' with it: Petit's olmo3 family, which transformers' Olmo 3 matches. The
    graph rotates every layer with `rope.freq_base`; a different `rope.freq_base_swa`, which llama.cpp reads but
    does not use, is ignored as it ignores it."""
    window = meta.get(key("attention.sliding_window"))
    if window is not None and (isinstance(window, (bool, str)) or not isinstance(window, (int, np.integer))):
        raise ValueError(f"metadata {key('attention.sliding_window')!r} is {window!r}: it should be a number")
    if window is None or int(window) <= 0:       # OLMo 2: no window
        return
    cfg.update(model_type="olmo3", sliding_window=int(window))
    _sliding_layers(meta, key, cfg, 4)


def _no_bias(arch: str, has, names: tuple, why: str) -> None:
    for n in names:
        if has(f"blk.0.{n}.bias"):
            raise ValueError(f"tensor 'blk.0.{n}.bias' is not run by Petit's {arch} reader: {why}")


def _olmo(meta, key, cfg, has):
    """OLMo-1: LayerNorms without weights, q / k permuted for adjacent-pair RoPE (as for Llama), q, k and v clamped
    to +-`attention.clamp_kqv` when set. llama.cpp's olmo reads no o_proj bias (a file with one is refused: wrong
    number of tensors), so a file has no attention bias Petit's olmo family could run (its attention_bias is q, k,
    v and o together; the released OLMo-1 models have none): q / k / v biases are refused by name. The norms' eps is
    the family's fixed 1e-5 (OlmoLayerNorm's), which the converter writes: another value is refused."""
    _full_rotary("olmo", cfg, key)
    _no_bias("olmo", has, ("attn_q", "attn_k", "attn_v", "attn_output"),
             "llama.cpp's olmo has no o_proj bias, and the olmo family biases q, k, v and o together")
    eps = meta.get(key("attention.layer_norm_epsilon"), 1e-5)
    if not isinstance(eps, (float, np.floating)) or np.float32(eps) != np.float32(1e-5):
        shown = f"{float(eps):g}" if isinstance(eps, (float, np.floating)) else repr(eps)
        raise ValueError(f"metadata {key('attention.layer_norm_epsilon')!r} is {shown}: the olmo family's "
                         f"LayerNorm eps is fixed at 1e-5, where llama.cpp's olmo would take this one")
    clip = meta.get(key("attention.clamp_kqv"))
    cfg["clip_qkv"] = float(clip) if clip else None
    cfg["attention_bias"] = False


def _ernie4_5(meta, key, cfg, has):
    """ERNIE 4.5 (dense): RoPE on adjacent pairs, unpermuted (the converter keeps the checkpoint's rows, which the
    family already rotates in pairs (2i, 2i+1)). llama.cpp's ernie4_5 has no MLP biases (it refuses a file holding
    them) and reads an o_proj bias without adding it: the family's one `use_bias` switch (q, k, v, o and the MLP's)
    cannot be what llama.cpp runs on any biased file, so a bias is refused by name; the released dense models
    (ERNIE-4.5-0.3B) have none."""
    _full_rotary("ernie4_5", cfg, key)
    _no_bias("ernie4_5", has, ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"),
             "llama.cpp's ernie4_5 has no MLP biases and does not add o_proj's")
    cfg["use_bias"] = False


BITNET_PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def _bitnet(meta, key, cfg, has):
    """BitNet b1.58 as llama.cpp's bitnet runs it: Llama's block with RMS sub-norms on o_proj's input
    (`attn_sub_norm`) and down_proj's (`ffn_sub_norm`), RoPE on half-split pairs (unpermuted), tied embeddings, and
    an MLP of silu(gate) * up whatever the checkpoint's hidden_act was (llama.cpp's graph has no relu²). The
    converter ternarizes each projection (t / s, BitNet's absmean rule) and stores it in the file's type; llama.cpp
    multiplies those weights as stored with unquantized activations (no int8 step), which is what
    `activation_quant` off runs. A projection's optional `.scale` tensor (not written by the converter) would
    multiply its output in llama.cpp; Petit does not read one and names it instead of running without it."""
    _full_rotary("bitnet", cfg, key)
    for n in BITNET_PROJECTIONS:
        if has(f"blk.0.{n}.scale"):
            raise ValueError(f"tensor 'blk.0.{n}.scale' is not run by Petit's bitnet reader: llama.cpp multiplies "
                             "the projection's output by it, and llama.cpp's converter writes none")
    cfg.update(hidden_act="silu", activation_quant=False, attention_bias=False)


VARIANT_ARCHS = {
    # Apertus's norms are attention_layernorm / feedforward_layernorm; its MLP has no gate
    "apertus": GGUFArch("apertus", dict(LLAMA_LAYER, attn_norm="attention_layernorm",
                                        ffn_norm="feedforward_layernorm"),
                        meta_tensors=_xielu_tensors, extra=_apertus),
    # EXAONE 4.0: OLMo 2's post-norms only
    "exaone4": GGUFArch("exaone4", OLMO2_LAYER, extra=_exaone4),
    "chatglm": GGUFArch("glm", LLAMA_LAYER, splits={"attn_qkv": QKV, "ffn_up": (("mlp.gate_proj", "ff"),
                                                                                ("mlp.up_proj", "ff"))},
                        extra=_chatglm),
    # gpt-oss: attention sinks (stored as attn_sinks.weight), the router and experts with biases
    "gpt-oss": GGUFArch("gpt_oss", dict(LLAMA_LAYER, post_attention_norm="post_attention_layernorm",
                                        ffn_gate_inp="mlp.router"),
                        whole_names={"attn_sinks.weight": "self_attn.sinks"}, experts=QWEN_EXPERTS,
                        expert_key="num_local_experts", extra=_gpt_oss),
    # OLMo 2 and (with a sliding window) OLMo 3: post-norms only
    "olmo2": GGUFArch("olmo2", OLMO2_LAYER, extra=_olmo2),
    # OLMo-1: no norm weights at all (the LayerNorms have none), q / k permuted as for Llama
    "olmo": GGUFArch("olmo", LLAMA_LAYER, rope_pairs=True, extra=_olmo),
    "ernie4_5": GGUFArch("ernie4_5", LLAMA_LAYER, extra=_ernie4_5),
    # BitNet b1.58: sub-norms before o_proj and down_proj
    "bitnet": GGUFArch("bitnet", dict(LLAMA_LAYER, attn_sub_norm="self_attn.attn_sub_norm",
                                      ffn_sub_norm="mlp.ffn_sub_norm"), extra=_bitnet),
}
