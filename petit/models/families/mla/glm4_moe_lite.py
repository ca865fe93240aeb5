"""GLM-4.7-Flash (`glm4_moe_lite`, `zai-org/GLM-4.7-Flash`): DeepSeek-V3's multi-head latent attention (low-rank
query behind `q_a_layernorm`, the compressed key / value latent in the cache, the rope part rotated on adjacent pairs
with `rope_interleave`, the softmax scale (nope + rope)^-0.5 times yarn's mscale(factor, mscale_all_dim)^2 where the
RoPE is yarn) with GLM-4.5's experts, which are DeepSeek-V3's (`noaux_tc`): sigmoid scores, the choice on score +
`e_score_correction_bias` within the `topk_group` best of `n_group` groups (a group's best two summed), the chosen
sigmoids renormalised (`norm_topk_prob`) times `routed_scaling_factor`, plus `n_shared_experts` shared experts.

Which layers route is `mlp_layer_types` ("dense" / "sparse" per layer; transformers' default: layer 0 dense, the rest
sparse). transformers reads neither `first_k_dense_replace` nor `num_nextn_predict_layers`, which GLM-4.7-Flash's
config.json also holds (llama.cpp's converter reads them): the first is checked against `mlp_layer_types` when both
are given, the second names the multi-token-prediction layers stored past `num_hidden_layers`, which are not run (as
transformers, which skips them when loading). `attention_bias` (biases on q_a_proj, kv_a_proj_with_mqa and o_proj)
is refused: no released checkpoint has them."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.families.mla.deepseek_v3 import DeepseekV3Config


@dataclass(kw_only=True)
class Glm4MoeLiteConfig(DeepseekV3Config):
    moe_intermediate_size: int = 1536
    n_shared_experts: int | None = 1
    n_routed_experts: int | None = 64
    num_experts_per_tok: int | None = 4
    routed_scaling_factor: float = 1.8
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 768
    qk_rope_head_dim: int = 64
    v_head_dim: int = 256
    qk_nope_head_dim: int = 192
    n_group: int | None = 1
    topk_group: int | None = 1
    norm_topk_prob: bool = True
    max_position_embeddings: int = 202752
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    mlp_layer_types: list | None = None
    first_k_dense_replace: int | None = None
    model_type: str = "glm4_moe_lite"
    # topk_method ("noaux_tc" in the Hub's config.json): transformers reads none, its router is always noaux_tc
    _IGNORED = DeepseekV3Config._IGNORED | {"output_router_logits", "topk_method"}

    def _validate(self):
        n = self.num_hidden_layers
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["dense"] + ["sparse"] * (n - 1)       # transformers' default
        types = self.mlp_layer_types
        if not isinstance(types, list) or len(types) != n or any(t not in ("dense", "sparse") for t in types):
            raise ValueError(f"config: mlp_layer_types must list {n} values, each 'dense' or 'sparse', got {types!r}")
        if self.first_k_dense_replace is not None:
            k = self.first_k_dense_replace
            if types != ["dense"] * k + ["sparse"] * (n - k):
                raise ValueError(f"config: first_k_dense_replace {k} contradicts mlp_layer_types {types} (transformers "
                                 f"runs mlp_layer_types, llama.cpp first_k_dense_replace)")
        if self.scoring_func != "sigmoid":
            raise ValueError(f"config: scoring_func {self.scoring_func!r} is not glm4_moe_lite's (sigmoid)")
        super()._validate()


def build(cfg: Glm4MoeLiteConfig, t):
    return dc.build(cfg, t, scoring="sigmoid", norm_topk=cfg.norm_topk_prob, group_score="top2_sum",
                    sel_bias=True, yarn_mscale=True, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0)


hf_tensors = dc.hf_tensors
Config = Glm4MoeLiteConfig
