"""GGUF files of the state-space and hybrid architectures (llama.cpp's mamba, mamba2, lfm2, granitehybrid, jamba,
falcon-h1, nemotron_h, qwen3next):
their metadata keys (`ssm.inner_size`, `ssm.state_size`, `ssm.conv_kernel`, `ssm.time_step_rank`, `ssm.group_count`,
`shortconv.l_cache`, a hybrid's per-layer `attention.head_count_kv`, whose zeros are its recurrent layers) as the
family's Hugging Face config, their tensor names as its Hugging Face names. Imported by gguf_archs, whose ARCHS these
join.

What llama.cpp's converter changed is undone as the tensors are read (GGUFArch.fixes): A is stored as -exp(A_log)
(read back as A_log = log(-A)); conv weights [channels, 1, kernel] are squeezed to [channels, kernel]; Mamba-2's A,
D ([heads, 1]) and gated-norm weight ([groups, channels / groups]) get their Hugging Face shapes back; Qwen3-Next's
matrices stored in pieces are joined by rows (GGUFArch.joins: a copy).

What the files leave out runs as llama.cpp runs it: Mamba-2's gated norm is taken per group of channels (as mamba_ssm
and llama.cpp compute it; transformers' Mamba2 and GraniteMoeHybrid norm over all channels, which differs when
n_groups > 1), Falcon-Mamba's weightless dt / B / C norms use the layer norms' epsilon (llama.cpp has no key for
mixer_rms_eps).
"""
from dataclasses import dataclass

import numpy as np

from petit.loading.gguf_names import (GRANITE_EXPERTS, GRANITE_MOE_LAYER, LLAMA_LAYER, QWEN_EXPERTS, QWEN_MOE_LAYER,
                                      GGUFArch, _granite)


@dataclass(frozen=True)
class Fix:
    """How a stored tensor becomes the Hugging Face one: `shape(stored shape)` and `values(float32 array)`."""
    shape: object = None
    values: object = None
    shift: bool = True          # a norm weight takes the architecture's norm_shift (False: stored as is)


def _a_log(a: np.ndarray) -> np.ndarray:
    if not (np.isfinite(a).all() and (a < 0).all()):
        raise ValueError("Mamba's A must be negative and finite (llama.cpp stores it as -exp(A_log))")
    return np.log(-a.astype(np.float64)).astype(np.float32)


CONV = Fix(shape=lambda s: (s[0], 1, s[-1]))                   # [channels, kernel] -> [channels, 1, kernel]
FLAT = Fix(shape=lambda s: (int(np.prod(s)),))
MAMBA1_FIXES = {"ssm_a": Fix(values=_a_log), "ssm_conv1d.weight": CONV}
MAMBA2_FIXES = {"ssm_a": Fix(shape=FLAT.shape, values=_a_log), "ssm_d": FLAT, "ssm_norm.weight": FLAT,
                "ssm_conv1d.weight": CONV}


def _mixer_names(m: str, version: int) -> tuple[dict, dict]:
    """A Mamba mixer's tensors under the prefix `m` ("mixer.", "mamba."): (layer names, whole names)."""
    names = {"ssm_in": m + "in_proj", "ssm_conv1d": m + "conv1d", "ssm_out": m + "out_proj"}
    whole = {"ssm_a": m + "A_log", "ssm_d": m + "D"}
    if version == 1:
        names.update(ssm_x=m + "x_proj", ssm_dt=m + "dt_proj", ssm_dt_norm=m + "dt_layernorm",
                     ssm_b_norm=m + "b_layernorm", ssm_c_norm=m + "c_layernorm")
    else:
        names["ssm_norm"] = m + "norm"
        whole["ssm_dt.bias"] = m + "dt_bias"
    return names, whole


def _num(meta: dict, k: str, kind=int):
    v = meta.get(k)
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    if v is None or isinstance(v, (bool, str)) or not isinstance(v, (int, float)):
        raise ValueError(f"metadata {k!r} is {'missing' if v is None else repr(v)}: it should be a number")
    return kind(v)


def _per_layer(meta: dict, k: str, n: int) -> list:
    """A key holding one number per layer (or one for all)."""
    v = meta.get(k)
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = [v] * n
    if not (isinstance(v, list) and len(v) == n and all(isinstance(x, (int, float)) for x in v)):
        raise ValueError(f"metadata {k!r} is {'missing' if v is None else repr(v)[:80]}: it should hold one number "
                         f"for each of the {n} layers")
    return v


