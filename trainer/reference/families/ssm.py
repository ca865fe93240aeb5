"""The state-space families, transformers' semantics (its slow, pure-torch path), in float64: mamba, falcon_mamba
(weightless RMS norms of dt, B and C in each mixer), mamba2 (the SSD recurrence per head), and the hybrid lfm2 (short
convolutions and attention). A Mamba layer is x + mixer(RMSNorm(x)); the mixer's recurrence runs token by token over
the whole sequence from a zero state (trainer/reference/forward.py)."""
import math

from trainer.reference.families.common import get, rms
from trainer.reference.families.common import heads, rope
from trainer.reference.spec import LayerSpec, Mamba2Spec, MambaSpec, ModelSpec, NormSpec, ShortConvSpec


def _mamba(cfg, names, family: str, inner_norm: bool) -> ModelSpec:
    D = cfg["hidden_size"]
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    rank = cfg.get("time_step_rank", "auto")
    rank = math.ceil(D / 16) if rank == "auto" else int(rank)
    spec = ModelSpec(family, 1, 1, 1, "backbone.embeddings.weight",
                     "backbone.embeddings.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("backbone.norm_f", eps))
    for i in range(cfg["num_hidden_layers"]):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        L = LayerSpec(q=None, k=None, v=None, o=None,
                      mamba=MambaSpec(m + "in_proj.weight", m + "conv1d.weight",
                                      m + "conv1d.bias" if get(cfg, "use_conv_bias", True) else None,
                                      m + "x_proj.weight", m + "dt_proj.weight", m + "dt_proj.bias", m + "A_log",
                                      m + "D", m + "out_proj.weight", rank,
                                      get(cfg, "mixer_rms_eps", 1e-6) if inner_norm else None))
        L.attn_norm = rms(p + "norm", eps)
        spec.layers.append(L)
    return spec


def mamba(cfg, names):
    return _mamba(cfg, names, "mamba", False)


def falcon_mamba(cfg, names):
    return _mamba(cfg, names, "falcon_mamba", True)


def mamba2(cfg, names):
    eps = get(cfg, "layer_norm_epsilon", 1e-5)
    spec = ModelSpec("mamba2", 1, 1, 1, "backbone.embeddings.weight",
                     "backbone.embeddings.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("backbone.norm_f", eps))
    lim = tuple(float("inf") if v is None else float(v) for v in (cfg.get("time_step_limit") or (0.0, None)))
    for i in range(cfg["num_hidden_layers"]):
        p = f"backbone.layers.{i}."
        m = p + "mixer."
        L = LayerSpec(q=None, k=None, v=None, o=None,
                      mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                        m + "conv1d.bias" if get(cfg, "use_conv_bias", True) else None,
                                        m + "dt_bias", m + "A_log", m + "D", m + "norm.weight", m + "out_proj.weight",
                                        get(cfg, "num_heads", 128), get(cfg, "n_groups", 8),
                                        get(cfg, "state_size", 128), eps, lim,
                                        # Petit's key for llama.cpp's files: the gated norm per group
                                        norm_groups=get(cfg, "n_groups", 8) if get(cfg, "norm_per_group", False)
                                        else 1))
        L.attn_norm = rms(p + "norm", eps)
        spec.layers.append(L)

    return spec


def lfm2(cfg, names):
    """Conv layers (ShortConvSpec) and attention layers (per-head q / k RMS norms, half-split RoPE), each with a
    SwiGLU MLP (feed_forward.w1 / w3 / w2); the final norm is model.embedding_norm."""
    H, KV, hd = heads(cfg)
    eps = get(cfg, "norm_eps", 1e-5)
    spec = ModelSpec("lfm2", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", True) else "lm_head.weight",
                     rms("model.embedding_norm", eps))
    r = rope(cfg, hd)
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention" if i in (cfg.get("full_attn_idxs") or range(n)) else "conv"
                                       for i in range(n)]
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        ff = {n_: f"{p}feed_forward.{w}.weight" for n_, w in (("gate", "w1"), ("up", "w3"), ("down", "w2"))}
        if kind == "conv":
            c = p + "conv."
            L = LayerSpec(q=None, k=None, v=None, o=None, **ff,
                          short_conv=ShortConvSpec(c + "in_proj.weight", c + "conv.weight", c + "out_proj.weight"))
        else:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
                          rope=r, **ff)
            L.q_norm = NormSpec("rms", eps, a + "q_layernorm.weight")
            L.k_norm = NormSpec("rms", eps, a + "k_layernorm.weight")
        L.attn_norm, L.mlp_norm = rms(p + "operator_norm", eps), rms(p + "ffn_norm", eps)
        spec.layers.append(L)
    return spec


