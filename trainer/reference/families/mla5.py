"""The latent-attention (mla) group of issue 30, transformers 5's definitions: glm4_moe_lite (GLM-4.7-Flash:
DeepSeek-V3's latent attention and router, the routed layers where mlp_layer_types says "sparse", by default every
layer but the first); deepseek_v32 (DeepSeek-V3.2: the same with DeepSeek Sparse Attention in every layer, its
indexer rotating by halves; mlp_layer_types from first_k_dense_replace, 3 by default); glm_moe_dsa (GLM-5: the same
with its indexer rotating adjacent pairs, and "shared" layers in indexer_types reusing the last full layer's choice).
"""
from trainer.reference.families.common import get
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.spec import DsaSpec, NormSpec


def _dsa(cfg, interleaved: bool, shared=lambda i: False):
    def spec(i, a):
        H, D, k = cfg.get("index_n_heads", 64), cfg.get("index_head_dim", 128), cfg.get("index_topk", 2048)
        if shared(i):
            return DsaSpec(None, None, None, None, H, D, k, interleaved)
        p = a + "indexer."
        return DsaSpec(p + "wq_b.weight", p + "wk.weight", NormSpec("layer", 1e-6, p + "k_norm.weight",
                                                                    p + "k_norm.bias"),
                       p + "weights_proj.weight", H, D, k, interleaved)
    return spec


def glm4_moe_lite(cfg, names):
    n = cfg["num_hidden_layers"]
    types = cfg.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n - 1)
    return _deepseek(dict(cfg, mlp_layer_types=types, n_group=get(cfg, "n_group", 1),
                          topk_group=get(cfg, "topk_group", 1),
                          routed_scaling_factor=get(cfg, "routed_scaling_factor", 1.8),
                          rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5)), names, "glm4_moe_lite", v3=True)


def deepseek_v32(cfg, names):
    n = cfg["num_hidden_layers"]
    k = min(get(cfg, "first_k_dense_replace", 3), n)
    types = cfg.get("mlp_layer_types") or ["dense"] * k + ["sparse"] * (n - k)
    c = dict(cfg, mlp_layer_types=types, n_group=get(cfg, "n_group", 8), topk_group=get(cfg, "topk_group", 4),
             routed_scaling_factor=get(cfg, "routed_scaling_factor", 2.5), rms_norm_eps=get(cfg, "rms_norm_eps", 1e-6))
    return _deepseek(c, names, "deepseek_v32", v3=True, dsa=_dsa(c, interleaved=False))


def glm_moe_dsa(cfg, names):
    n = cfg["num_hidden_layers"]
    k = min(get(cfg, "first_k_dense_replace", 3), n)
    types = cfg.get("mlp_layer_types") or ["dense"] * k + ["sparse"] * (n - k)
    index_types = cfg.get("indexer_types")
    if index_types is None:
        pattern = cfg.get("index_topk_pattern")
        if pattern is not None:
            index_types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
        else:
            freq, offset = max(get(cfg, "index_topk_freq", 1), 1), get(cfg, "index_skip_topk_offset", 2)
            index_types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    c = dict(cfg, mlp_layer_types=types, n_group=get(cfg, "n_group", 1), topk_group=get(cfg, "topk_group", 1),
             routed_scaling_factor=get(cfg, "routed_scaling_factor", 2.5), rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5),
             index_n_heads=get(cfg, "index_n_heads", 32))
    return _deepseek(c, names, "glm_moe_dsa", v3=True,
                     dsa=_dsa(c, interleaved=True, shared=lambda i: index_types[i] == "shared"))


def minicpm3(cfg, names):
    """MiniCPM3: DeepSeek-V2's latent attention with its rope part turned by halves, a dense MLP everywhere, and
    MiniCPM's scales (embeddings x scale_emb, residual branches x scale_depth / sqrt(layers), logits x dim_model_base
    / hidden); null v_head_dim / scale_depth / dim_model_base resolved as transformers does."""
    n, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    c = dict(cfg, n_routed_experts=None, tie_word_embeddings=get(cfg, "tie_word_embeddings", True),
             rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5),
             v_head_dim=cfg.get("v_head_dim") or D // cfg["num_attention_heads"])
    spec = _deepseek(c, names, "minicpm3", v3=True, rope_interleaved=False)     # v3: yarn's mscale, as transformers
    spec.embed_scale = float(get(cfg, "scale_emb", 12))
    spec.residual_scale = float(cfg.get("scale_depth") or n ** 0.5) / n ** 0.5
    spec.logit_scale = float(cfg.get("dim_model_base") or D) / D
    return spec


FAMILIES = {"glm4_moe_lite": glm4_moe_lite, "deepseek_v32": deepseek_v32, "glm_moe_dsa": glm_moe_dsa,
            "minicpm3": minicpm3}