def _ssm(meta, key, cfg) -> dict:
    """The mixer's sizes every state-space architecture writes."""
    s = {n: _num(meta, key(f"ssm.{n}")) for n in ("inner_size", "state_size", "conv_kernel", "time_step_rank")}
    if s["inner_size"] % cfg["hidden_size"]:
        raise ValueError(f"metadata {key('ssm.inner_size')!r} ({s['inner_size']}) is not a multiple of "
                         f"{key('embedding_length')!r} ({cfg['hidden_size']}), which Petit's families require")
    s["expand"] = s["inner_size"] // cfg["hidden_size"]
    return s


def _base(cfg: dict, model_type: str) -> dict:
    return {"model_type": model_type, **{k: cfg[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                                            "tie_word_embeddings", "max_position_embeddings")}}


def _eps(meta, key) -> float:
    return float(meta.get(key("attention.layer_norm_rms_epsilon"), 1e-5))


def _mamba(meta, key, cfg, has):
    """Mamba-1; with `ssm.dt_b_c_rms`, Falcon-Mamba (its dt / B / C norms with llama.cpp's epsilon: the layers')."""
    s, eps = _ssm(meta, key, cfg), _eps(meta, key)
    new = dict(_base(cfg, "mamba"), intermediate_size=s["inner_size"], state_size=s["state_size"],
               conv_kernel=s["conv_kernel"], time_step_rank=s["time_step_rank"], layer_norm_epsilon=eps,
               use_conv_bias=has("blk.0.ssm_conv1d.bias"))
    if meta.get(key("ssm.dt_b_c_rms")):
        new.update(model_type="falcon_mamba", mixer_rms_eps=eps)
    cfg.clear()
    cfg.update(new)


def _mamba2(meta, key, cfg, has):
    s = _ssm(meta, key, cfg)
    heads = s["time_step_rank"]                    # llama.cpp's Mamba-2 keeps its head count there
    if s["inner_size"] % heads:
        raise ValueError(f"metadata {key('ssm.inner_size')!r} ({s['inner_size']}) is not a multiple of "
                         f"{key('ssm.time_step_rank')!r} (the heads, {heads})")
    new = dict(_base(cfg, "mamba2"), num_heads=heads, head_dim=s["inner_size"] // heads, state_size=s["state_size"],
               n_groups=_num(meta, key("ssm.group_count")), expand=s["expand"], conv_kernel=s["conv_kernel"],
               layer_norm_epsilon=_eps(meta, key), use_conv_bias=has("blk.0.ssm_conv1d.bias"), norm_per_group=True)
    cfg.clear()
    cfg.update(new)


def _lfm2(meta, key, cfg, has):
    kv = _per_layer(meta, key("attention.head_count_kv"), cfg["num_hidden_layers"])
    cfg.update(layer_types=["full_attention" if h else "conv" for h in kv], norm_eps=cfg.pop("rms_norm_eps", 1e-5),
               conv_L_cache=_num(meta, key("shortconv.l_cache")), block_auto_adjust_ff_dim=False)


def _granitehybrid(meta, key, cfg, has):
    """Granite 4.0-H: Mamba-2 where a layer has no key / value heads; RoPE only when `rope.scaling.finetuned` (the
    converter's switch for it: the releases have none)."""
    n = cfg["num_hidden_layers"]
    kv = _per_layer(meta, key("attention.head_count_kv"), n)
    attn = [i for i in range(n) if kv[i]]
    _granite(meta, key, cfg, lambda name: has(name.replace("blk.0.", f"blk.{attn[0] if attn else 0}.")))
    s = _ssm(meta, key, cfg)
    mamba = next((i for i in range(n) if not kv[i]), 0)
    rope = bool(meta.get(key("rope.scaling.finetuned")))
    cfg.update(layer_types=["attention" if h else "mamba" for h in kv], mamba_n_heads=s["time_step_rank"],
               mamba_n_groups=_num(meta, key("ssm.group_count")), mamba_d_state=s["state_size"],
               mamba_d_conv=s["conv_kernel"], mamba_expand=s["expand"],
               mamba_d_head=s["inner_size"] // s["time_step_rank"],
               mamba_conv_bias=has(f"blk.{mamba}.ssm_conv1d.bias"), mamba_norm_per_group=True,
               shared_intermediate_size=int(meta.get(key("expert_shared_feed_forward_length"), 0)),
               position_embedding_type="rope" if rope else "nope")
    if rope:
        cfg["rope_interleaved"] = True             # the converter permuted q / k as for Granite
    else:
        cfg.pop("partial_rotary_factor", None)


