"""llama.cpp's DeepSeek-V4 files (`deepseek4`; issue 30, the dsv4g group), read as the deepseek_v4 family
(petit/models/families/mla/deepseek_v4.py), whose block llama.cpp 0.3.36's graph (src/models/deepseek4.cpp) computes:
checked on tests/fixtures/gguf5_dsv4g, where llama.cpp's logits are transformers' within 9e-7 of the range.

- the config: the family's fields from the keys of llama.cpp's converter (conversion/deepseek.py DeepseekV4Model);
  `attention.compress_ratios` gives each layer's kind (0 sliding, 4 CSA, 128 HCA: the only ratios llama.cpp's loader
  takes), `hash_layer_count` the first layers routed by token id (`ffn_gate_tid2eid`, int32), the experts'
  `swiglu_clamp_exp` one limit for every layer and the shared expert's (the family clamps both with it), and the
  router sqrtsoftplus (`expert_gating_func` 4: llama.cpp's loader takes no other). A YaRN `rope.scaling.*` is the
  compressed layers' (llama.cpp's sliding layers rotate unscaled, as transformers').
- the tensors: the release's names (converter's _map_dsv4_tensor_name) back to the family's; the grouped output's
  `attn_output_a` [o_groups x o_lora_rank, heads x head_dim / o_groups] read as one matrix per group (its rows);
  the experts stacked [experts, rows, columns] (the converter's MXFP4: q8_0 blocks of the same values, gguf.py).
  llama.cpp rotates the indexer's queries and keys (and, with a
  quantized cache, the attention's) by one Hadamard matrix: scores unchanged, so nothing to undo.

The multi-token-prediction block the converter may append (`nextn_predict_layers`) is not run, as in llama.cpp's
decoder and transformers."""
import numpy as np

from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import GGUFArch
from petit.models.families.mla.deepseek_v4_config import CSA, HCA, SWA

DSV4 = "deepseek4"
KINDS = {0: SWA, 4: CSA, 128: HCA}
SQRT_SOFTPLUS = 4                       # gguf-py's ExpertGatingFuncType.SQRTSOFTPLUS
# a layer tensor's name after "blk.N." -> the family's name after "model.layers.N."
LAYER = {"attn_norm.weight": "attn_norm.weight", "ffn_norm.weight": "ffn_norm.weight",
         "attn_sinks.weight": "attn.attn_sink", "attn_q_a.weight": "attn.wq_a.weight",
         "attn_q_a_norm.weight": "attn.q_norm.weight", "attn_q_b.weight": "attn.wq_b.weight",
         "attn_kv.weight": "attn.wkv.weight", "attn_kv_a_norm.weight": "attn.norm.weight",
         "attn_output_b.weight": "attn.wo_b.weight",
         "attn_compressor_kv.weight": "attn.compressor.wkv.weight",
         "attn_compressor_gate.weight": "attn.compressor.wgate.weight",
         "attn_compressor_ape.weight": "attn.compressor.ape",
         "attn_compressor_norm.weight": "attn.compressor.norm.weight",
         "indexer.attn_q_b.weight": "attn.indexer.wq_b.weight",
         "indexer.proj.weight": "attn.indexer.weights_proj.weight",
         "indexer_compressor_kv.weight": "attn.indexer.compressor.wkv.weight",
         "indexer_compressor_gate.weight": "attn.indexer.compressor.wgate.weight",
         "indexer_compressor_ape.weight": "attn.indexer.compressor.ape",
         "indexer_compressor_norm.weight": "attn.indexer.compressor.norm.weight",
         "ffn_gate_inp.weight": "ffn.gate.weight", "exp_probs_b.bias": "ffn.gate.bias",
         "ffn_gate_tid2eid.weight": "ffn.gate.tid2eid",
         "ffn_gate_shexp.weight": "ffn.shared_experts.w1.weight",
         "ffn_down_shexp.weight": "ffn.shared_experts.w2.weight",
         "ffn_up_shexp.weight": "ffn.shared_experts.w3.weight",
         **{f"hc_{p}_{w}.weight": f"hc_{p}_{w}" for p in ("attn", "ffn") for w in ("fn", "base", "scale")}}
EXPERTS = {"ffn_gate_exps": "ffn.experts.{}.w1", "ffn_down_exps": "ffn.experts.{}.w2",
           "ffn_up_exps": "ffn.experts.{}.w3"}
GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "head"}


