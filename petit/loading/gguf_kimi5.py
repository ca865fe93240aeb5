"""GGUF files of Kimi Linear (issue 30, the kimi_gguf follow-up): llama.cpp's `kimi-linear`, read as Petit's
kimi_linear family (petit/models/families/hybrid/kimi_linear.py). Imported by gguf_archs, whose ARCHS this joins.

What the file holds (llama.cpp's conversion/kimi_linear.py and src/models/kimi-linear.cpp):

- layer kinds by `attention.head_count_kv`, one value a layer: 0 for a Kimi Delta Attention layer, 1 for a latent
  attention layer (the converter writes MLA as one key / value head). KDA runs `attention.head_count` heads of
  `kda.head_dim` (llama.cpp has no separate KDA head count), with the short convolutions `ssm.conv_kernel` wide;
- a KDA layer: `attn_q` / `attn_k` / `attn_v`, `ssm_conv1d_q|k|v` ([channels, kernel]), `ssm_f_a` / `ssm_f_b` (the
  low-rank forget gate), `ssm_g_a` / `ssm_g_b` (the low-rank output gate), `ssm_beta` (b_proj), `ssm_a` (stored as
  -exp(A_log): read back as log(-a)), `ssm_dt.bias` (dt_bias), `ssm_norm` (o_norm), `attn_output`. The family runs
  one `in_proj` (rows q | k | v | g_b g_a | b | f_b f_a) and one `conv1d` (q | k | v): both are computed at load
  from the stored rows (`derived`), the gates as the products of their two matrices in float64, as the family does
  for a Hugging Face folder; in_proj is kept in the widest type among its parts (a q8_0 file's ssm_g_b / ssm_f_b
  are F16: 16 columns are no q8_0 block), never requantized narrower than the file stores them;
- a latent attention layer: deepseek2's tensors without RoPE (`attn_q` or `attn_q_a` / `attn_q_b`, `attn_kv_a_mqa`,
  `attn_kv_a_norm`, the absorbed `attn_k_b` / `attn_v_b` per head), read as gguf_moe.py reads deepseek2's;
  llama.cpp normalises the latent with the file's RMS eps (the model's own KimiRMSNorm: 1e-6), kept as llama.cpp
  runs it (`latent_norm_eps`);
- the first `leading_dense_block_count` layers' SwiGLU MLP (`ffn_gate` / `ffn_up` / `ffn_down`, the Hub's `mlp.*`),
  the others' routed experts (`ffn_*_exps`, Mixtral's w1 / w3 / w2), the router (`ffn_gate_inp`) and selection bias
  (`exp_probs_b`), the shared experts (`ffn_*_shexp`). llama.cpp always renormalises the top-k weights and scales
  them by `expert_weights_scale`; it routes with `expert_gating_func` (the family runs the sigmoid, Kimi's only).
"""
import numpy as np

from petit.loading.gguf_moe import _number, _q_and_kv
from petit.loading.gguf_names import GGUFArch
from petit.loading.gguf_ssm import Fix, _a_log

MLP = "block_sparse_moe."
KIMI_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
              "attn_output": "self_attn.o_proj", "attn_q_a": "self_attn.q_a_proj",
              "attn_q_a_norm": "self_attn.q_a_layernorm", "attn_kv_a_norm": "self_attn.kv_a_layernorm",
              "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
              "ffn_gate_inp": MLP + "gate", "ffn_gate_shexp": MLP + "shared_experts.gate_proj",
              "ffn_up_shexp": MLP + "shared_experts.up_proj", "ffn_down_shexp": MLP + "shared_experts.down_proj",
              "ssm_norm": "self_attn.o_norm"}
KIMI_WHOLE = {"ssm_a": "self_attn.A_log", "ssm_dt.bias": "self_attn.dt_bias",
              "exp_probs_b.bias": MLP + "gate.e_score_correction_bias"}
KIMI_EXPERTS = {"ffn_gate_exps": MLP + "experts.{}.w1", "ffn_up_exps": MLP + "experts.{}.w3",
                "ffn_down_exps": MLP + "experts.{}.w2", "attn_k_b": "self_attn.k_absorb.{}",
                "attn_v_b": "self_attn.v_absorb.{}"}
# A stored as -exp(A_log) [1, 1, heads, 1] (or squeezed by a quantizer): A_log in the family's shape
KIMI_FIXES = {"ssm_a": Fix(shape=lambda s: (1, 1, int(np.prod(s)), 1), values=_a_log)}
WIDTH = {"F32": 3, "F16": 2, "BF16": 2}
KDA_PARTS = ("attn_q", "attn_k", "attn_v", "ssm_g_b", "ssm_g_a", "ssm_beta", "ssm_f_b", "ssm_f_a")
FULL_RANK_PARTS = ("attn_q", "attn_k", "attn_v", "ssm_g_a", "ssm_beta", "ssm_f_a")


