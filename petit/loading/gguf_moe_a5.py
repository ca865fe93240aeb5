"""GGUF files of the moe_a group of issue 30 (llama.cpp's qwen35 and qwen35moe: Qwen3.5 / 3.6, dense and with
experts): their metadata keys as the Petit family's Hugging Face config (`qwen3_5_text`, `qwen3_5_moe_text`), their
tensor names as its Hugging Face names. Imported by gguf_archs, whose ARCHS these join.

What llama.cpp's converter (conversion/qwen.py: Qwen3_5TextModel, Qwen3_5MoeTextModel over Qwen3NextModel) does,
undone as the tensors are read:

- the zero-centred RMSNorms are stored as 1 + w (norm_shift), not the linear attention's gated norm (`ssm_norm`);
  A as -exp(A_log); the conv weight squeezed to [channels, kernel];
- full attention's `q_proj` ([q_h | gate_h] per head) is `attn_q` as it is: split per head into the queries and
  their output gates (as qwen3next's files); a file converted with `--fuse-qkv` holds it with k and v in one
  `attn_qkv` (rows q | k | v), and one with `--fuse-gate-up-exps` each expert's gate and up rows in one
  `ffn_gate_up_exps`: both read by row ranges;
- the linear attention's projections are `attn_qkv` (q | k | v), `attn_gate` (z), `ssm_beta` (b), `ssm_alpha` (a),
  joined by rows into the family's one `linear_attn.in_proj` (q | k | v | z | b | a);
- the value heads are REORDERED from Hugging Face's grouped order (value head h uses key head h // r, r = value heads
  / key heads) to a tiled one (the file's value head p = j * Hk + g is Hugging Face's head g * r + j, paired with key
  head g = p % Hk, which ggml broadcasts cheaply): the rows of v, z, b and a, the V channels of the conv, A, dt_bias
  and the columns of `ssm_out` are put back in grouped order (rows by row ranges, no copy; the conv, A, dt_bias and
  ssm_out permuted when read, so a quantized ssm_out is requantized);
- the MRoPE sections (`rope.dimension_sections`) are read and ignored: for text every section's position is the
  token's, so it is the plain partial RoPE (`rope.dimension_count` of head_dim) on halves;
- experts (`ffn_{gate,up,down}_exps`, the router `ffn_gate_inp`, the shared expert `ffn_*_shexp` behind
  `ffn_gate_inp_shexp`): llama.cpp renormalises the chosen weights, as transformers' Qwen3.5-MoE always does.
The multi-token-prediction layers of a released file (`nextn_predict_layers`) are not run (as for qwen3next).

llama.cpp's dots1 (dots.llm1; converter conversion/dots1.py, graph src/models/dots1.cpp): Qwen3's attention without
key / value grouping or sliding windows (the graph has neither), DeepSeek-V3's routing as the file's keys say it:
`expert_gating_func` (sigmoid: transformers' Dots1 router has no other), the choice on the scores plus
`exp_probs_b` (a zero bias where a layer has none, as llama.cpp then computes) within `expert_group_used_count` of
`expert_group_count` groups, `expert_weights_norm`, `expert_weights_scale`, `expert_shared_count` shared experts as
one MLP, dense layers below `leading_dense_block_count`.

llama.cpp's cohere2moe (Cohere 2 MoE; converter conversion/command_r.py, graph src/models/cohere2moe.cpp): Cohere 2's
parallel block, its norm a bias-free LayerNorm (`attention.layer_norm_epsilon`) or an RMSNorm
(`attention.layer_norm_rms_epsilon`), sliding layers from `attention.sliding_window_pattern` (one bool a layer), RoPE
in those and in every dense layer below `leading_dense_block_count` (llama.cpp forces it there: transformers'
`prefix_dense_sliding_window_pattern` 1), the experts weighed by `expert_gating_func` (softmax, or llama.cpp's
default sigmoid without the key) and `expert_weights_norm`, the shared experts always averaged in (the converter
refuses "sum"); their zero gate (sigmoid 0 = 0.5, the family's spelling of that average) is not a tensor of the file.
"""
import numpy as np

