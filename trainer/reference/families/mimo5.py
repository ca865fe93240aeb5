"""The mimo group of issue 30: MiMo-V2-Flash (`mimo_v2_flash`), written from transformers 5.25's
modeling_mimo_v2_flash and read in the layout Petit stores (petit/models/families/moe/mimo_v2_flash.py): every layer
with the sliding layers' 2 x num_key_value_heads kv heads (a full layer's heads each stored twice), value heads padded
to head_dim with zero rows (attention_value_scale folded in) and o_proj's matching zero columns. A Llama block with
attention sinks in the sliding layers only, partial rotate-half RoPE (theta rope_theta in full layers,
rope_local_base_freq in sliding ones), a dense SwiGLU where mlp_layer_types says dense, else DeepSeek-V3's
group-limited sigmoid routing (e_score_correction_bias, top-2-sum group scores, renormalised, x routed_scaling_factor)
with no shared expert."""
from trainer.reference.families.common import get, heads, layer_types, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.spec import MoeSpec

SINKS = ("self_attn.attention_sink_bias", "self_attn.sinks")


def mimo_v2_flash(cfg, names):
    H, KV, hd = heads(cfg)
    L = cfg["num_hidden_layers"]
    types = layer_types(cfg, lambda i: "full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention")
    mlp = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (L - 1)
    dim = int(hd * get(cfg, "partial_rotary_factor", 0.334))
    full, local = rope(cfg, dim), rope(cfg, dim, theta=get(cfg, "rope_local_base_freq", 10000.0), scaling=None)
    E, groups = get(cfg, "n_routed_experts", 256), get(cfg, "n_group", 1)
    run = dict(cfg, num_key_value_heads=2 * KV if "sliding_attention" in types else KV)

    def moe(i, p):
        if mlp[i] == "dense":
            return None
        return MoeSpec(p + "mlp.gate.weight",
                       [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                        for e in range(E)], get(cfg, "num_experts_per_tok", 8), get(cfg, "norm_topk_prob", True),
                       scoring="sigmoid", sel_bias=p + "mlp.gate.e_score_correction_bias",
                       n_group=groups if groups > 1 else 0, topk_group=get(cfg, "topk_group", 1) if groups > 1 else 0,
                       group_score="top2_sum", routed_scale=get(cfg, "routed_scaling_factor", None) or 1.0)
    slide = lambda i: types[i] == "sliding_attention"       # noqa: E731
    spec = llama_like(run, names, "mimo_v2_flash", eps=get(cfg, "rms_norm_eps", 1e-5),
                      rope_of=lambda i: local if slide(i) else full,
                      window_of=lambda i: cfg.get("sliding_window", 129) if slide(i) else 0, moe_of=moe)
    for i, layer in enumerate(spec.layers):
        if slide(i):
            layer.sinks = next(n for n in (f"model.layers.{i}.{s}" for s in SINKS) if n in names)
    return spec


FAMILIES = {"mimo_v2_flash": mimo_v2_flash}
