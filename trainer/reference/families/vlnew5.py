"""The vlnew group of issue 36: the language models of multimodal checkpoints (their towers not run), as Petit
converts them (the text model alone: a flat config with the wrapper's or the text type's model_type, the text model's
tensor names; petit/models/blocks/wrapper.py). A text-only prompt gives every M-RoPE section the same position, so each
rotation is the plain RoPE the text model's own layout computes: paddleocr_vl_text (ERNIE 4.5's dense block rotating
halves, head_dim 128 by default), glm_ocr_text (GLM-4's block without attention biases, head_dim hidden / heads,
the whole head rotated by default), hunyuan_vl_text (Hunyuan V1 dense's, tied), granite4_vision_text and
granite_docling_text (Granite's, the latter under its own defaults), ernie4_5_vl_moe_text (ERNIE 4.5 MoE's block with
the text experts alone, no biases on them, sparse layers by mlp_layer_types; the converted file holds the text router
as [E, hidden] and the text row of the correction bias), cosmos3_edge_text (Arcee's block: Llama's attention, a
plain relu2 MLP; head_dim 128, RoPE base 1e8 by default), molmo2_text (Llama's block with q / k / v biases, q / k
RMSNorms per head or over the row, norm_after's post-norms, the scaled RoPE in rope_scaling_layers and the unscaled one
elsewhere), deepseek_ocr2_text (DeepSeek-V2's experts under Llama's attention: softmax, top k greedy or within the
best groups, x routed_scaling_factor, a shared SwiGLU), hy_v4_vl_text (fam36m5's hy_v4 under HYV4VLTextConfig's
defaults; the converted file's latent_norm_eps is its rms_norm_eps), kosmos_2_text_model (xglm's block with
LayerNorms of the heads' output and of the MLP's activation; the position table as the converted file holds it)."""
from trainer.reference.families.common import activation, get, heads, layer, rope, under
from trainer.reference.families.fam36m5 import hy_v4
from trainer.reference.families.llama import granite, llama_like
from trainer.reference.families.llama_variants import arcee, glm4, hunyuan_v1_dense
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec

COSMOS = dict(num_key_value_heads=8, head_dim=128, max_position_embeddings=131072, rope_theta=1e8, rms_norm_eps=1e-5,
              hidden_act="relu2")
HYV4VL = dict(hidden_size=6144, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=78,
              num_attention_heads=64, q_lora_rank=2048, index_n_heads=32)
GLM_OCR = dict(head_dim=None, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
               partial_rotary_factor=1.0, attention_bias=False)
HUNYUAN_VL = dict(tie_word_embeddings=True)
DOCLING = dict(num_key_value_heads=4, max_position_embeddings=32768, rms_norm_eps=1e-5, tie_word_embeddings=True,
               embedding_multiplier=12.0, logits_scaling=4.0, residual_multiplier=0.263, attention_multiplier=0.015625)


def paddleocr_vl_text(cfg, names, family="paddleocr_vl_text"):
    bias = get(cfg, "use_bias", False)
    cfg = dict(cfg, head_dim=get(cfg, "head_dim", 128), rope_theta=get(cfg, "rope_theta", 5e5))
    r = rope(cfg, heads(cfg)[2])
    return llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=bias, rope_of=lambda i: r, tied=True)


def _glm_ocr(cfg, names):
    cfg = dict(cfg)
    if cfg.get("head_dim") is None:
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    return glm4(cfg, names)


def ernie4_5_vl_moe_text(cfg, names, family="ernie4_5_vl_moe_text"):
    bias, E, n = get(cfg, "use_bias", False), cfg["moe_num_experts"], cfg["num_hidden_layers"]
    types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    three = ("gate_proj", "up_proj", "down_proj")

    def moe_of(i, p):
        if types[i] != "sparse":
            return None
        sh = f"{p}mlp.shared_experts."
        return MoeSpec(p + "mlp.gate.weight", [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in three)
                                               for e in range(E)], cfg["moe_k"], True,
                       tuple(f"{sh}{x}.weight" for x in three) if get(cfg, "moe_num_shared_experts", 2) else None,
                       sel_bias=p + "mlp.moe_statics.e_score_correction_bias",
                       shared_b=tuple(f"{sh}{x}.bias" for x in three) if bias else None)
    cfg = dict(cfg, rope_theta=get(cfg, "rope_theta", 5e5))
    r = rope(cfg, heads(cfg)[2], interleaved=True)
    return llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=bias, rope_of=lambda i: r, moe_of=moe_of, tied=True)


def molmo2_text(cfg, names, family="molmo2_text"):
    n = cfg["num_hidden_layers"]
    cfg = dict(cfg, head_dim=get(cfg, "head_dim", 128))
    hd = heads(cfg)[2]
    scaled, unscaled = rope(cfg, hd), rope(cfg, hd, scaling=None)
    on = set(get(cfg, "rope_scaling_layers", list(range(n))))
    spec = llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-6),
                      qkv_bias=get(cfg, "attention_bias", False),
                      rope_of=lambda i: scaled if i in on else unscaled,
                      qk_norm="head" if get(cfg, "qk_norm_type", "qwen3") == "qwen3" else "full")
    if get(cfg, "norm_after", False):
        for L in spec.layers:
            L.post_attn_norm, L.post_mlp_norm, L.attn_norm, L.mlp_norm = L.attn_norm, L.mlp_norm, None, None
    return spec


