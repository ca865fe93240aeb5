"""llama.cpp files of issue 36's fam36q group, each read as the Petit family whose blocks it holds:

- codeshell (CodeShell, remote code): StarCoder2's block (src/models/codeshell.cpp: LayerNorms with biases, RoPE on
  halves, a tanh-GELU MLP with biases) under one fused `attn_qkv` with its bias, split by rows into q / k / v;
  read as the starcoder2 family (llama.cpp runs no sliding window).
- baichuan (Baichuan, remote code): Llama's block (W_pack split into q / k / v, permuted for adjacent-pair RoPE by
  the converter, as llama's); llama.cpp rotates q / k only in a 32-layer file (Baichuan-7B), runs ALiBi at 40 (13B)
  and no position at all at any other count (src/models/baichuan.cpp), so only 32 layers are read, as llama.
- bailingmoe3 (Ling 3, petit/models/families/hybrid/bailing_hybrid.py): kimi-linear's file (gguf_kimi5.py: the layer
  kinds by `attention.head_count_kv`, KDA's tensors, the absorbed latent attention) with KDA's gates full rank
  (`ssm_g_a`, `ssm_f_a` alone), A stored as exp(A_log) (Kimi's: -exp), the bounded forget gate (`kda.safe_gate`,
  required; `kda.gate_lower_bound`), the latent attention's RoPE (adjacent pairs) and head gate (`attn_gate`), the
  router's groups (`expert_group_count` / `expert_group_used_count`) and each layer's clamps (`swiglu_clamp_exp`,
  `swiglu_clamp_shexp`, 0: none).
- hy_v4 (HY-V4, petit/models/families/mla/hy_v4.py): deepseek32's file (gguf_mla5.py: the absorbed latent attention, the
  indexer, DeepSeek-V3's router) with the hyper-connections (`hc_attn_*`, `hc_ffn_*`, `output_hc_*`; counts and
  magnitude as `hyper_connection.*`), a sink logit a head (`attn_sinks`), the heads' output gate (`attn_gate`), the
  experts' SwiGLU clamp (`swiglu_clamp_exp`, one value for every layer; the shared expert unclamped, as llama.cpp)
  and `attention.indexer.types`; the indexer's rows as stored rotate their last values (llama.cpp's hy_v4 ropes
  them there), put first per head when read as the family does its checkpoint's. The layer norms' eps is the
  indexer's too (as both llama.cpp and transformers).
- hy_v3 (Hy3, petit/models/families/moe/hy_v3.py): what its converter (conversion/hunyuan.py HYV3Model) writes and its
  graph (src/models/hy-v3.cpp) computes is the family's block: per-head q / k RMSNorms before RoPE on halves (q / k not
  permuted), a dense SwiGLU MLP in the layers without a router (`ffn_gate_inp`) and, in the others, the top
  `expert_used_count` of `expert_count` experts chosen on sigmoid(router x) + `exp_probs_b`, weighed by their
  sigmoids renormalised (`expert_weights_norm`) times `expert_weights_scale` (router_scaling_factor), plus an
  ungated shared expert of `expert_shared_feed_forward_length` (num_shared_experts x moe_intermediate_size).
  llama.cpp loads no bias: the file has none (attention_bias and mlp_bias false). A router other than the sigmoid or
  without the renormalisation is refused (the family has neither); the multi-token-prediction block the converter
  may append (`nextn_predict_layers`) is not run, as in llama.cpp's decoder and transformers."""
import numpy as np

from petit.loading.gguf_kimi5 import KIMI_LAYER, KIMI_WHOLE, _kda_derived, _kimi, _mla_joins
from petit.loading.gguf_mla5 import _deepseek32, _dsa_arch, indexer_types
from petit.loading.gguf_moe import _number
from petit.loading.gguf_ssm import Fix
from petit.loading.gguf_moe_b5 import EXAONE_MOE_LAYER, shared_experts, sigmoid_renormalised_whole_heads
from petit.loading.gguf_names import LLAMA_LAYER, QKV, QWEN_EXPERTS, STARCODER2_LAYER, GGUFArch
from petit.models.families.mla.hy_v4 import rope_first

HY_V3 = "hy_v3"
BIAS = "mlp.e_score_correction_bias"