def _falcon_h1(meta, key, cfg, has):
    """Falcon-H1: attention and Mamba-2 side by side in every layer; llama.cpp gates before its (group-wise) norm."""
    s = _ssm(meta, key, cfg)
    cfg.update(mamba_d_ssm=s["inner_size"], mamba_n_heads=s["time_step_rank"],
               mamba_n_groups=_num(meta, key("ssm.group_count")), mamba_d_state=s["state_size"],
               mamba_d_conv=s["conv_kernel"], mamba_expand=s["expand"], mamba_conv_bias=has("blk.0.ssm_conv1d.bias"),
               mamba_rms_norm=has("blk.0.ssm_norm.weight"), mamba_norm_before_gate=False)


def _nemotron_h(meta, key, cfg, has):
    """Nemotron-H: a block is attention where it has key / value heads, an MLP where it has a width, else Mamba-2."""
    n = cfg["num_hidden_layers"]
    kv = _per_layer(meta, key("attention.head_count_kv"), n)
    ff = _per_layer(meta, key("feed_forward_length"), n)
    s = _ssm(meta, key, cfg)
    mamba = next((i for i in range(n) if not kv[i] and not ff[i]), 0)
    new = dict(_base(cfg, "nemotron_h"), hybrid_override_pattern="".join(
        "*" if kv[i] else "-" if ff[i] else "M" for i in range(n)), num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=max(kv) or cfg["num_attention_heads"], head_dim=cfg["head_dim"],
        intermediate_size=max(ff) or 1, mamba_num_heads=s["time_step_rank"],
        mamba_head_dim=s["inner_size"] // s["time_step_rank"], ssm_state_size=s["state_size"],
        n_groups=_num(meta, key("ssm.group_count")), conv_kernel=s["conv_kernel"],
        use_conv_bias=has(f"blk.{mamba}.ssm_conv1d.bias"),
        layer_norm_epsilon=float(meta.get(key("attention.layer_norm_epsilon"), 1e-5)))
    cfg.clear()
    cfg.update(new)


def _qwen3next(meta, key, cfg, has):
    """Qwen3-Next: Gated DeltaNet in the `attention.recurrent_layers`, gated attention in the others; experts in
    the layers with a router (llama.cpp renormalises the chosen experts' weights)."""
    n = cfg["num_hidden_layers"]
    rec = meta.get(key("attention.recurrent_layers"))
    rec = rec.tolist() if isinstance(rec, np.ndarray) else rec
    if not (isinstance(rec, list) and len(rec) == n):
        raise ValueError(f"metadata {key('attention.recurrent_layers')!r} is "
                         f"{'missing' if rec is None else repr(rec)[:80]}: it should hold true / false for each of "
                         f"the {n} layers")
    s = _ssm(meta, key, cfg)
    heads = _num(meta, key("ssm.group_count"))
    cfg.update(layer_types=["linear_attention" if r else "full_attention" for r in rec],
               linear_conv_kernel_dim=s["conv_kernel"], linear_key_head_dim=s["state_size"],
               linear_num_key_heads=heads, linear_num_value_heads=s["time_step_rank"],
               linear_value_head_dim=s["inner_size"] // s["time_step_rank"],
               moe_intermediate_size=_num(meta, key("expert_feed_forward_length")),
               shared_expert_intermediate_size=_num(meta, key("expert_shared_feed_forward_length")),
               mlp_only_layers=[i for i in range(n) if not has(f"blk.{i}.ffn_gate_inp.weight")], norm_topk_prob=True)


