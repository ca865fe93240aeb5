"""GGUF files of the latent-attention group of issue 30 (llama.cpp's deepseek32 and glm-dsa: DeepSeek-V3.2 and GLM-5,
DeepSeek Sparse Attention over deepseek2's latent attention; minicpm3), read as Petit's deepseek_v32, glm_moe_dsa and
minicpm3 families.
GLM-4.7-Flash is converted as `deepseek2` (gguf_moe.py). Imported by gguf_archs, whose ARCHS these join.

What the files hold and what llama.cpp assumes (src/models/deepseek32.cpp, glm-dsa.cpp, llama-kv-cache.cpp):

- everything deepseek2's reader reads (gguf_moe.py: the absorbed attn_k_b / attn_v_b, the router, the latent
  norms' eps the file's), and per layer the indexer: `indexer.attn_q_b` (wq_b), `indexer.attn_k` (wk),
  `indexer.k_norm` (a LayerNorm with bias, eps 1e-6 whatever the file), `indexer.proj` (weights_proj), with
  `attention.indexer.head_count`, `.key_length` and `.top_k`.
- deepseek32 rotates the indexer's q and k by halves (NEOX), glm-dsa on adjacent pairs (NORM), as transformers.
- llama.cpp multiplies the indexer's q and k by an orthogonal (Hadamard) matrix before their dot products, which
  leaves those products as they are but for rounding; it needs key_length to be a multiple of 64.
- glm-dsa: `attention.indexer.types` (one bool a layer, true: the layer runs its indexer; false: it reuses the
  previous full layer's choice); without it llama.cpp takes every layer full when the training context is under
  1048576 (GLM-5, 5.1) and GLM-5.2's own table otherwise, which Petit does not guess: such a file is refused.
  Without `expert_gating_func` glm-dsa routes with the sigmoid.
- minicpm3 (src/models/minicpm3.cpp): the converter writes MiniCPM3's tensors as they are (`attn_kv_b` fused, not
  split per head as deepseek2's), and llama.cpp's graph fixes MiniCPM's scales whatever the checkpoint says:
  embeddings x 12, each branch x 1.4 / sqrt(layers), the final hidden state x 256 / hidden (transformers: / (hidden
  / dim_model_base)), the value head size hidden / heads, the latent norms at the file's RMS eps, RoPE by halves.
  Petit reads the file so (its logits are llama.cpp's, which differ from the original model's where its config
  says otherwise); each head's W_uk^T is the transpose of its rows of `attn_kv_b` (computed at load, `derived`),
  its W_uv those rows themselves.
"""
import numpy as np

from petit.loading.gguf_moe import MOE_ARCHS, _deepseek2, _q_and_kv
from petit.loading.gguf_names import LLAMA_LAYER, GGUFArch

INDEXER_NAMES = {"indexer.attn_q_b.weight": "self_attn.indexer.wq_b.weight",
                 "indexer.attn_k.weight": "self_attn.indexer.wk.weight",
                 "indexer.k_norm.weight": "self_attn.indexer.k_norm.weight",
                 "indexer.k_norm.bias": "self_attn.indexer.k_norm.bias",
                 "indexer.proj.weight": "self_attn.indexer.weights_proj.weight"}


def _indexer(meta, key, cfg, arch: str) -> None:
    for k, field in (("attention.indexer.head_count", "index_n_heads"), ("attention.indexer.key_length",
                                                                         "index_head_dim"),
                     ("attention.indexer.top_k", "index_topk")):
        v = meta.get(key(k))
        if v is None:
            raise ValueError(f"metadata {key(k)!r} is missing: llama.cpp's {arch} requires it")
        cfg[field] = int(v)


def _deepseek32(meta, key, cfg, has):
    _deepseek2(meta, key, cfg, has)
    _indexer(meta, key, cfg, "deepseek32")
    cfg["model_type"] = "deepseek_v32"


def _glm_dsa(meta, key, cfg, has):
    if meta.get(key("expert_gating_func")) is None:
        meta = dict(meta, **{key("expert_gating_func"): 2})         # glm-dsa's default: the sigmoid
    _deepseek2(meta, key, cfg, has)
    _indexer(meta, key, cfg, "glm-dsa")
    if meta.get(key("attention.indexer.types")) is None and cfg.get("max_position_embeddings", 0) >= 1048576:
        raise ValueError(f"metadata {key('attention.indexer.types')!r} is missing and the training context is "
                         f"1048576 or more: llama.cpp then takes GLM-5.2's own table of shared layers, which "
                         f"Petit does not guess")
    cfg.update(model_type="glm_moe_dsa", indexer_types=indexer_types(meta, key, cfg["num_hidden_layers"], "glm-dsa"))


