"""GGUF files of the moe_b group of issue 30 (llama.cpp's lfm2moe, exaone-moe, minimax-m2, nemotron_h_moe, afmoe):
their metadata keys as the Petit family's Hugging Face config, their tensor names as its Hugging Face names. Imported by
gguf_archs, whose ARCHS these join.

What the files hold, and what llama.cpp assumes (src/models/lfm2moe.cpp with lfm2.cpp's graph, exaone-moe.cpp,
llama-graph.cpp's build_moe_ffn; its converter's conversion/lfm2.py and exaone.py):

- lfm2moe (LFM2-MoE): LFM2's file (`attention.head_count_kv` 0 for a conv layer, the conv kernels squeezed, the
  final norm as `token_embd_norm`) with the first `leading_dense_block_count` layers dense and the others' experts
  stacked (`ffn_gate_exps` / `ffn_up_exps` / `ffn_down_exps`), the router `ffn_gate_inp` (f32) and the selection
  bias `exp_probs_b` (LFM2-MoE's `expert_bias`). llama.cpp routes on the sigmoid (`expert_gating_func` 2, the only
  one read here), always renormalises the chosen weights, over their plain sum (transformers adds 1e-6), and reads
  no `expert_weights_scale`: the checkpoint's routed_scaling_factor is not in the file and not applied (1, as in
  the released LFM2-8B-A1B; tests/fixtures/gguf5_moe_b's has 2.5, so there llama.cpp's logits are far from
  transformers', and Petit reading the file follows the file).
- exaone-moe (K-EXAONE): Llama's names with per-head `attn_q_norm` / `attn_k_norm`, the dense first
  `leading_dense_block_count` layers, the experts stacked, a shared expert (`ffn_*_shexp`, of
  `expert_shared_feed_forward_length`), `exp_probs_b`; sliding layers by `attention.sliding_window_pattern` (an
  array, or a period: the last layer of each period full; absent: 4) in a window of `attention.sliding_window`,
  RoPE in the sliding layers only (on halves); the routing by `expert_gating_func` (sigmoid; the softmax is not
  run by the exaone_moe family and is refused), groups by `expert_group_count` / `expert_group_used_count` (the
  sum of each group's best two), `expert_weights_norm` (absent: no renormalisation), `expert_weights_scale`
  (absent or 0: 1). The multi-token-prediction layers the converter appends (`nextn_predict_layers`, counted in
  `block_count`) are not run by llama.cpp's decoder, nor by Petit.
- minimax-m2 (MiniMax-M2): Mixtral's stacked experts with the whole-row `attn_q_norm` / `attn_k_norm`, RoPE on
  halves over `rope.dimension_count` values of each head (the release's rotary_dim), `exp_probs_b` as the
  selection bias; the chosen sigmoid scores always renormalised. The file must say `expert_gating_func` 2 (the
  converter writes it from the Hub config's scoring_func; without it llama.cpp would not route on the sigmoid), and
  an `expert_weights_scale` other than 1 (no MiniMax-M2 has one) is refused: the family has no scale.
- nemotron_h_moe (Nemotron 3 Nano): nemotron_h's file (a block is attention where it has key / value heads, Mamba-2
  where it has neither heads nor a width) whose blocks with a router (`ffn_gate_inp`) are expert blocks: plain
  experts `ffn_up_exps` / `ffn_down_exps` (relu², no gate), a plain shared expert (`ffn_up_shexp` /
  `ffn_down_shexp`, `expert_shared_feed_forward_length` wide), `exp_probs_b`; llama.cpp routes on the sigmoid
  always, within `expert_group_used_count` of `expert_group_count` groups, renormalised with `expert_weights_norm`,
  times `expert_weights_scale`. The latent projections (Nemotron 3 Super's `ffn_latent_*`) are refused.
- afmoe (Arcee's Trinity): the four norms a block (`attn_norm`, `post_attention_norm`, `ffn_norm`, `post_ffw_norm`),
  the attention output gate `attn_gate`, per-head q / k norms, RoPE on halves (the converter permutes nothing) in
  the sliding layers only; llama.cpp always multiplies the embeddings by sqrt(hidden) (the family's mup_enabled),
  takes the sliding pattern from `attention.sliding_window_pattern` or else 3 sliding : 1 full (the converter
  writes none: a checkpoint with another global_attn_every_n_layers runs as llama.cpp runs it), routes on the
  sigmoid, renormalises only with `expert_weights_norm` (the family always does: a file without it is refused),
  times `expert_weights_scale`; `num_shared_experts` (`expert_shared_count`) shared experts of the experts' width.
"""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_LAYER, MIXTRAL_EXPERTS, MIXTRAL_LAYER, QWEN_EXPERTS, GGUFArch
from petit.loading.gguf_ssm import CONV, HYBRID, SSM_ARCHS, _lfm2, _nemotron_h
from petit.loading.gguf_variants import _sliding_layers


