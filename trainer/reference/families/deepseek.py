"""DeepSeek-V2 and V3, transformers' semantics: latent attention computed the plain way (each head's keys and values
decompressed from the latent, trainer/reference/forward.py), dense layers before first_k_dense_replace, and the
routed layers' choice: V2 softmax (group-limited by the groups' best expert with group_limited_greedy), never
renormalised; V3 the sigmoids plus e_score_correction_bias, limited to the groups of the best two such scores,
renormalised with norm_topk_prob; both times routed_scaling_factor, plus the shared experts. The tensors are those the
engine's hf_tensors derives (q_nope / q_pe, kv_c / kv_pe, k_absorb / v_absorb per head), as a .petit file holds them."""
from trainer.reference.families.common import get, rms, rope
from trainer.reference.spec import LayerSpec, MlaSpec, ModelSpec, MoeSpec, NormSpec


def _mscale(factor: float, m: float) -> float:
    import math
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def _deepseek(cfg, names, family: str, v3: bool, dsa=None, rope_interleaved: bool = True) -> ModelSpec:
    """dsa: dsa(i, self_attn prefix) -> the layer's DsaSpec (DeepSeek-V3.2, GLM-5), or None."""
    H = cfg["num_attention_heads"]
    dn, dr = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    eps = get(cfg, "rms_norm_eps", 1e-6)
    latent_eps = cfg.get("latent_norm_eps") or 1e-6       # Petit's key: a deepseek2 GGUF file's eps (llama.cpp)
    scale = (dn + dr) ** -0.5
    s = cfg.get("rope_scaling") or {}
    if v3 and s.get("rope_type", s.get("type")) == "yarn" and s.get("mscale_all_dim"):
        scale *= _mscale(float(s["factor"]), float(s["mscale_all_dim"])) ** 2
    spec = ModelSpec(family, H, 1, dr, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), attn_scale=scale)
    r = rope(cfg, dr, interleaved=rope_interleaved)
    E = cfg.get("n_routed_experts") or 0
    first, freq = get(cfg, "first_k_dense_replace", 0), get(cfg, "moe_layer_freq", 1)
    grouped = v3 or get(cfg, "topk_method", "greedy") == "group_limited_greedy"
    for i in range(cfg["num_hidden_layers"]):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        q_lora = cfg.get("q_lora_rank")
        mla = MlaSpec(a + "q_nope.weight", a + "q_pe.weight", a + "kv_c.weight", a + "kv_pe.weight",
                      NormSpec("rms", latent_eps, a + "kv_a_layernorm.weight"),
                      [f"{a}k_absorb.{h}.weight" for h in range(H)], [f"{a}v_absorb.{h}.weight" for h in range(H)],
                      a + "q_a_proj.weight" if q_lora else None,
                      NormSpec("rms", latent_eps, a + "q_a_layernorm.weight") if q_lora else None,
                      dsa(i, a) if dsa is not None else None)
        L = LayerSpec(q=None, k=None, v=None, o=a + "o_proj.weight", rope=r, mla=mla)
        types = cfg.get("mlp_layer_types")           # GLM-4.7-Flash, DeepSeek-V3.2: "dense" / "sparse" per layer
        if E and (types[i] == "sparse" if types is not None else i >= first and i % freq == 0):
            sh = p + "mlp.shared_experts."
            L.moe = MoeSpec(p + "mlp.gate.weight",
                            [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                             for e in range(E)], cfg["num_experts_per_tok"],
                            get(cfg, "norm_topk_prob", True) if v3 else False,
                            tuple(f"{sh}{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                            if cfg.get("n_shared_experts") else None,
                            scoring=get(cfg, "scoring_func", "sigmoid") if v3 else "softmax",
                            sel_bias=p + "mlp.gate.e_score_correction_bias" if v3 else None,
                            n_group=(get(cfg, "n_group", 1) or 1) if grouped else 0,
                            topk_group=(get(cfg, "topk_group", 1) or 1) if grouped else 0,
                            group_score="top2_sum" if v3 else "max",
                            routed_scale=float(get(cfg, "routed_scaling_factor", 1.0)))
        else:
            L.gate, L.up, L.down = (f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down"))
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm", eps), rms(p + "post_attention_layernorm", eps)
        spec.layers.append(L)
    return spec


def deepseek_v2(cfg, names):
    return _deepseek(cfg, names, "deepseek_v2", v3=False)


def deepseek_v3(cfg, names):
    return _deepseek(cfg, names, "deepseek_v3", v3=True)


FAMILIES = {"deepseek_v2": deepseek_v2, "deepseek_v3": deepseek_v3}