from petit.loading.gguf_names import LLAMA_LAYER, QWEN_EXPERTS, QWEN_MOE_LAYER, GGUFArch
from petit.loading.gguf_ssm import CONV, Fix, _a_log, _num


def _dims(cfg) -> tuple[int, int, int, int]:
    Hk, Hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    return Hk, Hv // Hk, cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]


def _file_head(h: int, Hk: int, r: int) -> int:
    """Where the file holds Hugging Face's value head h."""
    g, j = divmod(h, r)
    return j * Hk + g


def _grouped(Hk: int, r: int, width: int) -> np.ndarray:
    """The file's index of each of Hugging Face's value-head channels (`width` per head), in Hugging Face's order."""
    return np.concatenate([np.arange(width) + _file_head(h, Hk, r) * width for h in range(Hk * r)])


def _cfg_fixes(cfg) -> dict:
    Hk, r, dk, dv = _dims(cfg)
    if r == 1:
        return {}
    qk = 2 * Hk * dk
    heads, channels = _grouped(Hk, r, 1), _grouped(Hk, r, dv)

    def conv(w):
        return np.concatenate([w[:qk], w[qk:][channels]])

    return {"ssm_a": Fix(values=lambda a: _a_log(a)[heads]), "ssm_dt.bias": Fix(values=lambda b: b[heads]),
            "ssm_conv1d.weight": Fix(shape=CONV.shape, values=conv),
            "ssm_out.weight": Fix(values=lambda w: np.ascontiguousarray(w[:, channels]))}