def _kimi(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, "kimi-linear")

    n, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv = np.asarray(meta.get(key("attention.head_count_kv"), 0)).reshape(-1)
    kv = np.repeat(kv, n) if kv.size == 1 else kv
    if kv.size != n:
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} has {kv.size} values for {n} layers")
    rope, k_mla, v_mla = get("rope.dimension_count"), get("attention.key_length_mla"), get("attention.value_length_mla")
    if not 0 < rope < k_mla:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} ({rope}) should be below "
                         f"{key('attention.key_length_mla')!r} ({k_mla})")
    gating = get("expert_gating_func")
    if gating != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: the kimi_linear family routes with "
                         f"the sigmoid (2) only, Kimi Linear's router")
    q_lora = meta.get(key("attention.q_lora_rank"))
    for k in ("head_dim", "partial_rotary_factor"):
        cfg.pop(k, None)
    cfg.update(num_key_value_heads=heads,
               layer_types=["full_attention" if int(x) else "linear_attention" for x in kv.tolist()],
               linear_num_heads=heads, linear_head_dim=get("kda.head_dim"),
               linear_conv_kernel_dim=get("ssm.conv_kernel"),
               kv_lora_rank=get("attention.kv_lora_rank"), q_lora_rank=None if q_lora is None else int(q_lora),
               qk_rope_head_dim=rope, qk_nope_head_dim=k_mla - rope, v_head_dim=v_mla,
               moe_intermediate_size=get("expert_feed_forward_length"),
               num_shared_experts=get("expert_shared_count", 0),
               first_k_dense_replace=get("leading_dense_block_count", 0),
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               moe_renormalize=True, num_expert_group=get("expert_group_count", 1),
               latent_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)))


def _mla_joins(tensors, cfg) -> dict:
    """deepseek2's q_nope / q_pe and kv_c / kv_pe row ranges, for the latent attention layers only (a KDA layer's
    attn_q is its own q_proj)."""
    full = {f"model.layers.{i}." for i, t in enumerate(cfg["layer_types"]) if t == "full_attention"}
    return {hf: parts for hf, parts in _q_and_kv(tensors, cfg).items() if hf[:hf.index("self_attn.")] in full}


def _kda_derived(tensors, cfg) -> dict:
    """Each KDA layer's in_proj (q | k | v | g_b g_a | b | f_b f_a, the low-rank gates multiplied out in float64;
    q | k | v | g | b | f where the gates are full rank, Ling 3's)
    and conv1d (q | k | v, [3 x channels, 1, kernel])."""
    D, K = cfg["hidden_size"], cfg["linear_conv_kernel_dim"]
    H, w = cfg["linear_num_heads"], cfg["linear_num_heads"] * cfg["linear_head_dim"]
    out = {}

    def whole(rows, g):
        return rows(g, 0, int(np.prod(tensors[g].shape[:-1]))).astype(np.float64)

    for i, kind in enumerate(cfg["layer_types"]):
        if kind != "linear_attention":
            continue
        a, b = f"model.layers.{i}.self_attn.", f"blk.{i}."
        low_rank = f"{b}ssm_g_b.weight" in tensors        # Kimi's; Ling 3's gates are full rank (bailingmoe3)
        names = [f"{b}{p}.weight" for p in (KDA_PARTS if low_rank else FULL_RANK_PARTS)]
        if not all(g in tensors for g in names):
            continue                            # the load names the missing tensor

        def in_proj(rows, g=tuple(names)):
            if len(g) == len(FULL_RANK_PARTS):
                return np.concatenate([whole(rows, x) for x in g]).astype(np.float32)
            q, k, v, gb, ga, beta, fb, fa = (whole(rows, x) for x in g)
            return np.concatenate([q, k, v, gb @ ga, beta, fb @ fa]).astype(np.float32)
        # the load stores a derived matrix in its first source's type: the widest of the parts' (in a q8_0 file the
        # quantizer leaves the gates' second matrices F16, whose rows are not q8_0 blocks), never a narrower one
        out[a + "in_proj.weight"] = ((4 * w + H + w, D), in_proj,
                                     sorted(names, key=lambda g: WIDTH.get(tensors[g].type, 0), reverse=True))
        convs = [f"{b}ssm_conv1d_{p}.weight" for p in "qkv"]
        if all(g in tensors for g in convs):
            out[a + "conv1d.weight"] = ((3 * w, 1, K), lambda rows, g=convs: np.concatenate(
                [whole(rows, x) for x in g]).astype(np.float32).reshape(3 * w, 1, K), convs)
    return out


KIMI5_ARCHS = {
    "kimi-linear": GGUFArch("kimi_linear", KIMI_LAYER, whole_names=KIMI_WHOLE, experts=KIMI_EXPERTS,
                            expert_key="num_experts", fixes=KIMI_FIXES, joins=_mla_joins, derived=_kda_derived,
                            extra=_kimi, own_head_sizes=True, layer_arrays=("attention.head_count_kv",)),
}
