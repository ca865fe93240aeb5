"""llama.cpp's laguna and minimax-01 files (issue 36, the gg36s group), read as the families Petit runs from their
Hugging Face folders.

Laguna (conversion/laguna.py, src/models/laguna.cpp), read as the laguna family:
- `attention.head_count` a value per layer (num_attention_heads_per_layer), the key / value heads shared; per-head
  q / k RMSNorms, RoPE on halves (NEOX: q / k not permuted); the heads' output times softplus(attn_gate x) before
  attn_output, one gate a head or a value, which llama.cpp tells from attn_gate's rows (the family's `gating`: one
  kind for every layer, so a file mixing them is refused);
- with `attention.sliding_window` (absent or 0: every layer full) the sliding layers are those of
  `attention.sliding_window_pattern` (a flag per layer) or, without it, llama.cpp's fixed pattern of period 4 (or the
  scalar the key holds) whose first layer is full; full layers rotate `rope.dimension_count` values with
  `rope.freq_base` and the file's YaRN, sliding ones `rope.dimension_count_swa` (absent: the full count) with
  `rope.freq_base_swa` (absent: the full base) and no scaling: the family's rope_parameters per layer type;
- dense SwiGLU MLPs before `leading_dense_block_count`, then `expert_used_count` of `expert_count` experts chosen
  on sigmoid(router x) + `exp_probs_b` (`expert_gating_func` 2, its default), renormalised (`expert_weights_norm`,
  required: the family always renormalises) times `expert_weights_scale` (absent or 0: 1), plus a shared SwiGLU of
  `expert_shared_feed_forward_length` (absent: the experts' width times `expert_shared_count`, default 1).
llama.cpp 0.3.36 neither converts nor runs the router's soft-cap (moe_router_logit_softcapping: none here) and loads
no attn_output bias (q / k / v biases alone are not the family's attention_bias: refused).

MiniMax-01 (conversion/minimax.py MiniMaxText01Model, src/models/minimax-01.cpp), read as the minimax family:
- the lightning layers are those `attention.recurrent_layers` flags or, without it, all but every
  `full_attention_interval`-th (default 8: llama.cpp's); the others are softmax attention with RoPE on halves over
  `rope.dimension_count` (the family rotates the whole head, as transformers' MiniMax: another count is refused);
- a lightning layer's attn_qkv holds per head [q_h | k_h | v_h] (qkv_proj's layout), attn_gate the output gate,
  attn_norm_2 the norm of the heads' output, attn_output out_proj: in_proj's rows [gate | v | k | q | dt] are read
  from them (the family's Mamba-2 view, dt rows zero), the decays the family's own;
- DeepNorm's residuals with `residual_scale` as every alpha (the converter requires equal alphas and betas of 1);
  the experts Mixtral's, softmax-routed and renormalised (`expert_weights_scale` other than 0 or 1 is refused).
llama.cpp norms the lightning output with the model's `attention.layer_norm_rms_epsilon`; transformers' MiniMax
(and the release's remote code) with its RMSNorm's own 1e-6. Petit follows transformers: a file whose eps is not
1e-6 (MiniMax-Text-01's is 1e-5) gives logits that are not llama.cpp's (tests/test_gg36s5.py measures it)."""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, MIXTRAL_EXPERTS, MIXTRAL_LAYER, QWEN_EXPERTS, GGUFArch

LAGUNA = "laguna"
MINIMAX = "minimax-01"
LAGUNA_LAYER = dict(LLAMA_LAYER, attn_gate="self_attn.g_proj", ffn_gate_inp="mlp.gate",
                    ffn_gate_shexp="mlp.shared_expert.gate_proj", ffn_up_shexp="mlp.shared_expert.up_proj",
                    ffn_down_shexp="mlp.shared_expert.down_proj")
LIGHTNING = {"attn_qkv": "self_attn.qkv_proj", "attn_gate": "self_attn.output_gate", "attn_norm_2": "self_attn.norm"}


def _per_layer(meta, key, k, n, default, kind=int) -> list:
    v = np.asarray(meta.get(key(k), default)).reshape(-1)
    if v.size == 1:
        v = np.repeat(v, n)
    if v.size != n:
        raise ValueError(f"metadata {key(k)!r} has {v.size} values for {n} layers")
    return [kind(x) for x in v]


def _laguna_types(meta, key, n) -> tuple:
    """(layer_types, sliding_window) as llama.cpp's laguna sets them (load_swa_pattern with period 4, full first)."""
    window = _number(meta, key, "attention.sliding_window", 0, int, LAGUNA)
    if not window:
        return ["full_attention"] * n, None
    pattern = meta.get(key("attention.sliding_window_pattern"), 4)
    if np.ndim(pattern):
        swa = _per_layer(meta, key, "attention.sliding_window_pattern", n, None, bool)
    else:
        swa = [int(pattern) == 0 or i % int(pattern) != 0 for i in range(n)]
    return ["sliding_attention" if s else "full_attention" for s in swa], window


