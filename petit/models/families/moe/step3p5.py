"""Step 3.5 / 3.7's language model (`step3p5`: transformers' Step3p7TextModel, the text model of the `step3p7` wrapper;
StepFun's Step-3.5-Flash as its remote code names it): Laguna's decoder (petit/models/families/moe/laguna.py) with what
differs:

- every norm Gemma's, x (1 + w), q / k's per head too; the softmax scale `query_pre_attn_scalar`^-0.5 (default
  head_dim); each head's output x sigmoid(g_proj x) (one gate a head; Laguna's softplus);
- the sliding layers' query heads `num_sliding_attention_heads` (default `num_attention_heads`), or as a saved config's
  `per_layer_config` gives them (transformers reads that on reload), the full layers' `num_attention_heads`;
- RoPE per layer type (rope_parameters keyed by type; theta 1e4 on whole heads by default);
- the experts (MiniMax-M3's router): the top `num_experts_per_tok` of `n_routed_experts` on sigmoid(logits) +
  e_score_correction_bias, the chosen sigmoids renormalised, their sum x `moe_router_scaling_factor`, plus an
  ungated shared expert of `share_expert_dim`; `mlp_layer_types` default dense for layers 0-2, sparse after;
- the SwiGLU clamped after the activation, min(silu(g), l) * clamp(u, -l, l): the experts' l per layer from
  `swiglu_limits`, the shared expert's from `swiglu_limits_shared` (0 / null: none). transformers' dense layers take
  `swiglu_limits_shared` too: a dense layer with a limit is refused (no released checkpoint has one; Petit's dense MLP
  has no such clamp).

The release's config keys transformers reads as legacy (`moe_layers_enum`, `attention_other_setting`, per-layer
`rope_theta` / `partial_rotary_factors`, lists padded with the `num_nextn_predict_layers` multi-token-prediction
layers, which are not run) are read as it reads them; the weights under the release's names (`moe.gate_proj` 3-D,
`moe.router_bias`, `share_expert.*`, as save_pretrained writes them) or transformers' module names."""
from petit.models.families.moe import step3p5_config
from petit.models.blocks.common import Renamed, llama_like, window_of
from petit.models.blocks.moe import moe_weights, split_experts

Config = Step3p5Config = step3p5_config.Step3p5Config
RELEASE = ((".moe.gate.weight", ".mlp.gate.weight"), (".moe.router_bias", ".mlp.gate.e_score_correction_bias"),
           (".share_expert.", ".mlp.shared_experts."))


def _module_name(n: str) -> str:
    for a, b in RELEASE:
        n = n.replace(a, b)
    return n


def hf_tensors(cfg: Step3p5Config, ckpt) -> dict:
    """The experts' matrices one by one (from transformers' 3-D gate_up_proj / down_proj or the release's 3-D
    moe.gate_proj / up_proj / down_proj), the release's router, bias and shared-expert names as transformers'."""
    v = Renamed(ckpt, _module_name)
    E, F, D = cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size
    out, held = {}, {}
    for i, kind in enumerate(cfg.mlp_layer_types):
        p = f"model.layers.{i}."
        if kind != "sparse":
            continue
        if p + "mlp.experts.gate_up_proj" in v:
            out |= v.entries(split_experts(v, p, E, F, D, held=held))
            continue
        for x, shape in (("gate", (F, D)), ("up", (F, D)), ("down", (D, F))):
            src = f"{p}moe.{x}_proj.weight"
            for e in range(E):
                out[f"{p}mlp.experts.{e}.{x}_proj.weight"] = (shape, lambda s=src, e=e: _slice(ckpt, s, e, held),
                                                              [src])
    return v.aliases(out)


def _slice(ckpt, src: str, e: int, held: dict):
    if src not in held:
        held.clear()
        held[src] = ckpt.f32(src)
    return held[src][e]


def build(cfg: Step3p5Config, t):
    types, ropes, E = cfg.types(), cfg.ropes(), cfg.n_routed_experts
    heads = cfg.heads()

    def moe(i, p):
        if cfg.mlp_layer_types[i] != "sparse":
            return None
        m = moe_weights(t, p, cfg, n_experts=E, top_k=cfg.num_experts_per_tok, inter=cfg.moe_intermediate_size,
                        norm_topk=True, router="mlp.gate", experts="mlp.experts", shared="mlp.shared_experts",
                        shared_inter=cfg.share_expert_dim)
        m.scoring, m.routed_scale = "sigmoid", float(cfg.moe_router_scaling_factor)
        m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (E,))
        m.swiglu_limit, m.limit_after_act = float(cfg.swiglu_limits[i] or 0.0), True
        m.sh_swiglu_limit = float(cfg.swiglu_limits_shared[i] or 0.0)
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, norm_add=1.0, qk_norm="head", rope_for=lambda i: ropes[types[i]],
                     window_for=window_of(cfg, types), moe_for=moe, heads_for=lambda i: heads[i],
                     context_length=min(r.context_length for r in ropes.values()),
                     attn_scale=float(cfg.query_pre_attn_scalar) ** -0.5)
    for i, L in enumerate(dec.layers):
        L.attn_gate = t.weight(f"model.layers.{i}.self_attn.g_proj.weight", (heads[i], cfg.hidden_size))
        L.attn_gate_act, L.attn_gate_width = "sigmoid", cfg.head_dim
    return dec