def _hy_v3(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, HY_V3)

    sigmoid_renormalised_whole_heads(meta, key, cfg, HY_V3, HY_V3)
    n = cfg["num_hidden_layers"] - get("nextn_predict_layers", 0)
    moe_ff, n_shared = shared_experts(meta, key, HY_V3, HY_V3)
    cfg.update(num_hidden_layers=n, moe_intermediate_size=moe_ff, num_shared_experts=n_shared,
               router_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               mlp_layer_types=["sparse" if has(f"blk.{i}.ffn_gate_inp.weight") else "dense" for i in range(n)],
               attention_bias=False, mlp_bias=False)


def _codeshell(starcoder2):
    """StarCoder2's reading (`starcoder2`: gguf_archs' own, handed in: gguf_archs imports this module), the biases
    told by the fused attn_qkv's"""
    def extra(meta, key, cfg, has):
        starcoder2(meta, key, cfg, has)
        cfg["use_bias"] = has("blk.0.attn_qkv.bias")
    return extra


BAICHUAN_ROPE_LAYERS = 32         # llama.cpp's baichuan: RoPE at this layer count only


def _baichuan(meta, key, cfg, has):
    n = cfg["num_hidden_layers"]
    if n != BAICHUAN_ROPE_LAYERS:
        how = "ALiBi (Baichuan-13B's)" if n == 40 else "no position encoding at all"
        raise ValueError(f"metadata {key('block_count')!r} is {n}: llama.cpp's baichuan then runs {how}, which "
                         f"the llama family does not; it rotates q / k (Baichuan-7B, read as llama) at "
                         f"{BAICHUAN_ROPE_LAYERS} layers only")
    cfg.update(attention_bias=False, mlp_bias=False)


def _zero_bias(meta, cfg, has) -> dict:
    """A zero selection bias for each expert layer whose file has no `exp_probs_b` (llama.cpp's hy_v3 loads it when
    present and otherwise chooses on the sigmoids alone)."""
    return {f"model.layers.{i}.{BIAS}": np.zeros(cfg["num_experts"], np.float32)
            for i, kind in enumerate(cfg["mlp_layer_types"]) if kind == "sparse" and not has(f"blk.{i}.exp_probs_b")}


LING3 = "bailingmoe3"


def _bailingmoe3(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, LING3)

    n = cfg["num_hidden_layers"]
    limits = {}
    for k, field in (("swiglu_clamp_exp", "expert_swiglu_limit_list"),
                     ("swiglu_clamp_shexp", "share_expert_swiglu_limit_list")):
        v = np.asarray(meta.get(key(k), [0.0] * n), np.float64).reshape(-1)
        if v.size != n:
            raise ValueError(f"metadata {key(k)!r} has {v.size} values for {n} layers")
        limits[field] = [float(np.float32(x)) for x in v]
    if not meta.get(key("kda.safe_gate"), False):
        raise ValueError(f"metadata {key('kda.safe_gate')!r} is absent or false: llama.cpp's bailingmoe3 converter "
                         f"writes only the bounded (safe) forget gate")
    _kimi(meta, key, cfg, has)
    groups = cfg["num_expert_group"]
    cfg.update(model_type="bailing_hybrid", head_dim=cfg["linear_head_dim"],
               short_conv_kernel_size=cfg["linear_conv_kernel_dim"], kda_safe_gate=True,
               kda_lower_bound=get("kda.gate_lower_bound", kind=float), moe_renormalize=bool(meta.get(
                   key("expert_weights_norm"), False)),
               topk_group=get("expert_group_used_count", 1) if groups > 1 else 1, **limits)


LING3_LAYER = dict(KIMI_LAYER, attn_output="self_attn.o_proj", attn_gate="self_attn.g_proj",
                   ffn_gate_inp="mlp.gate", ffn_gate_shexp="mlp.shared_experts.gate_proj",
                   ffn_up_shexp="mlp.shared_experts.up_proj", ffn_down_shexp="mlp.shared_experts.down_proj")
# A stored as exp(A_log) [heads, 1] (the converter's; Kimi's is -exp): A_log in the family's shape
LING3_FIXES = {"ssm_a": Fix(shape=lambda s: (1, 1, int(np.prod(s)), 1), values=np.log, shift=False)}