def deepseek_ocr2_text(cfg, names, family="deepseek_ocr2_text"):
    E, bias = cfg["n_routed_experts"], get(cfg, "mlp_bias", False)
    types = cfg["mlp_layer_types"]
    group = get(cfg, "topk_method", "greedy") == "group_limited_greedy" and (cfg.get("n_group") or 0) > 1
    three = ("gate_proj", "up_proj", "down_proj")

    def moe_of(i, p):
        if types[i] != "sparse":
            return None
        sh = f"{p}mlp.shared_experts."
        return MoeSpec(p + "mlp.gate.weight", [tuple(f"{p}mlp.experts.{e}.{x}.weight" for x in three)
                                               for e in range(E)], cfg["num_experts_per_tok"], False,
                       tuple(f"{sh}{x}.weight" for x in three),
                       routed_scale=float(get(cfg, "routed_scaling_factor", 1)),
                       n_group=cfg["n_group"] if group else 0, topk_group=cfg["topk_group"] if group else 0,
                       shared_b=tuple(f"{sh}{x}.bias" for x in three) if bias else None)
    cfg = dict(cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"])
    r = rope(cfg, heads(cfg)[2])
    att = get(cfg, "attention_bias", False)
    return llama_like(cfg, names, family, eps=get(cfg, "rms_norm_eps", 1e-6), qkv_bias=att, o_bias=att,
                      mlp_bias=bias, rope_of=lambda i: r, moe_of=moe_of)


def kosmos_2_text_model(cfg, names, family="kosmos_2_text_model"):
    D, H, P, eps = cfg["embed_dim"], cfg["attention_heads"], "model.", get(cfg, "layer_norm_eps", 1e-5)
    tied = get(cfg, "tie_word_embeddings", True)
    spec = ModelSpec(family, H, H, D // H, P + "embed_tokens.weight", P + "embed_tokens.weight" if tied else
                     "lm_head.weight", layer(P + "layer_norm", eps, names),
                     act=activation(cfg, "activation_function", "gelu"), pos_embed=P + "embed_positions.weight",
                     embed_scale=D ** 0.5 if get(cfg, "scale_embedding", True) else 1.0)
    for i in range(cfg["layers"]):
        p = f"{P}layers.{i}."
        a, f = p + "self_attn.", p + "ffn."
        spec.layers.append(LayerSpec(
            q=a + "q_proj.weight", k=a + "k_proj.weight", v=a + "v_proj.weight", o=a + "out_proj.weight",
            q_b=a + "q_proj.bias", k_b=a + "k_proj.bias", v_b=a + "v_proj.bias", o_b=a + "out_proj.bias",
            up=f + "fc1.weight", up_b=f + "fc1.bias", down=f + "fc2.weight", down_b=f + "fc2.bias",
            attn_norm=layer(p + "self_attn_layer_norm", eps, names), mlp_norm=layer(p + "final_layer_norm", eps, names),
            o_norm=layer(a + "inner_attn_ln", eps, names), down_norm=layer(f + "ffn_layernorm", eps, names)))
    return spec


FAMILIES = {"paddleocr_vl_text": paddleocr_vl_text,
            "paddleocr_vl": lambda cfg, names: paddleocr_vl_text(cfg, names, "paddleocr_vl"),
            **{t: under(t, _glm_ocr, GLM_OCR) for t in ("glm_ocr_text", "glm_ocr")},
            **{t: under(t, hunyuan_v1_dense, HUNYUAN_VL) for t in ("hunyuan_vl_text", "hunyuan_vl")},
            **{t: under(t, granite, {}) for t in ("granite4_vision_text", "granite4_vision")},
            **{t: under(t, granite, DOCLING) for t in ("granite_docling_text", "granite_docling")},
            "ernie4_5_vl_moe_text": ernie4_5_vl_moe_text,
            "ernie4_5_vl_moe": lambda cfg, names: ernie4_5_vl_moe_text(cfg, names, "ernie4_5_vl_moe"),
            **{t: under(t, arcee, COSMOS) for t in ("cosmos3_edge_text", "cosmos3_edge")},
            "molmo2_text": molmo2_text, "molmo2": lambda cfg, names: molmo2_text(cfg, names, "molmo2"),
            "deepseek_ocr2_text": deepseek_ocr2_text,
            "deepseek_ocr2": lambda cfg, names: deepseek_ocr2_text(cfg, names, "deepseek_ocr2"),
            **{t: under(t, lambda cfg, names: hy_v4(dict(cfg, latent_norm_eps=get(cfg, "rms_norm_eps", 1e-5)), names),
                        HYV4VL) for t in ("hy_v4_vl_text", "hy_v4_vl")},
            "kosmos_2_text_model": kosmos_2_text_model,
            "kosmos-2": lambda cfg, names: kosmos_2_text_model(cfg, names, "kosmos-2")}
