"""The longcat group of issue 30: LongCat-Flash, written from transformers 5.25's modeling_longcat_flash. The config
is the one the engine writes (num_hidden_layers = 2 x num_layers: one entry per sublayer pair; intermediate_size the
dense MLPs' width), the tensors those of its .petit file (each latent attention's derived q_nope / q_pe / kv_c /
kv_pe / k_absorb / v_absorb under `self_attn.{0,1}.`, as petit/models/families/mla/longcat_flash.py reads them).

Per layer i: x += attn_0(norm(x)); m = norm(x); s = MoE(m); x += mlp_0(m); x += attn_1(norm(x)); x += mlp_1(norm(x));
x += s. The latent attention is DeepSeek-V3's with the query times sqrt(hidden / q_lora_rank) and the normed latent
times sqrt(hidden / kv_lora_rank), its latent norms at eps 1e-6; the MoE a softmax over the real and the
zero-computation experts, the top k of softmax + e_score_correction_bias, weights the softmax times
routed_scaling_factor, a zero-computation expert adding the token's input times its weight."""
from dataclasses import replace

from trainer.reference.families.common import get, rms, rope
from trainer.reference.spec import LayerSpec, MlaSpec, ModelSpec, MoeSpec, NormSpec


def _forward(f, ids):
    s = f.spec
    x = f.w(s.embed)[ids]
    for i in range(0, len(s.layers), 2):
        A, B = s.layers[i], s.layers[i + 1]
        x = x + f.attention(A, f.norm(x, A.attn_norm))
        m = f.norm(x, A.mlp_norm)
        short = f.moe(A, m)                   # the shortcut MoE (A.moe), held until the pair's end
        x = x + f.mlp(replace(A, moe=None), m)
        x = x + f.attention(B, f.norm(x, B.attn_norm))
        x = x + f.mlp(B, f.norm(x, B.mlp_norm)) + short
    return f.mm(f.norm(x, s.final_norm), s.head)


def longcat_flash(cfg, names):
    if get(cfg, "hidden_act", "silu") not in ("silu", "swish"):
        raise ValueError(f"the reference does not model hidden_act={cfg['hidden_act']!r}")
    H, D = cfg["num_attention_heads"], cfg["hidden_size"]
    dn, dr, qr, r = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    E, Z = cfg["n_routed_experts"], get(cfg, "zero_expert_num", 0)
    eps = get(cfg, "rms_norm_eps", 1e-5)
    s = cfg.get("rope_scaling") or {}
    scale = (dn + dr) ** -0.5
    if s.get("rope_type", s.get("type")) == "yarn" and s.get("mscale_all_dim"):
        import math
        f = float(s["factor"])
        scale *= (1.0 if f <= 1 else 0.1 * float(s["mscale_all_dim"]) * math.log(f) + 1.0) ** 2
    spec = ModelSpec("longcat_flash", H, 1, dr, "model.embed_tokens.weight",
                     "model.embed_tokens.weight" if get(cfg, "tie_word_embeddings", False) else "lm_head.weight",
                     rms("model.norm", eps), attn_scale=scale, forward=_forward)
    ro = rope(cfg, dr, interleaved=True)
    for i in range(cfg["num_hidden_layers"]):
        p, sub = f"model.layers.{i // 2}.", i % 2
        a, m = f"{p}self_attn.{sub}.", f"{p}mlps.{sub}."
        mla = MlaSpec(a + "q_nope.weight", a + "q_pe.weight", a + "kv_c.weight", a + "kv_pe.weight",
                      NormSpec("rms", 1e-6, a + "kv_a_layernorm.weight"),
                      [f"{a}k_absorb.{h}.weight" for h in range(H)], [f"{a}v_absorb.{h}.weight" for h in range(H)],
                      a + "q_a_proj.weight", NormSpec("rms", 1e-6, a + "q_a_layernorm.weight"),
                      q_scale=(D / qr) ** 0.5, kv_scale=(D / r) ** 0.5)
        L = LayerSpec(q=None, k=None, v=None, o=a + "o_proj.weight", rope=ro, mla=mla,
                                     gate=m + "gate_proj.weight", up=m + "up_proj.weight", down=m + "down_proj.weight",
                                     attn_norm=rms(f"{p}input_layernorm.{sub}", eps),
                                     mlp_norm=rms(f"{p}post_attention_layernorm.{sub}", eps))
        if sub == 0:                                # the shortcut MoE, on layer 2i (as the engine holds it)
            L.moe = MoeSpec(
                p + "mlp.router.classifier.weight",
                [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                 for e in range(E)], cfg["moe_topk"], False, sel_bias=p + "mlp.router.e_score_correction_bias",
                routed_scale=float(get(cfg, "routed_scaling_factor", 6.0)), n_zero=Z)
        spec.layers.append(L)
    return spec


FAMILIES = {"longcat_flash": longcat_flash}
