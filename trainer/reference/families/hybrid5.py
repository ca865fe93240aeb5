"""The hybrid group of issue 30 (state-space hybrids transformers 5 has natively), each written from its
transformers 5.25 modeling file: bamba (Mamba-2 mixers and attention layers by attn_layer_indices, RoPE on the first
half of each head, a SwiGLU feed_forward after pre_ff_layernorm in every layer, the gated norm per group)."""
from trainer.reference.families.common import activation, get, heads, rms, rope
from trainer.reference.spec import LayerSpec, Mamba2Spec, ModelSpec


def _limit(cfg) -> tuple:
    lim = cfg.get("time_step_limit") or (0.0, None)
    return tuple(float("inf") if v is None else float(v) for v in lim)


def bamba(cfg, names):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-5)
    spec = ModelSpec("bamba", H, KV, hd, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.final_layernorm", eps), act=activation(cfg, "hidden_act", "silu"))
    r = rope(cfg, int(hd * 0.5))                          # BambaConfig hard-codes partial_rotary_factor 0.5
    attn = set(cfg.get("attn_layer_indices") or ())
    n_heads, groups = get(cfg, "mamba_n_heads", 128), get(cfg, "mamba_n_groups", 1)
    state = get(cfg, "mamba_d_state", 256)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        mlp = {n: f"{p}feed_forward.{n}_proj.weight" for n in ("gate", "up", "down")}
        if i in attn:
            a = p + "self_attn."
            L = LayerSpec(q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "o_proj.weight",
                          rope=r, **mlp)
        else:
            m = p + "mamba."
            L = LayerSpec(q=None, k=None, v=None, o=None, **mlp,
                          mamba2=Mamba2Spec(m + "in_proj.weight", m + "conv1d.weight",
                                            m + "conv1d.bias" if get(cfg, "mamba_conv_bias", True) else None,
                                            m + "dt_bias", m + "A_log", m + "D", m + "norm.weight",
                                            m + "out_proj.weight", n_heads, groups, state, eps, _limit(cfg),
                                            norm_groups=groups))
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "pre_ff_layernorm", eps)
        spec.layers.append(L)
    return spec


FAMILIES = {"bamba": bamba}