def _qwen3next_joins(tensors, cfg) -> dict:
    """The matrices Qwen3-Next's family reads that llama.cpp stores in pieces: the linear attention's in_proj (rows
    q | k | v | z | b | a) from attn_qkv (q | k | v), attn_gate (z) and ssm_ba (per key head [b (r) | a (r)]), and
    the full attention's queries and their gates, which attn_q interleaves per head."""
    Hk = cfg["linear_num_key_heads"]
    r = cfg["linear_num_value_heads"] // Hk
    H, hd = cfg["num_attention_heads"], cfg["head_dim"]
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        qkv, z, ba = (tensors.get(f"{b}{n}.weight") for n in ("attn_qkv", "attn_gate", "ssm_ba"))
        if qkv is not None and z is not None and ba is not None and ba.shape[0] == 2 * r * Hk:
            out[p + "linear_attn.in_proj.weight"] = (
                [(b + "attn_qkv.weight", (0, qkv.shape[0])), (b + "attn_gate.weight", (0, z.shape[0]))]
                + [(b + "ssm_ba.weight", (2 * r * g, 2 * r * g + r)) for g in range(Hk)]
                + [(b + "ssm_ba.weight", (2 * r * g + r, 2 * r * (g + 1))) for g in range(Hk)])
        q = tensors.get(b + "attn_q.weight")
        if q is not None and q.shape[0] == 2 * H * hd:
            for name, at in (("q_proj", 0), ("q_gate", hd)):
                out[f"{p}self_attn.{name}.weight"] = [(b + "attn_q.weight", (2 * hd * h + at, 2 * hd * h + at + hd))
                                                      for h in range(H)]
    return out


def _period(layers: list, n: int, what: str) -> tuple[int, int]:
    """(period, offset) with layers = [i < n with i % period == offset] (Jamba's config has no list of them)."""
    if not layers:
        return n + 1, n
    for p in range(1, n + 1):
        for o in range(p):
            if [i for i in range(n) if i % p == o] == layers:
                return p, o
    raise ValueError(f"the {what} layers {layers} are not every p-th layer from an offset, which Petit's jamba family "
                     f"requires")


def _jamba(meta, key, cfg, has):
    n = cfg["num_hidden_layers"]
    kv = _per_layer(meta, key("attention.head_count_kv"), n)
    s = _ssm(meta, key, cfg)
    ap, ao = _period([i for i in range(n) if kv[i]], n, "attention")
    ep, eo = _period([i for i in range(n) if has(f"blk.{i}.ffn_gate_inp.weight")], n, "mixture-of-experts")
    mamba = next((i for i in range(n) if not kv[i]), 0)
    cfg.update(attn_layer_period=ap, attn_layer_offset=ao, expert_layer_period=ep, expert_layer_offset=eo,
               mamba_d_state=s["state_size"], mamba_d_conv=s["conv_kernel"], mamba_expand=s["expand"],
               mamba_dt_rank=s["time_step_rank"], mamba_conv_bias=has(f"blk.{mamba}.ssm_conv1d.bias"))
    cfg.pop("partial_rotary_factor", None)
    cfg.pop("rope_theta", None)


