"""DeepSeek-V3.2 (`deepseek_v32`, deepseek-ai/DeepSeek-V3.2-Exp, DeepSeek-V3.2): DeepSeek-V3 (latent attention with
the low-rank query, noaux_tc routing, shared experts; petit/models/families/mla/deepseek_v3.py) plus DeepSeek Sparse
Attention in every layer: a lightning indexer chooses, for each query, the `index_topk` cached positions the latent
attention attends to (petit/models/blocks/dsa.py; its scores and the attention over the chosen positions run in C,
kernels/dsa.c). The indexer rotates its query and key by halves (rotate_half), the attention's rope part on adjacent
pairs.

The routed layers are where `mlp_layer_types` says "sparse" (transformers' default: from `first_k_dense_replace`
on, 3 by default); `layer_types` must be "indexed_attention" in every layer (transformers knows no other). As
transformers, the query always has its low rank (`q_lora_rank`) and the rope part is always interleaved."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.config import positive_int
from petit.models.families.mla.deepseek_v3 import DeepseekV3Config
from petit.models.blocks.dsa import dsa_weights


@dataclass(kw_only=True)
class DeepseekV32Config(DeepseekV3Config):
    moe_intermediate_size: int = 2048
    n_shared_experts: int | None = 1
    n_routed_experts: int | None = 256
    num_experts_per_tok: int | None = 8
    routed_scaling_factor: float = 2.5
    n_group: int | None = 8
    topk_group: int | None = 4
    norm_topk_prob: bool = True
    max_position_embeddings: int = 163840
    first_k_dense_replace: int = 3
    mlp_layer_types: list | None = None
    layer_types: list | None = None
    index_topk: int = 2048
    index_head_dim: int = 128
    index_n_heads: int = 64
    model_type: str = "deepseek_v32"
    # topk_method ("noaux_tc" in the Hub's config.json): transformers reads none, its router is always noaux_tc
    _IGNORED = DeepseekV3Config._IGNORED | {"output_router_logits", "topk_method"}
    _INDEXER_INTERLEAVED = False             # DeepSeek-V3.2's indexer rotates by halves
    _LAYER_TYPES = ("indexed_attention",)

    def _validate(self):
        n = self.num_hidden_layers
        if self.mlp_layer_types is None:
            k = min(self.first_k_dense_replace, n)
            self.mlp_layer_types = ["dense"] * k + ["sparse"] * (n - k)
        types = self.mlp_layer_types
        if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
            raise ValueError(f"config: mlp_layer_types must list {n} values, each 'dense' or 'sparse', got {types!r}")
        if self.layer_types is not None and (not isinstance(self.layer_types, list) or len(self.layer_types) != n
                                             or any(t not in self._LAYER_TYPES for t in self.layer_types)):
            raise ValueError(f"config: layer_types must list {n} values, each {' or '.join(self._LAYER_TYPES)}, "
                             f"got {self.layer_types!r}")
        if not self.q_lora_rank:
            raise ValueError(f"config: q_lora_rank must be set for {self.model_type} (its indexer reads the query's "
                             f"low-rank latent)")
        positive_int(self, "index_topk", "index_head_dim", "index_n_heads")
        if self.index_head_dim < self.qk_rope_head_dim:
            raise ValueError(f"config: index_head_dim {self.index_head_dim} is smaller than qk_rope_head_dim "
                             f"{self.qk_rope_head_dim}, which the indexer rotates")
        if self.scoring_func != "sigmoid":
            raise ValueError(f"config: scoring_func {self.scoring_func!r} is not {self.model_type}'s (sigmoid)")
        super()._validate()

    def shared_index(self, i: int) -> bool:
        """Layer i reuses the previous indexer's choice (GLM-5's "shared" layers; none here)."""
        return False


def build(cfg: DeepseekV32Config, t, **kw):
    """kw: what else dc.build takes (A.X-K2's q_cat and gated norms, issue 36 fam36m)."""
    interleaved = cfg._INDEXER_INTERLEAVED

    def dsa(i, a, rope, previous):
        source = None
        if cfg.shared_index(i):
            if previous is None:
                raise ValueError(f"config: layer {i} reuses the previous indexer's choice, but no layer before it "
                                 f"runs an indexer")
            source = previous.source or previous
        return dsa_weights(t, a, cfg, rope, interleaved, source)
    return dc.build(cfg, t, scoring="sigmoid", norm_topk=cfg.norm_topk_prob, group_score="top2_sum",
                    sel_bias=True, yarn_mscale=True, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0,
                    dsa=dsa, **kw)


hf_tensors = dc.hf_tensors
Config = DeepseekV32Config
