"""GLM-5 (`glm_moe_dsa`, zai-org/GLM-5): DeepSeek-V3.2's layer (latent attention with DeepSeek Sparse Attention,
DeepSeek-V3's experts; petit/models/families/mla/deepseek_v32.py) with GLM's sizes and defaults (one expert group,
RMSNorm eps 1e-5), an indexer that rotates its query and key on adjacent pairs (as the attention's rope part), and
cross-layer top-k sharing: `indexer_types` says per layer "full" (the layer runs its indexer) or "shared" (no indexer:
it attends to the positions the previous full layer chose for the same query). Without `indexer_types`, transformers
derives it from `index_topk_pattern` ("F" / "S" per layer) or from `index_topk_freq` / `index_skip_topk_offset` (layer i
is full when max(i - offset + 1, 0) is a multiple of freq; by default every layer), and so does Petit."""
from dataclasses import dataclass

from petit.models.families.mla import deepseek_v32
from petit.models.families.mla.deepseek_v32 import DeepseekV32Config


@dataclass(kw_only=True)
class GlmMoeDsaConfig(DeepseekV32Config):
    moe_intermediate_size: int = 2048
    n_routed_experts: int | None = 256
    num_experts_per_tok: int | None = 8
    routed_scaling_factor: float = 2.5
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 2048
    qk_rope_head_dim: int = 64
    v_head_dim: int = 256
    qk_nope_head_dim: int = 192
    n_group: int | None = 1
    topk_group: int | None = 1
    max_position_embeddings: int = 202752
    rms_norm_eps: float = 1e-5
    index_n_heads: int = 32
    indexer_types: list | None = None
    index_topk_pattern: object = None
    index_topk_freq: int = 1
    index_skip_topk_offset: int = 2
    model_type: str = "glm_moe_dsa"
    _INDEXER_INTERLEAVED = True             # GLM-5's indexer rotates adjacent pairs

    def _validate(self):
        n = self.num_hidden_layers
        if self.indexer_types is None:
            pattern = self.index_topk_pattern
            if pattern is not None:
                self.indexer_types = ([{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
                                      if isinstance(pattern, str) else list(pattern))
            else:
                freq, offset = max(self.index_topk_freq, 1), self.index_skip_topk_offset
                self.indexer_types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
        types = self.indexer_types
        if not isinstance(types, list) or len(types) != n or any(t not in ("full", "shared") for t in types):
            raise ValueError(f"config: indexer_types must list {n} values, each 'full' or 'shared', got {types!r}")
        if types[0] != "full":
            raise ValueError("config: indexer_types[0] is 'shared', but a shared layer reuses the choice of a full "
                             "layer before it")
        super()._validate()

    def shared_index(self, i: int) -> bool:
        return self.indexer_types[i] == "shared"


build = deepseek_v32.build
hf_tensors = deepseek_v32.hf_tensors
Config = GlmMoeDsaConfig