def indexer_types(meta, key, n: int, arch: str) -> list[str]:
    """`attention.indexer.types` (one bool a layer; absent: every layer runs its indexer) as the family's
    indexer_types, "full" or "shared" (the previous full layer's choice reused); glm-dsa and hy_v4."""
    types = meta.get(key("attention.indexer.types"))
    types = [True] * n if types is None else [bool(x) for x in np.asarray(types).reshape(-1).tolist()]
    if len(types) != n:
        raise ValueError(f"metadata {key('attention.indexer.types')!r} has {len(types)} values for {n} layers "
                         f"(llama.cpp's {arch})")
    return ["full" if t else "shared" for t in types]


_DS2 = MOE_ARCHS["deepseek2"]


def _dsa_arch(model_type: str, extra) -> GGUFArch:
    return GGUFArch(model_type, _DS2.layer_names, whole_names=dict(_DS2.whole_names, **INDEXER_NAMES),
                    experts=_DS2.experts, expert_key=_DS2.expert_key, joins=_DS2.joins, extra=extra,
                    own_head_sizes=True, meta_tensors=_DS2.meta_tensors)


def _minicpm3(meta, key, cfg, has):
    def get(k):
        v = meta.get(key(k))
        if v is None:
            raise ValueError(f"metadata {key(k)!r} is missing: llama.cpp's minicpm3 requires it")
        return int(v)
    rope, k_len = get("rope.dimension_count"), get("attention.key_length")
    if not 0 < rope < k_len or rope % 2:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} ({rope}) should be even and below "
                         f"{key('attention.key_length')!r} ({k_len})")
    for k in ("num_key_value_heads", "head_dim", "partial_rotary_factor"):
        cfg.pop(k, None)
    q_lora = meta.get(key("attention.q_lora_rank"))
    cfg.update(kv_lora_rank=get("attention.kv_lora_rank"), q_lora_rank=None if q_lora is None else int(q_lora),
               qk_rope_head_dim=rope, qk_nope_head_dim=k_len - rope,
               v_head_dim=cfg["hidden_size"] // cfg["num_attention_heads"],
               scale_emb=12.0, scale_depth=1.4, dim_model_base=256,          # llama.cpp's, fixed in its graph
               latent_norm_eps=float(cfg.get("rms_norm_eps", 1e-5)))


def _minicpm3_joins(tensors, cfg) -> dict:
    """q_nope / q_pe, kv_c / kv_pe as deepseek2's, and each head's W_uv: its value rows of attn_kv_b."""
    out = _q_and_kv(tensors, cfg)
    H, dn, dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    for i in range(cfg["num_hidden_layers"]):
        kvb = f"blk.{i}.attn_kv_b.weight"
        if kvb in tensors:
            for h in range(H):
                out[f"model.layers.{i}.self_attn.v_absorb.{h}.weight"] = [(kvb, (h * (dn + dv) + dn,
                                                                                (h + 1) * (dn + dv)))]
    return out


def _minicpm3_derived(tensors, cfg) -> dict:
    """Each head's W_uk^T [rank, nope]: the transpose of its key rows of attn_kv_b."""
    H, dn, dv, r = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"])
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        kvb = f"blk.{i}.attn_kv_b.weight"
        if kvb in tensors:
            for h in range(H):
                def make(rows, kvb=kvb, h=h):
                    return rows(kvb, h * (dn + dv), h * (dn + dv) + dn).T
                out[f"model.layers.{i}.self_attn.k_absorb.{h}.weight"] = ((r, dn), make, [kvb])
    return out


MLA5_ARCHS = {
    "minicpm3": GGUFArch("minicpm3", dict(LLAMA_LAYER, attn_q_a="self_attn.q_a_proj",
                                          attn_q_a_norm="self_attn.q_a_layernorm",
                                          attn_kv_a_norm="self_attn.kv_a_layernorm"),
                         joins=_minicpm3_joins, derived=_minicpm3_derived, extra=_minicpm3, own_head_sizes=True),
    "deepseek32": _dsa_arch("deepseek_v32", _deepseek32),
    "glm-dsa": _dsa_arch("glm_moe_dsa", _glm_dsa),
}
