"""GGUF files of the latent-attention group of issue 30 (llama.cpp's deepseek32 and glm-dsa: DeepSeek-V3.2 and GLM-5,
DeepSeek Sparse Attention over deepseek2's latent attention), read as Petit's deepseek_v32 and glm_moe_dsa families.
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
"""
import numpy as np

from petit.loading.gguf_moe import MOE_ARCHS, _deepseek2
from petit.loading.gguf_names import GGUFArch

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
    n = cfg["num_hidden_layers"]
    types = meta.get(key("attention.indexer.types"))
    if types is None:
        if cfg.get("max_position_embeddings", 0) >= 1048576:
            raise ValueError(f"metadata {key('attention.indexer.types')!r} is missing and the training context is "
                             f"1048576 or more: llama.cpp then takes GLM-5.2's own table of shared layers, which "
                             f"Petit does not guess")
        types = [True] * n
    types = [bool(x) for x in np.asarray(types).reshape(-1).tolist()]
    if len(types) != n:
        raise ValueError(f"metadata {key('attention.indexer.types')!r} has {len(types)} values for {n} layers")
    cfg.update(model_type="glm_moe_dsa", indexer_types=["full" if t else "shared" for t in types])


_DS2 = MOE_ARCHS["deepseek2"]


def _dsa_arch(model_type: str, extra) -> GGUFArch:
    return GGUFArch(model_type, _DS2.layer_names, whole_names=dict(_DS2.whole_names, **INDEXER_NAMES),
                    experts=_DS2.experts, expert_key=_DS2.expert_key, joins=_DS2.joins, extra=extra,
                    own_head_sizes=True, meta_tensors=_DS2.meta_tensors)


MLA5_ARCHS = {
    "deepseek32": _dsa_arch("deepseek_v32", _deepseek32),
    "glm-dsa": _dsa_arch("glm_moe_dsa", _glm_dsa),
}