def _laguna(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, LAGUNA)

    if has("blk.0.attn_q.bias") or has("blk.0.attn_output.bias"):
        raise ValueError("attention biases: llama.cpp's laguna loads q / k / v biases but no attn_output bias, and "
                         "the laguna family's attention_bias is all four")
    if get("expert_gating_func", 2) != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {get('expert_gating_func')}: the laguna family "
                         f"routes on sigmoids (2)")
    if not meta.get(key("expert_weights_norm"), False):
        raise ValueError(f"metadata {key('expert_weights_norm')!r} is absent or false: the laguna family always "
                         f"renormalises the chosen experts' weights")
    n, hd = cfg["num_hidden_layers"], cfg["head_dim"]
    types, window = _laguna_types(meta, key, n)
    moe_ff = get("expert_feed_forward_length")
    shexp = get("expert_shared_feed_forward_length", 0) or moe_ff * get("expert_shared_count", 1)
    rot = get("rope.dimension_count", hd)
    full = dict(cfg.pop("rope_scaling", None) or {"rope_type": "default"}, rope_theta=cfg.pop("rope_theta"),
                partial_rotary_factor=rot / hd)
    swa = {"rope_type": "default", "rope_theta": get("rope.freq_base_swa", full["rope_theta"], float),
           "partial_rotary_factor": get("rope.dimension_count_swa", rot) / hd}
    cfg.pop("partial_rotary_factor", None)
    lead = get("leading_dense_block_count", 0)
    cfg.update(num_attention_heads_per_layer=_per_layer(meta, key, "attention.head_count", n, None),
               layer_types=types, sliding_window=window, rope_types={"full_attention": full, "sliding_attention": swa},
               mlp_layer_types=["dense" if i < lead else "sparse" for i in range(n)], moe_intermediate_size=moe_ff,
               shared_expert_intermediate_size=shexp, attention_bias=False, moe_router_logit_softcapping=0.0,
               moe_routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0)


def _laguna_gates(meta, key, cfg, shape):
    """The gate's kind from attn_gate's rows, as llama.cpp tells it: a head's (rows = heads) or a value's."""
    kinds = set()
    for i, heads in enumerate(cfg["num_attention_heads_per_layer"]):
        rows = (shape(f"blk.{i}.attn_gate.weight") or (heads,))[0]
        if rows not in (heads, heads * cfg["head_dim"]):
            raise ValueError(f"tensor 'blk.{i}.attn_gate.weight' has {rows} rows: llama.cpp's laguna reads {heads} "
                             f"(a gate a head) or {heads * cfg['head_dim']} (a gate a value)")
        kinds.add("per-head" if rows == heads else "per-element")
    if len(kinds) > 1:
        raise ValueError("attn_gate is a gate a head in some layers and a gate a value in others: the laguna "
                         "family has one kind for every layer")
    cfg["gating"] = kinds.pop()


def _recurrent(meta, key, n) -> list:
    """llama.cpp's minimax-01 lightning layers: `attention.recurrent_layers` or every layer but each
    `full_attention_interval`-th."""
    if meta.get(key("attention.recurrent_layers")) is not None:
        return _per_layer(meta, key, "attention.recurrent_layers", n, None, bool)
    step = _number(meta, key, "full_attention_interval", 8, int, MINIMAX)
    return [(i + 1) % step != 0 for i in range(n)]


def _minimax(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, MINIMAX)

    if cfg.pop("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} ({get('rope.dimension_count')}) is not the "
                         f"head size ({cfg['head_dim']}): the minimax family rotates whole heads, as transformers' "
                         f"MiniMax")
    if get("expert_weights_scale", 0.0, float) not in (0.0, 1.0):
        raise ValueError(f"metadata {key('expert_weights_scale')!r} is {get('expert_weights_scale', 0.0, float)}: "
                         f"the minimax family does not scale the experts' weights")
    alpha = get("residual_scale", kind=float)
    cfg.update({f"{k}_alpha_factor": alpha for k in ("full_attn", "linear_attn", "mlp")},
               layer_types=["linear_attention" if r else "full_attention"
                            for r in _recurrent(meta, key, cfg["num_hidden_layers"])])


def _minimax_names(tensors, cfg) -> dict:
    """attn_output of a lightning layer is its out_proj."""
    return {f"blk.{i}.attn_output.weight": f"model.layers.{i}.self_attn.out_proj.weight"
            for i, kind in enumerate(cfg["layer_types"]) if kind == "linear_attention"}


def _in_proj(tensors, cfg) -> dict:
    """Each lightning layer's in_proj [gate | v | k | q | dt] from attn_gate and attn_qkv's per-head [q | k | v]."""
    H, D = cfg["num_attention_heads"], cfg["hidden_size"]
    hd = cfg["head_dim"]
    out = {}
    for i, kind in enumerate(cfg["layer_types"]):
        qkv, gate = f"blk.{i}.attn_qkv.weight", f"blk.{i}.attn_gate.weight"
        if kind != "linear_attention" or qkv not in tensors or gate not in tensors:
            continue

        def make(rows, qkv=qkv, gate=gate):
            parts = [rows(gate, 0, H * hd)]
            for j in (2, 1, 0):                       # v, k, q of each head
                parts += [rows(qkv, (3 * h + j) * hd, (3 * h + j + 1) * hd) for h in range(H)]
            return np.concatenate(parts + [np.zeros((H, D), np.float32)])
        out[f"model.layers.{i}.self_attn.in_proj.weight"] = ((4 * H * hd + H, D), make, [gate, qkv])
    return out


def gg36s_archs() -> dict:
    """The group's architectures: laguna as the laguna family, minimax-01 as the minimax family."""
    return {LAGUNA: GGUFArch("laguna", LAGUNA_LAYER, experts=QWEN_EXPERTS, extra=_laguna, shape_extra=_laguna_gates,
                             whole_names={"exp_probs_b.bias": "mlp.experts.e_score_correction_bias"},
                             layer_arrays=("attention.head_count",)),
            MINIMAX: GGUFArch("minimax", dict(MIXTRAL_LAYER, **LIGHTNING), experts=MIXTRAL_EXPERTS,
                              expert_key="num_local_experts", extra=_minimax, config_names=_minimax_names,
                              derived=_in_proj)}