def _sigmoid_only(meta, key, arch: str, family: str) -> None:
    gating = _number(meta, key, "expert_gating_func", None, int, arch)
    if gating != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: Petit's {family} family routes on the "
                         f"sigmoid (2) only")


def sigmoid_renormalised_whole_heads(meta, key, cfg, arch: str, family: str) -> None:
    """What a family routing on renormalised sigmoids over RoPE on whole heads needs of llama.cpp's file (afmoe,
    hy_v3): `expert_gating_func` 2, `expert_weights_norm` true, `rope.dimension_count` the head size."""
    _sigmoid_only(meta, key, arch, family)
    if not meta.get(key("expert_weights_norm"), False):
        raise ValueError(f"metadata {key('expert_weights_norm')!r} is absent or false: llama.cpp then does not "
                         f"renormalise the chosen experts' weights, which the {family} family always does")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size: llama.cpp's {arch} rotates "
                         f"whole heads")


def shared_experts(meta, key, arch: str, family: str) -> tuple[int, int]:
    """(moe_intermediate_size, num_shared_experts) of a family whose shared expert is num_shared_experts experts
    wide (exaone_moe, hy_v3): `expert_feed_forward_length` and `expert_shared_feed_forward_length` (absent: one)."""
    moe_ff = _number(meta, key, "expert_feed_forward_length", None, int, arch)
    shared_ff = _number(meta, key, "expert_shared_feed_forward_length", moe_ff, int, arch)
    if shared_ff % moe_ff:
        raise ValueError(f"metadata {key('expert_shared_feed_forward_length')!r} ({shared_ff}) is not a multiple "
                         f"of {key('expert_feed_forward_length')!r} ({moe_ff}): the {family} family's shared "
                         f"expert is num_shared_experts x moe_intermediate_size wide")
    return moe_ff, shared_ff // moe_ff


def _lfm2moe(meta, key, cfg, has):
    _lfm2(meta, key, cfg, has)
    cfg.pop("block_auto_adjust_ff_dim", None)           # LFM2's; LFM2-MoE's dense MLP is feed_forward_length wide
    _sigmoid_only(meta, key, "lfm2moe", "lfm2_moe")
    dense = _number(meta, key, "leading_dense_block_count", 0, int, "lfm2moe")
    cfg.update(model_type="lfm2_moe", moe_intermediate_size=_number(meta, key, "expert_feed_forward_length", None,
                                                                    int, "lfm2moe"),
               num_dense_layers=dense,
               use_expert_bias=True, norm_topk_prob=True, routed_scaling_factor=1.0)