HY_V4 = "hy_v4"
HC = {"hc_attn_": "attn_hc.", "hc_ffn_": "ffn_hc."}


def _hy_v4(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, HY_V4)

    limits = np.asarray(meta.get(key("swiglu_clamp_exp"), [0.0]), np.float32).reshape(-1)
    if not (limits == limits[0]).all() or limits[0] <= 0:
        raise ValueError(f"metadata {key('swiglu_clamp_exp')!r} is {limits.tolist()[:8]}: the hy_v4 family clamps "
                         f"every layer's experts at one positive limit")
    _deepseek32(meta, key, cfg, has)
    cfg.update(model_type=HY_V4, hc_mult=get("hyper_connection.count"), hc_eps=get("hyper_connection.epsilon",
                                                                                   kind=float),
               hc_magnitude=get("hyper_connection.magnitude", kind=float), swiglu_limit=float(limits[0]),
               indexer_types=indexer_types(meta, key, cfg["num_hidden_layers"], HY_V4))


def _hc_names(tensors, cfg) -> dict:
    """{GGUF name: HF name} of the hyper-connections' tensors (the family reads them without `.weight`)."""
    out = {f"output_hc_{w}.weight": f"model.hc_head.hc_{w}" for w in ("fn", "base", "scale")}
    for i in range(cfg["num_hidden_layers"]):
        out.update({f"blk.{i}.{g}{w}.weight": f"model.layers.{i}.{h}{w}" for g, h in HC.items()
                    for w in ("fn", "base", "scale")})
    return {k: v for k, v in out.items() if k in tensors}


def _indexer_rope_first(cfg) -> dict:
    """Each indexer head's rows (and the key norm's values) with the rotated last ones first, as the family reads."""
    perm = rope_first(cfg["index_head_dim"], cfg["qk_rope_head_dim"])

    def fix(heads):
        return Fix(values=lambda w: np.ascontiguousarray(w.reshape(heads, len(perm), -1)[:, perm].reshape(w.shape)),
                   shift=False)

    return {"indexer.attn_q_b.weight": fix(cfg["index_n_heads"]), "indexer.attn_k.weight": fix(1),
            "indexer.k_norm.weight": fix(1), "indexer.k_norm.bias": fix(1)}


_DSA = _dsa_arch(HY_V4, _hy_v4)

FAM36Q5_ARCHS = {
    LING3: GGUFArch("bailing_hybrid", LING3_LAYER,
                    whole_names=dict(KIMI_WHOLE, **{"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"}),
                    experts=dict(QWEN_EXPERTS, attn_k_b="self_attn.k_absorb.{}", attn_v_b="self_attn.v_absorb.{}"),
                    fixes=LING3_FIXES, joins=_mla_joins, derived=_kda_derived, extra=_bailingmoe3,
                    own_head_sizes=True, layer_arrays=("attention.head_count_kv",)),
    HY_V4: GGUFArch(HY_V4, dict(_DSA.layer_names, attn_gate="self_attn.gate_proj"),
                    whole_names=dict(_DSA.whole_names, **{"attn_sinks.weight": "self_attn.sinks"}),
                    experts=_DSA.experts, expert_key=_DSA.expert_key, joins=_DSA.joins, extra=_hy_v4,
                    own_head_sizes=True, meta_tensors=_DSA.meta_tensors, config_names=_hc_names,
                    cfg_fixes=_indexer_rope_first),
    "baichuan": GGUFArch("llama", LLAMA_LAYER, rope_pairs=True, extra=_baichuan),
    HY_V3: GGUFArch(HY_V3, EXAONE_MOE_LAYER, whole_names={"exp_probs_b": BIAS}, experts=QWEN_EXPERTS, extra=_hy_v3,
                    meta_tensors=_zero_bias),
}


def fam36q_archs(archs: dict) -> dict:
    """The group's architectures; codeshell from StarCoder2's reading in `archs` (gguf_archs.ARCHS)."""
    return {**FAM36Q5_ARCHS, "codeshell": GGUFArch("starcoder2", STARCODER2_LAYER, splits={"attn_qkv": QKV},
                                                   extra=_codeshell(archs["starcoder2"].extra))}
