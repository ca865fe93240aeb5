"""Hybrids of linear or state-space mixers with attention, each written from its transformers modeling file:
qwen3_next (Gated DeltaNet layers, gated full attention, experts with a shared expert behind a sigmoid gate,
zero-centred norms), qwen3_5_text (the same block with a dense MLP), nemotron_h (one mixer per block: Mamba-2,
attention without position encoding, or a relu² MLP). In a `.petit` file the linear attention's projections are one
`linear_attn.in_proj` (rows q | k | v | z | b | a) and full attention's q_proj is split into the queries (`q_proj`)
and the output gates (`q_gate`), as the engine stores them."""
import math

from trainer.reference.families.common import get, heads, rms, rope
from trainer.reference.families.moe import _experts
from trainer.reference.spec import DeltaNetSpec, LayerSpec, Mamba2Spec, ModelSpec, MoeSpec


def qwen3_next(cfg, names, family="qwen3_next", *, add=1.0, attention=None, shared_gate=True):
    """`add` 1.0 for the zero-centred norms (0.0: plain x * w, Lara), `attention(kind, prefix)` an attention layer's
    LayerSpec fields (default: the gated full attention), `shared_gate` the shared expert's sigmoid gate."""
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % get(cfg, "full_attention_interval", 4) == 0
                                       else "linear_attention" for i in range(n)]
    spec = ModelSpec(family, H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps, add))
    r = rope(cfg, int(hd * get(cfg, "partial_rotary_factor", 0.25)))
    if attention is None:
        attention = lambda kind, a: dict({x: f"{a}{x}_proj.weight" for x in "qkvo"}, rope=r,  # noqa: E731
                                         attn_gate=a + "q_gate.weight")
    experts = get(cfg, "num_experts", 512 if family == "qwen3_next" else 0)       # Qwen3.5's dense models: none
    step, only = get(cfg, "decoder_sparse_step", 1), get(cfg, "mlp_only_layers", [])
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        if experts and i not in only and (i + 1) % step == 0:
            mlp = {"moe": MoeSpec(p + "mlp.gate.weight", _experts(p, "mlp", experts), cfg["num_experts_per_tok"],
                                  get(cfg, "norm_topk_prob", True),
                                  tuple(f"{p}mlp.shared_expert.{x}.weight" for x in ("gate_proj", "up_proj",
                                                                                      "down_proj")),
                                  p + "mlp.shared_expert_gate.weight" if shared_gate else None)}
        else:
            mlp = {x: f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
        if kind == "linear_attention":
            a = p + "linear_attn."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp, deltanet=DeltaNetSpec(
                a + "in_proj.weight", a + "conv1d.weight", a + "dt_bias", a + "A_log", a + "norm.weight",
                a + "out_proj.weight", get(cfg, "linear_num_key_heads", 16), get(cfg, "linear_num_value_heads", 32),
                get(cfg, "linear_key_head_dim", 128), get(cfg, "linear_value_head_dim", 128), eps))
        else:
            a = p + "self_attn."
            L = LayerSpec(**attention(kind, a), **mlp, q_norm=rms(a + "q_norm", eps, add),
                          k_norm=rms(a + "k_norm", eps, add))
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps, add), rms(p + "post_attention_layernorm", eps, add)
        spec.layers.append(L)
    return spec


def qwen3_5_text(cfg, names):
    return qwen3_next(cfg, names, "qwen3_5_text")


def nemotron_h(cfg, names):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    kinds = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}
    pattern = cfg.get("hybrid_override_pattern") or "".join(kinds.get(k, "?") for k in cfg["layers_block_type"])
    B = "backbone." if "backbone.embeddings.weight" in names else "model."
    spec = ModelSpec("nemotron_h", H, KV, hd, B + "embeddings.weight",
                     B + "embeddings.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms(B + "norm_f", eps), act="relu2")
    lim = cfg.get("time_step_limit") or [0.0, math.inf]
    lim = (lim[0], math.inf if lim[1] is None else lim[1])
    mh, groups = get(cfg, "mamba_num_heads", 128), get(cfg, "n_groups", 8)
    for i, kind in enumerate(pattern):
        p = f"{B}layers.{i}."
        m = p + "mixer."
        if kind == "M":
            L = LayerSpec(q=None, k=None, v=None, o=None, attn_norm=rms(p + "norm", eps), mamba2=Mamba2Spec(
                m + "in_proj.weight", m + "conv1d.weight", m + "conv1d.bias" if get(cfg, "use_conv_bias", True)
                else None, m + "dt_bias", m + "A_log", m + "D", m + "norm.weight", m + "out_proj.weight", mh, groups,
                get(cfg, "ssm_state_size", 128), eps, lim, norm_groups=groups))
        elif kind == "*":
            L = LayerSpec(**{x: f"{m}{x}_proj.weight" for x in "qkvo"}, attn_norm=rms(p + "norm", eps))
        elif kind == "-":
            L = LayerSpec(q=None, k=None, v=None, o=None, up=m + "up_proj.weight", down=m + "down_proj.weight",
                          mlp_norm=rms(p + "norm", eps))
        elif kind == "E":                    # issue 30, the moe_b group: plain experts, DeepSeek-V3's router
            if cfg.get("moe_latent_size") is not None:
                raise ValueError("the reference does not model nemotron_h's latent expert projections")
            E, groups = get(cfg, "n_routed_experts", 8), get(cfg, "n_group", 1)
            L = LayerSpec(q=None, k=None, v=None, o=None, mlp_norm=rms(p + "norm", eps), moe=MoeSpec(
                m + "gate.weight", [(None, f"{m}experts.{e}.up_proj.weight", f"{m}experts.{e}.down_proj.weight")
                                    for e in range(E)], get(cfg, "num_experts_per_tok", 2),
                get(cfg, "norm_topk_prob", True),
                (None, m + "shared_experts.up_proj.weight", m + "shared_experts.down_proj.weight"),
                scoring="sigmoid", sel_bias=m + "gate.e_score_correction_bias",
                n_group=groups if groups > 1 else 0, topk_group=get(cfg, "topk_group", 1) if groups > 1 else 0,
                group_score="top2_sum", routed_scale=get(cfg, "routed_scaling_factor", 1.0), plain=True))
        else:
            raise ValueError(f"the reference does not model nemotron_h's {kind!r} blocks")
        spec.layers.append(L)
    return spec


def qwen3_5(cfg, names):
    """A released Qwen3.5's text model, as Petit converts it: a flat config, the text model's names."""
    return qwen3_next(cfg, names, "qwen3_5")


FAMILIES = {"qwen3_next": qwen3_next, "qwen3_5_text": qwen3_5_text, "qwen3_5": qwen3_5, "nemotron_h": nemotron_h}