def _exaone_moe(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, "exaone-moe")

    _sigmoid_only(meta, key, "exaone-moe", "exaone_moe")
    nextn = get("nextn_predict_layers", 0)
    n_all = cfg["num_hidden_layers"]
    if not 0 <= nextn < n_all:
        raise ValueError(f"metadata {key('nextn_predict_layers')!r} ({nextn}) should be below "
                         f"{key('block_count')!r} ({n_all})")
    base, base_swa = cfg["rope_theta"], meta.get(key("rope.freq_base_swa"))
    if base_swa is not None and float(base_swa) != base:
        raise ValueError(f"metadata {key('rope.freq_base_swa')!r} differs from {key('rope.freq_base')!r}: the "
                         f"exaone_moe family has one RoPE base")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} is not the head size: llama.cpp's exaone-moe "
                         f"rotates whole heads")
    _sliding_layers(meta, key, cfg, 4)
    moe_ff, n_shared = shared_experts(meta, key, "exaone-moe", "exaone_moe")
    groups = get("expert_group_count", 0) or 1
    n = n_all - nextn
    cfg.update(model_type="exaone_moe", num_hidden_layers=n, layer_types=cfg["layer_types"][:n],
               sliding_window=get("attention.sliding_window", 128), sliding_window_pattern=4,
               moe_intermediate_size=moe_ff, num_shared_experts=n_shared,
               first_k_dense_replace=get("leading_dense_block_count", 0), mlp_layer_types=None,
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               n_group=groups, topk_group=get("expert_group_used_count") if groups > 1 else 1)


def _minimax_m2(meta, key, cfg, has):
    _sigmoid_only(meta, key, "minimax-m2", "minimax_m2")
    scale = _number(meta, key, "expert_weights_scale", 0.0, float, "minimax-m2")
    if scale not in (0.0, 1.0):
        raise ValueError(f"metadata {key('expert_weights_scale')!r} is {scale}: the minimax_m2 family has no routed "
                         f"scale")
    cfg.update(intermediate_size=_number(meta, key, "expert_feed_forward_length", cfg["intermediate_size"], int,
                                         "minimax-m2"))


def _nemotron_h_moe(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, "nemotron_h_moe")

    n = cfg["num_hidden_layers"]
    if any(has(f"blk.{i}.ffn_latent_in.weight") or has(f"blk.{i}.ffn_latent_out.weight") for i in range(n)):
        raise ValueError("the file has latent expert projections (ffn_latent_in / ffn_latent_out, Nemotron 3 "
                         "Super's moe_latent_size): the nemotron_h family does not run them")
    routed = {"n_routed_experts": cfg.pop("n_routed_experts"), "num_experts_per_tok": cfg.pop("num_experts_per_tok")}
    experts = [i for i in range(n) if has(f"blk.{i}.ffn_gate_inp.weight")]
    _nemotron_h(meta, key, cfg, has)
    pattern = list(cfg["hybrid_override_pattern"])
    for i in experts:
        pattern[i] = "E"
    ff = [v for i, v in enumerate(np.asarray(meta.get(key("feed_forward_length"), 0)).reshape(-1).tolist())
          if pattern[min(i, n - 1)] == "-"]
    groups = get("expert_group_count", 0) or 1
    moe_ff = get("expert_feed_forward_length")
    cfg.update(routed, hybrid_override_pattern="".join(pattern), intermediate_size=max(ff) if ff else 1,
               moe_intermediate_size=moe_ff,
               moe_shared_expert_intermediate_size=get("expert_shared_feed_forward_length", moe_ff),
               n_group=groups, topk_group=get("expert_group_used_count") if groups > 1 else 1,
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0)


