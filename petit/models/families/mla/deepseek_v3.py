"""DeepSeek-V3 (and Kimi-K2, DeepSeek-R1's base): DeepSeek-V2's latent attention with the low-rank query
(`q_lora_rank`), and its softmax scale times yarn's mscale(factor, mscale_all_dim)^2; mixture-of-experts layers from
`first_k_dense_replace` on, routed by `noaux_tc`: the sigmoid of each router logit, the choice made on those plus
`e_score_correction_bias` and limited to the `topk_group` of `n_group` groups whose best two such scores sum highest,
the chosen sigmoids as the weights (renormalised with `norm_topk_prob`) times `routed_scaling_factor`, plus the shared
experts. `scoring_func` "softmax" (llama.cpp's deepseek2 files without `expert_gating_func`, which its loader
then runs with softmax scores) takes the softmax of the router logits in place of their sigmoid, the rest unchanged.
`rope_interleave` (the default) rotates the rope part's adjacent pairs, as V2; false is refused (no released
checkpoint). `latent_norm_eps`, Petit's own key, is the eps of the two latent norms (q_a_layernorm, kv_a_layernorm):
transformers fixes it at 1e-6 (null), llama.cpp's deepseek2 takes the file's rms eps for them (GLM-4.7-Flash's
files: 1e-5), and Petit follows the file it reads."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc


@dataclass(kw_only=True)
class DeepseekV3Config(dc.DeepseekConfig):
    max_position_embeddings: int = 4096
    q_lora_rank: int | None = 1536
    n_group: int | None = 8
    topk_group: int | None = 4
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.5
    scoring_func: str = "sigmoid"
    latent_norm_eps: float | None = None    # Petit's key (issue 30): q_a / kv_a_layernorm's eps, None: transformers'
    model_type: str = "deepseek_v3"
    _IGNORED = dc.IGNORED - {"scoring_func"}

    def _validate(self):
        dc.validate(self)
        if not self.rope_interleave:
            raise ValueError("config: rope_interleave false is not supported by the deepseek_v3 family (only true, "
                             "as every released checkpoint)")
        if self.scoring_func not in ("sigmoid", "softmax"):
            raise ValueError(f"config: scoring_func {self.scoring_func!r} is not supported by the deepseek_v3 family "
                             f"(sigmoid, softmax)")


def build(cfg: DeepseekV3Config, t):
    return dc.build(cfg, t, scoring=cfg.scoring_func, norm_topk=cfg.norm_topk_prob, group_score="top2_sum",
                    sel_bias=True, yarn_mscale=True, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0)


hf_tensors = dc.hf_tensors
Config = DeepseekV3Config