def _joins(tensors, cfg) -> dict:
    """The linear attention's in_proj (rows q | k | v | z | b | a, value heads in Hugging Face's order) and the full
    attention's queries and output gates, which attn_q interleaves per head."""
    Hk, r, dk, dv = _dims(cfg)
    Hv = Hk * r
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    KV = cfg.get("num_key_value_heads") or H
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        names = [b + n + ".weight" for n in ("attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha")]
        if all(n in tensors for n in names):
            qkv, z, beta, alpha = names
            qk = 2 * Hk * dk
            at = [_file_head(h, Hk, r) for h in range(Hv)]
            out[p + "linear_attn.in_proj.weight"] = (
                [(qkv, (0, qk))] + [(qkv, (qk + f * dv, qk + (f + 1) * dv)) for f in at]
                + [(z, (f * dv, (f + 1) * dv)) for f in at] + [(beta, (f, f + 1)) for f in at]
                + [(alpha, (f, f + 1)) for f in at])
        q, qname = tensors.get(b + "attn_q.weight"), b + "attn_q.weight"
        fused = tensors.get(b + "attn_qkv.weight") if b + "attn_gate.weight" not in tensors else None
        if q is None and fused is not None and fused.shape[0] == 2 * H * hd + 2 * KV * hd:
            q, qname = fused, b + "attn_qkv.weight"     # --fuse-qkv: [q | gate per head] | k | v in one matrix
            out[p + "self_attn.k_proj.weight"] = [(qname, (2 * H * hd, 2 * H * hd + KV * hd))]
            out[p + "self_attn.v_proj.weight"] = [(qname, (2 * H * hd + KV * hd, 2 * H * hd + 2 * KV * hd))]
        if q is not None and q.shape[0] >= 2 * H * hd:
            for name, at0 in (("q_proj", 0), ("q_gate", hd)):
                out[f"{p}self_attn.{name}.weight"] = [(qname, (2 * hd * h + at0, 2 * hd * h + at0 + hd))
                                                      for h in range(H)]
        gu = tensors.get(b + "ffn_gate_up_exps.weight")     # --fuse-gate-up-exps: each expert's gate rows, then up
        if gu is not None and len(gu.shape) == 3 and gu.shape[1] % 2 == 0:
            F2 = gu.shape[1]
            for e in range(gu.shape[0]):
                for name, at0 in (("gate_proj", 0), ("up_proj", F2 // 2)):
                    out[f"{p}mlp.experts.{e}.{name}.weight"] = [(b + "ffn_gate_up_exps.weight",
                                                                 (e * F2 + at0, e * F2 + at0 + F2 // 2))]
    return out


def _qwen35(meta, key, cfg, has):
    """The hybrid's layout: Gated DeltaNet in the `attention.recurrent_layers`, gated attention in the others."""
    n = cfg["num_hidden_layers"]
    rec = meta.get(key("attention.recurrent_layers"))
    rec = rec.tolist() if isinstance(rec, np.ndarray) else rec
    if not (isinstance(rec, list) and len(rec) == n):
        raise ValueError(f"metadata {key('attention.recurrent_layers')!r} is "
                         f"{'missing' if rec is None else repr(rec)[:80]}: it should hold true / false for each of "
                         f"the {n} layers")
    s = {x: _num(meta, key(f"ssm.{x}")) for x in ("inner_size", "state_size", "conv_kernel", "time_step_rank")}
    cfg.update(layer_types=["linear_attention" if x else "full_attention" for x in rec],
               linear_conv_kernel_dim=s["conv_kernel"], linear_key_head_dim=s["state_size"],
               linear_num_key_heads=_num(meta, key("ssm.group_count")), linear_num_value_heads=s["time_step_rank"],
               linear_value_head_dim=s["inner_size"] // s["time_step_rank"])
    if cfg["linear_num_value_heads"] % cfg["linear_num_key_heads"]:
        raise ValueError(f"{cfg['linear_num_value_heads']} value heads are not a multiple of "
                         f"{cfg['linear_num_key_heads']} key heads")


def _qwen35moe(meta, key, cfg, has):
    _qwen35(meta, key, cfg, has)
    n = cfg["num_hidden_layers"]
    if not all(has(f"blk.{i}.ffn_gate_inp.weight") for i in range(n)):
        raise ValueError("a qwen35moe file routes in every layer (Qwen3.5-MoE); this one has layers without a router "
                         "(ffn_gate_inp)")
    cfg.pop("intermediate_size", None)          # the class has no dense width: every layer routes
    cfg.update(moe_intermediate_size=_num(meta, key("expert_feed_forward_length")),
               shared_expert_intermediate_size=_num(meta, key("expert_shared_feed_forward_length")))


def _dots1(meta, key, cfg, has):
    gating = meta.get(key("expert_gating_func"))
    if gating != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating!r}: dots1 routes on sigmoid scores (2); "
                         f"llama.cpp computes no scores without the key")

    def get(k, default):
        v = meta.get(key(k))
        return default if v is None else (v.item() if hasattr(v, "item") else v)
    cfg.update(moe_intermediate_size=_num(meta, key("expert_feed_forward_length")),
               n_shared_experts=int(get("expert_shared_count", 0)),
               routed_scaling_factor=float(get("expert_weights_scale", 1.0)),
               norm_topk_prob=bool(get("expert_weights_norm", False)),
               first_k_dense_replace=int(get("leading_dense_block_count", 0)),
               n_group=int(get("expert_group_count", 1)) or 1, topk_group=int(get("expert_group_used_count", 1)) or 1,
               sliding_window=None)


def _dots1_bias(meta, cfg, has) -> dict:
    """A zero selection bias for each expert layer whose file has none (llama.cpp then adds nothing)."""
    E, first = cfg["n_routed_experts"], cfg.get("first_k_dense_replace", 0)
    return {f"model.layers.{i}.mlp.gate.e_score_correction_bias": np.zeros(E, np.float32)
            for i in range(first, cfg["num_hidden_layers"]) if not has(f"blk.{i}.exp_probs_b.bias")}


def _cohere2moe(meta, key, cfg, has):
    n = cfg["num_hidden_layers"]
    rms = meta.get(key("attention.layer_norm_rms_epsilon"))
    cfg.pop("rms_norm_eps", None)
    if rms is not None:
        cfg["rms_norm_eps"] = float(rms)
    else:
        cfg["layer_norm_eps"] = float(meta.get(key("attention.layer_norm_epsilon"), 1e-5))
    pattern = meta.get(key("attention.sliding_window_pattern"))
    pattern = pattern.tolist() if isinstance(pattern, np.ndarray) else pattern
    if not (isinstance(pattern, list) and len(pattern) == n):
        raise ValueError(f"metadata {key('attention.sliding_window_pattern')!r} is {pattern!r}: it should hold true / "
                         f"false for each of the {n} layers")
    gating = meta.get(key("expert_gating_func"), 2)               # llama.cpp: sigmoid without the key
    if gating not in (1, 2):
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating!r}: cohere2_moe weighs its experts by "
                         f"softmax (1) or sigmoid (2)")
    scale = float(meta.get(key("expert_weights_scale"), 1.0) or 1.0)
    if scale != 1.0:
        raise ValueError(f"metadata {key('expert_weights_scale')!r} is {scale}: Cohere 2 MoE has no routed scale")
    k = int(meta.get(key("leading_dense_block_count"), 0))
    cfg.update(prefix_dense_intermediate_size=cfg["intermediate_size"],
               intermediate_size=_num(meta, key("expert_feed_forward_length")),
               logit_scale=float(meta.get(key("logit_scale"), 1.0)),
               sliding_window=int(meta[key("attention.sliding_window")]),
               layer_types=["sliding_attention" if x else "full_attention" for x in pattern],
               mlp_layer_types=["dense" if i < k else "sparse" for i in range(n)],
               prefix_dense_sliding_window_pattern=1, expert_selection_fn="softmax" if gating == 1 else "sigmoid",
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               num_shared_experts=int(meta.get(key("expert_shared_count"), 0)),
               shared_expert_combination_strategy="average", attention_bias=has("blk.0.attn_q.bias"))


def _cohere2moe_gates(meta, cfg, has) -> dict:
    """The zero gate of the averaged shared experts (sigmoid 0 = 0.5) in each expert layer."""
    if not cfg.get("num_shared_experts"):
        return {}
    return {f"model.layers.{i}.mlp.shared_experts_gate.weight": np.zeros((1, cfg["hidden_size"]), np.float32)
            for i, t in enumerate(cfg["mlp_layer_types"]) if t == "sparse"}


LAYER = dict(post_attention_norm="post_attention_layernorm", ssm_out="linear_attn.out_proj",
             ssm_norm="linear_attn.norm", ssm_conv1d="linear_attn.conv1d")
WHOLE = {"ssm_a": "linear_attn.A_log", "ssm_dt.bias": "linear_attn.dt_bias"}
FIXES = {"ssm_a": Fix(values=_a_log), "ssm_conv1d.weight": CONV, "ssm_norm.weight": Fix(shift=False)}
MOE_A5_ARCHS = {
    "qwen35": GGUFArch("qwen3_5_text", dict(LLAMA_LAYER, **LAYER), whole_names=WHOLE, norm_shift=1.0, joins=_joins,
                       fixes=FIXES, cfg_fixes=_cfg_fixes, extra=_qwen35),
    "qwen35moe": GGUFArch("qwen3_5_moe_text", dict(QWEN_MOE_LAYER, **LAYER), whole_names=WHOLE,
                          experts=QWEN_EXPERTS, norm_shift=1.0, joins=_joins, fixes=FIXES, cfg_fixes=_cfg_fixes,
                          extra=_qwen35moe),
    "dots1": GGUFArch("dots1", dict(QWEN_MOE_LAYER, ffn_gate_shexp="mlp.shared_experts.gate_proj",
                                    ffn_up_shexp="mlp.shared_experts.up_proj",
                                    ffn_down_shexp="mlp.shared_experts.down_proj"),
                      whole_names={"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"}, experts=QWEN_EXPERTS,
                      expert_key="n_routed_experts", meta_tensors=_dots1_bias, extra=_dots1),
    "cohere2moe": GGUFArch("cohere2_moe", dict(QWEN_MOE_LAYER, ffn_gate_shexp="mlp.shared_experts.gate_proj",
                                               ffn_up_shexp="mlp.shared_experts.up_proj",
                                               ffn_down_shexp="mlp.shared_experts.down_proj"),
                           experts=QWEN_EXPERTS, meta_tensors=_cohere2moe_gates, extra=_cohere2moe),
}