def _afmoe(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, "afmoe")

    sigmoid_renormalised_whole_heads(meta, key, cfg, "afmoe", "afmoe")
    window = get("attention.sliding_window", 0)
    if window:
        _sliding_layers(meta, key, cfg, 4)
    else:
        cfg["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]
    cfg.update(sliding_window=window or None, mup_enabled=True, num_dense_layers=get("leading_dense_block_count", 0),
               moe_intermediate_size=get("expert_feed_forward_length"), num_shared_experts=get("expert_shared_count"),
               route_scale=get("expert_weights_scale", 0.0, float) or 1.0)


def _zero_exaone_bias(meta, cfg, has) -> dict:
    """A zero selection bias for each expert layer whose file has no `exp_probs_b` (llama.cpp's exaone-moe makes it
    optional and then chooses on the scores alone)."""
    return {f"model.layers.{i}.mlp.e_score_correction_bias": np.zeros(cfg["num_experts"], np.float32)
            for i in range(cfg["first_k_dense_replace"], cfg["num_hidden_layers"])
            if not has(f"blk.{i}.exp_probs_b.bias")}


LFM2_LAYER = {"attn_norm": "operator_norm", "ffn_norm": "ffn_norm", "attn_q": "self_attn.q_proj",
              "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.out_proj",
              "attn_q_norm": "self_attn.q_layernorm", "attn_k_norm": "self_attn.k_layernorm",
              "ffn_gate": "feed_forward.w1", "ffn_up": "feed_forward.w3", "ffn_down": "feed_forward.w2",
              "ffn_gate_inp": "feed_forward.gate"}
EXAONE_MOE_LAYER = dict(LLAMA_LAYER, attn_q_norm="self_attn.q_norm", attn_k_norm="self_attn.k_norm",
                        ffn_gate_inp="mlp.gate", ffn_gate_shexp="mlp.shared_experts.gate_proj",
                        ffn_up_shexp="mlp.shared_experts.up_proj", ffn_down_shexp="mlp.shared_experts.down_proj")

_NEMOTRON = SSM_ARCHS["nemotron_h"]

MOE_B5_ARCHS = {
    "afmoe": GGUFArch("afmoe", dict(LLAMA_LAYER, ffn_norm="pre_mlp_layernorm",
                                    post_attention_norm="post_attention_layernorm", post_ffw_norm="post_mlp_layernorm",
                                    attn_gate="self_attn.gate_proj",
                                    attn_q_norm="self_attn.q_norm", attn_k_norm="self_attn.k_norm",
                                    ffn_gate_inp="mlp.router.gate", ffn_gate_shexp="mlp.shared_experts.gate_proj",
                                    ffn_up_shexp="mlp.shared_experts.up_proj",
                                    ffn_down_shexp="mlp.shared_experts.down_proj"),
                      whole_names={"exp_probs_b.bias": "mlp.expert_bias"}, experts=QWEN_EXPERTS, extra=_afmoe),
    "nemotron_h_moe": GGUFArch("nemotron_h", dict(_NEMOTRON.layer_names, ffn_gate_inp="mixer.gate",
                                                  ffn_up_shexp="mixer.shared_experts.up_proj",
                                                  ffn_down_shexp="mixer.shared_experts.down_proj"),
                               _NEMOTRON.global_names, prefix=_NEMOTRON.prefix, fixes=_NEMOTRON.fixes,
                               whole_names=dict(_NEMOTRON.whole_names,
                                                **{"exp_probs_b.bias": "mixer.gate.e_score_correction_bias"}),
                               experts={"ffn_up_exps": "mixer.experts.{}.up_proj",
                                        "ffn_down_exps": "mixer.experts.{}.down_proj"},
                               expert_key="n_routed_experts", layer_arrays=_NEMOTRON.layer_arrays,
                               extra=_nemotron_h_moe),
    "minimax-m2": GGUFArch("minimax_m2", dict(MIXTRAL_LAYER, attn_q_norm="self_attn.q_norm",
                                              attn_k_norm="self_attn.k_norm"),
                           whole_names={"exp_probs_b.bias": "block_sparse_moe.e_score_correction_bias"},
                           experts=MIXTRAL_EXPERTS, expert_key="num_local_experts", extra=_minimax_m2),
    "lfm2moe": GGUFArch("lfm2_moe", LFM2_LAYER,
                        {"token_embd": "model.embed_tokens", "token_embd_norm": "model.embedding_norm",
                         "output": "lm_head"},
                        whole_names={**{f"shortconv.{n}.weight": f"conv.{n}.weight"
                                        for n in ("in_proj", "conv", "out_proj")},
                                     "exp_probs_b.bias": "feed_forward.expert_bias"},
                        experts={"ffn_gate_exps": "feed_forward.experts.{}.w1",
                                 "ffn_up_exps": "feed_forward.experts.{}.w3",
                                 "ffn_down_exps": "feed_forward.experts.{}.w2"},
                        fixes={"shortconv.conv.weight": CONV}, layer_arrays=HYBRID, extra=_lfm2moe),
    "exaone-moe": GGUFArch("exaone_moe", EXAONE_MOE_LAYER,
                           whole_names={"exp_probs_b.bias": "mlp.e_score_correction_bias"}, experts=QWEN_EXPERTS,
                           extra=_exaone_moe, meta_tensors=_zero_exaone_bias),
}