MAMBA_GLOBAL = {"token_embd": "backbone.embeddings", "output_norm": "backbone.norm_f", "output": "lm_head"}
M1, M1_WHOLE = _mixer_names("mixer.", 1)
M2, M2_WHOLE = _mixer_names("mixer.", 2)
J, J_WHOLE = _mixer_names("mamba.", 1)
G, G_WHOLE = _mixer_names("mamba.", 2)
HYBRID = ("attention.head_count_kv",)
SSM_ARCHS = {
    "mamba": GGUFArch("mamba", dict(M1, attn_norm="norm"), MAMBA_GLOBAL, prefix="backbone.layers.{}.",
                      fixes=MAMBA1_FIXES, whole_names=M1_WHOLE, extra=_mamba),
    "mamba2": GGUFArch("mamba2", dict(M2, attn_norm="norm"), MAMBA_GLOBAL, prefix="backbone.layers.{}.",
                       fixes=MAMBA2_FIXES, whole_names=M2_WHOLE, extra=_mamba2),
    # LFM2's final norm is HF's embedding_norm, which llama.cpp names token_embd_norm
    "lfm2": GGUFArch("lfm2", {"attn_norm": "operator_norm", "ffn_norm": "ffn_norm", "attn_q": "self_attn.q_proj",
                              "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                              "attn_output": "self_attn.out_proj", "attn_q_norm": "self_attn.q_layernorm",
                              "attn_k_norm": "self_attn.k_layernorm", "ffn_gate": "feed_forward.w1",
                              "ffn_up": "feed_forward.w3", "ffn_down": "feed_forward.w2"},
                     {"token_embd": "model.embed_tokens", "token_embd_norm": "model.embedding_norm",
                      "output": "lm_head"},
                     whole_names={f"shortconv.{n}.weight": f"conv.{n}.weight" for n in ("in_proj", "conv", "out_proj")},
                     fixes={"shortconv.conv.weight": CONV}, layer_arrays=HYBRID, extra=_lfm2),
    "granitehybrid": GGUFArch("granitemoehybrid", dict(GRANITE_MOE_LAYER, **G), experts=GRANITE_EXPERTS,
                              expert_key="num_local_experts", fixes=MAMBA2_FIXES, whole_names=G_WHOLE,
                              layer_arrays=HYBRID, extra=_granitehybrid),
    "jamba": GGUFArch("jamba", {**{k: v.replace("mlp.", "feed_forward.") for k, v in LLAMA_LAYER.items()},
                                "ffn_norm": "pre_ff_layernorm", "ffn_gate_inp": "feed_forward.router", **J},
                      {"token_embd": "model.embed_tokens", "output_norm": "model.final_layernorm", "output": "lm_head"},
                      experts={k: v.replace("mlp.", "feed_forward.") for k, v in QWEN_EXPERTS.items()},
                      fixes=MAMBA1_FIXES, whole_names=J_WHOLE, layer_arrays=HYBRID, extra=_jamba),
    # Falcon-H1's µP multipliers are folded into its weights by the converter: they are the family's .mup weights
    "falcon-h1": GGUFArch("falcon_h1", {"attn_norm": "input_layernorm", "ffn_norm": "pre_ff_layernorm", **G,
                                        **{k: f"self_attn.{v}_proj.mup" for k, v in (("attn_q", "q"), ("attn_k", "k"),
                                                                                     ("attn_v", "v"),
                                                                                     ("attn_output", "o"))},
                                        **{f"ffn_{v}": f"feed_forward.{v}_proj.mup" for v in ("gate", "up", "down")},
                                        "ssm_in": "mamba.in_proj.mup", "ssm_out": "mamba.out_proj.mup"},
                          {"token_embd": "model.embed_tokens", "output_norm": "model.final_layernorm",
                           "output": "lm_head"},
                          fixes=MAMBA2_FIXES, whole_names=dict(G_WHOLE, ffn_norm="pre_ff_layernorm.weight"),
                          extra=_falcon_h1),
    # Nemotron-H: one mixer per block, all under "mixer."; its attention has no RoPE, so the converter's q / k row
    # permutation (the same in both) changes no score
    "nemotron_h": GGUFArch("nemotron_h", dict(M2, attn_norm="norm", attn_q="mixer.q_proj", attn_k="mixer.k_proj",
                                              attn_v="mixer.v_proj", attn_output="mixer.o_proj",
                                              ffn_up="mixer.up_proj", ffn_down="mixer.down_proj"),
                           MAMBA_GLOBAL, prefix="backbone.layers.{}.", fixes=MAMBA2_FIXES, whole_names=M2_WHOLE,
                           layer_arrays=HYBRID + ("feed_forward_length",), extra=_nemotron_h),
    # Qwen3-Next: its RMSNorms stored as 1 + w (the family adds the 1) but the linear attention's gated norm
    "qwen3next": GGUFArch("qwen3_next", dict(QWEN_MOE_LAYER, post_attention_norm="post_attention_layernorm",
                                             ssm_out="linear_attn.out_proj", ssm_norm="linear_attn.norm",
                                             ssm_conv1d="linear_attn.conv1d"),
                          whole_names={"ssm_a": "linear_attn.A_log", "ssm_dt.bias": "linear_attn.dt_bias"},
                          experts=QWEN_EXPERTS, norm_shift=1.0, joins=_qwen3next_joins,
                          fixes={"ssm_a": Fix(values=_a_log), "ssm_conv1d.weight": CONV,
                                 "ssm_norm.weight": Fix(shift=False)}, extra=_qwen3next),
}
# the families these architectures load as that no GGUFArch names (an extra picks them)
ALSO_READ = {"falcon_mamba"}
