"""MiMo-V2-Flash (`mimo_v2_flash`): a Llama block whose attention differs per layer type (`layer_types`; by default
layer 0 and every 6th are full, the others slide over `sliding_window`) and whose MLPs after the dense ones
(`mlp_layer_types`) are routed experts chosen as GLM-4.5 / DeepSeek-V3 choose (`noaux_tc`), with no shared expert.

- q / k heads of `head_dim`, value heads of `v_head_dim` (narrower); the values times `attention_value_scale`;
- sliding layers have twice `num_key_value_heads` and a learned sink logit per query head (`attention_sink_bias`
  as transformers saves it, `sinks` in its module); full layers neither;
- partial RoPE (rotate-half on the first int(head_dim x `partial_rotary_factor`) dims), theta 5e6 by default in full
  layers and `rope_parameters.sliding_attention.rope_theta` in sliding ones.

Petit's attention has one head size and one kv head count: the loader pads the value heads and repeats a full
layer's kv heads (petit/models/families/moe/mimo_layout.py), exact, at the price of a wider cache; no kernel changed.
The keys of the release's config.json are read too (petit/models/families/moe/mimo_release.py)."""
from types import SimpleNamespace

from petit.models.blocks.common import default_rope, llama_like, window_of
from petit.models.families.moe.mimo_layout import padded_attention
from petit.models.blocks.moe import moe_weights
from petit.models.families.moe.mimo_v2_flash_config import MiMoV2FlashConfig

SINKS = ("self_attn.attention_sink_bias", "self_attn.sinks")     # transformers' saved name, its module's


def hf_tensors(cfg: MiMoV2FlashConfig, ckpt) -> dict:
    def name(i, which):
        return f"model.layers.{i}.self_attn.{which}_proj.weight"
    return {hf: (shape, make, [name(i, w)]) for hf, (shape, make, i, w) in
            padded_attention(vars(cfg), lambda i, w: ckpt.f32(name(i, w))).items()}


def _moe(cfg: MiMoV2FlashConfig, t, i: int, p: str):
    if cfg.mlp_layer_types[i] == "dense":
        return None
    m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                    inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                    experts="mlp.experts")
    m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
    m.n_group, m.topk_group = (cfg.n_group, cfg.topk_group) if cfg.n_group > 1 else (0, 0)
    m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.n_routed_experts,))
    return m


def build(cfg: MiMoV2FlashConfig, t):
    full = default_rope(cfg, dim=cfg.rotary_dim)
    local = default_rope(cfg, dim=cfg.rotary_dim, base=cfg.rope_local_base_freq, scaling=None)
    types = cfg.types
    run = SimpleNamespace(**{**vars(cfg), "num_key_value_heads": cfg.kv_heads})     # every layer's kv heads
    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size)
    net = llama_like(t, run, eps=cfg.rms_norm_eps,
                     rope_for=lambda i: local if types[i] == "sliding_attention" else full,
                     window_for=window_of(cfg, types), moe_for=lambda i, p: _moe(cfg, t, i, p),
                     context_length=full.context_length, intermediate_size=widest)
    for i, L in enumerate(net.layers):
        if types[i] == "sliding_attention":
            name = next((f"model.layers.{i}.{s}" for s in SINKS if t.has(f"model.layers.{i}.{s}")), None)
            if name is None:
                raise ValueError(f"model.layers.{i}: a sliding layer without its sinks ({' or '.join(SINKS)})")
            L.sinks = t.vec(name, (cfg.num_attention_heads,))
    return net


Config = MiMoV2FlashConfig