def _limits(meta, key, n) -> float:
    """The experts' SwiGLU clamp: one positive value for every layer, the shared expert's the same."""
    v = {k: np.asarray(meta.get(key(k), []), np.float64).reshape(-1) for k in ("swiglu_clamp_exp",
                                                                               "swiglu_clamp_shexp")}
    exp, shexp = v["swiglu_clamp_exp"], v["swiglu_clamp_shexp"]
    shexp = exp if shexp.size == 0 else shexp
    if exp.size not in (1, n) or not (exp == exp[0]).all() or exp[0] <= 0 or not np.array_equal(
            np.broadcast_to(shexp, exp.shape), exp):
        raise ValueError(f"metadata {key('swiglu_clamp_exp')!r} {exp.tolist()[:8]} / {key('swiglu_clamp_shexp')!r} "
                         f"{shexp.tolist()[:8]}: the deepseek_v4 family clamps every layer's experts and shared "
                         f"expert at one positive limit")
    return float(np.float32(exp[0]))


def _deepseek4(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, DSV4)

    n = cfg["num_hidden_layers"] - get("nextn_predict_layers", 0)
    ratios = np.asarray(meta.get(key("attention.compress_ratios"), []), np.int64).reshape(-1).tolist()
    if len(ratios) < n or any(r not in KINDS for r in ratios[:n]):
        raise ValueError(f"metadata {key('attention.compress_ratios')!r} is {ratios[:8]}: llama.cpp's {DSV4} takes "
                         f"one of 0 / 4 / 128 for each of the {n} layers")
    if get("expert_gating_func") != SQRT_SOFTPLUS:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {get('expert_gating_func')}: llama.cpp's {DSV4} "
                         f"takes sqrtsoftplus scores ({SQRT_SOFTPLUS}) only")
    hashed = get("hash_layer_count")
    cfg.pop("intermediate_size", None)              # V4's experts are moe_intermediate_size wide
    cfg.update(num_hidden_layers=n, layer_types=[KINDS[r] for r in ratios[:n]],
               compress_rates={CSA: 4, HCA: 128}, mlp_layer_types=["hash_moe"] * min(n, hashed) + ["moe"] * max(
                   0, n - hashed),
               q_lora_rank=get("attention.q_lora_rank"), sliding_window=get("attention.sliding_window"),
               moe_intermediate_size=get("expert_feed_forward_length"), n_shared_experts=get("expert_shared_count"),
               routed_scaling_factor=get("expert_weights_scale", kind=float),
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)), scoring_func="sqrtsoftplus",
               swiglu_limit=_limits(meta, key, cfg["num_hidden_layers"]),
               index_n_heads=get("attention.indexer.head_count"), index_head_dim=get("attention.indexer.key_length"),
               index_topk=get("attention.indexer.top_k"), o_groups=get("attention.output_group_count"),
               o_lora_rank=get("attention.output_lora_rank"),
               compress_rope_theta=get("attention.compress_rope_freq_base", kind=float),
               hc_mult=get("hyper_connection.count"), hc_sinkhorn_iters=get("hyper_connection.sinkhorn_iterations"),
               hc_eps=get("hyper_connection.epsilon", kind=float))
    cfg.setdefault("partial_rotary_factor", 1.0)    # rope.dimension_count == head_dim


def _names(tensors, cfg) -> dict:
    """{GGUF name: family name} of the hyper head's tensors (the family reads them without `.weight`)."""
    return {f"output_hc_{w}.weight": f"model.hc_head.hc_{w}" for w in ("fn", "base", "scale")
            if f"output_hc_{w}.weight" in tensors}


def _wo_a(tensors, cfg) -> dict:
    """Each group's o_a: rows [g x o_lora_rank, (g + 1) x o_lora_rank) of `attn_output_a`."""
    r, out = cfg["o_lora_rank"], {}
    for i in range(cfg["num_hidden_layers"]):
        g_name = f"blk.{i}.attn_output_a.weight"
        if g_name in tensors:
            out.update({f"model.layers.{i}.attn.wo_a.{g}.weight": [(g_name, (g * r, (g + 1) * r))]
                        for g in range(cfg["o_groups"])})
    return out


DSV4G5_ARCHS = {DSV4: GGUFArch("deepseek_v4", {}, global_names=GLOBAL, whole_names=LAYER, experts=EXPERTS,
                               expert_key="n_routed_experts", extra=_deepseek4, config_names=_names, joins=_wo_a)}