def granitemoehybrid(cfg, names):
    """Mamba-2 layers and attention layers (no RoPE unless position_embedding_type is "rope"), each followed by the
    routed experts and the shared MLP (or the shared MLP alone), with Granite's multipliers."""
    from trainer.reference.families.moe import _experts
    from trainer.reference.spec import MoeSpec
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    spec = ModelSpec("granitemoehybrid", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), embed_scale=get(cfg, "embedding_multiplier", 1.0),
                     attn_scale=get(cfg, "attention_multiplier", 1.0),
                     residual_scale=get(cfg, "residual_multiplier", 1.0),
                     logit_scale=1.0 / get(cfg, "logits_scaling", 1.0))
    r = rope(cfg, hd) if cfg.get("position_embedding_type") == "rope" else None
    types = cfg.get("layer_types") or cfg.get("layers_block_type")
    n_heads, groups = get(cfg, "mamba_n_heads", 128), get(cfg, "mamba_n_groups", 1)
    state = get(cfg, "mamba_d_state", 256)
    E = get(cfg, "num_local_experts", 8)
    for i, kind in enumerate(types):
        p = f"model.layers.{i}."
        shared = tuple(f"{p}shared_mlp.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
        if E:
            mlp = {"moe": MoeSpec(p + "block_sparse_moe.router.layer.weight", _experts(p, "block_sparse_moe", E),
                                  cfg["num_experts_per_tok"], True, shared)}
        else:
            mlp = dict(zip(("gate", "up", "down"), shared))
        if kind == "mamba":
            m = p + "mamba."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp,
                          mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                            m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                            m + "dt_bias", m + "A_log", m + "D", m + "norm.weight",
                                            m + "out_proj.weight", n_heads, groups, state, eps,
                                            norm_groups=groups if get(cfg, "mamba_norm_per_group", False) else 1))
        else:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          rope=r, **mlp)
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "post_attention_layernorm", eps)
        spec.layers.append(L)
    return spec


def falcon_h1(cfg, names):
    """Attention and a Mamba-2 mixer side by side in every layer, then a SwiGLU MLP. The µP multipliers that scale
    weights are folded into them in a .petit file (`<name>.mup.weight`, what the engine stores), so only the embedding
    and head multipliers are applied here; the gated norm per group, gate first or (mamba_norm_before_gate) after,
    or no norm (mamba_rms_norm false)."""
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec("falcon_h1", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.final_layernorm", eps), embed_scale=get(cfg, "embedding_multiplier", 1.0),
                     logit_scale=get(cfg, "lm_head_multiplier", 1.0))
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 1e5)), hd)
    n_heads, groups = get(cfg, "mamba_n_heads", 128), get(cfg, "mamba_n_groups", 1)
    mode = ("norm_first" if get(cfg, "mamba_norm_before_gate", True) else "gate_first") \
        if get(cfg, "mamba_rms_norm", False) else "none"
    M = ".mup.weight"
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        m, a, f = p + "mamba.", p + "self_attn.", p + "feed_forward."
        L = LayerSpec(q=a + "q_proj" + M, k=a + "k_proj" + M, v=a + "v_proj" + M, o=a + "o_proj" + M,
                      gate=f + "gate_proj" + M, up=f + "up_proj" + M, down=f + "down_proj" + M, rope=r,
                      mamba2=Mamba2Spec(m + "in_proj" + M, m + "conv1d.weight",
                                        m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                        m + "dt_bias", m + "A_log", m + "D",
                                        m + "norm.weight" if mode != "none" else None, m + "out_proj" + M,
                                        n_heads, groups, get(cfg, "mamba_d_state", 256), eps, norm_groups=groups,
                                        norm_mode=mode),
                      attn_norm=rms(p + "input_layernorm", eps), mlp_norm=rms(p + "pre_ff_layernorm", eps))
        spec.layers.append(L)
    return spec


def jamba(cfg, names):
    """Mamba-1 layers (weighted RMS norms of dt, B and C) and NoPE attention layers by attn_layer_period / offset,
    each followed by a dense SwiGLU or, by expert_layer_period / offset, routed experts (softmax over all, top-k, not
    renormalised)."""
    from trainer.reference.families.moe import _experts
    from trainer.reference.spec import MoeSpec
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    spec = ModelSpec("jamba", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.final_layernorm", eps))
    D = cfg["hidden_size"]
    rank = cfg.get("mamba_dt_rank", "auto")
    rank = math.ceil(D / 16) if rank == "auto" else int(rank)
    E = get(cfg, "num_experts", 16)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if E > 1 and i % get(cfg, "expert_layer_period", 2) == get(cfg, "expert_layer_offset", 1):
            mlp = {"moe": MoeSpec(p + "feed_forward.router.weight", _experts(p, "feed_forward", E),
                                  get(cfg, "num_experts_per_tok", 2), False)}
        else:
            mlp = {n: f"{p}feed_forward.{n}_proj.weight" for n in ("gate", "up", "down")}
        if i % get(cfg, "attn_layer_period", 8) == get(cfg, "attn_layer_offset", 4):
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          **mlp)
        else:
            m = p + "mamba."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp,
                          mamba=MambaSpec(m + "in_proj.weight", m + "conv1d.weight",
                                          m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                          m + "x_proj.weight", m + "dt_proj.weight", m + "dt_proj.bias", m + "A_log",
                                          m + "D", m + "out_proj.weight", rank, eps,
                                          (m + "dt_layernorm.weight", m + "b_layernorm.weight",
                                           m + "c_layernorm.weight")))
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "pre_ff_layernorm", eps)
        spec.layers.append(L)
    return spec


FAMILIES = {"falcon_h1": falcon_h1, "mamba": mamba, "falcon_mamba": falcon_mamba, "mamba2": mamba2, "lfm2": lfm2,
            "granitemoehybrid": granitemoehybrid, "jamba": jamba}
