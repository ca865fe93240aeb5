"""DeepSeek-V2 (and V2-Lite): multi-head latent attention (petit/models/blocks/mla.py: the compressed latent is what the
KV cache holds), interleaved RoPE on the decoupled rope part with yarn, and mixture-of-experts layers from
`first_k_dense_replace` on (every `moe_layer_freq`-th): softmax over `n_routed_experts`, the top
`num_experts_per_tok` (group-limited with `topk_method` "group_limited_greedy": only the experts of the `topk_group`
groups whose best expert scores highest), weights times `routed_scaling_factor` (never renormalised: transformers'
V2 gate does not read `norm_topk_prob`), plus `n_shared_experts` shared experts as one MLP. transformers 4.57 scales
V2's attention by (nope + rope)^-0.5 only (its V3, and DeepSeek's own code, add yarn's mscale^2): Petit follows the
transformers port it is proven against."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc


@dataclass(kw_only=True)
class DeepseekV2Config(dc.DeepseekConfig):
    topk_method: str = "greedy"
    q_lora_rank: int | None = 1536
    model_type: str = "deepseek_v2"
    _IGNORED = dc.IGNORED | {"aux_loss_alpha", "seq_aux"}

    def _validate(self):
        dc.validate(self)
        if self.topk_method not in ("greedy", "group_limited_greedy"):
            raise ValueError(f"config: topk_method {self.topk_method!r} is not supported by the deepseek_v2 family "
                             f"(greedy, group_limited_greedy)")


def build(cfg: DeepseekV2Config, t):
    group = cfg.topk_method == "group_limited_greedy"
    return dc.build(cfg, t, scoring="softmax", norm_topk=False, group_score="max", sel_bias=False, yarn_mscale=False,
                    n_group=cfg.n_group if group else 0, topk_group=cfg.topk_group if group else 0)


hf_tensors = dc.hf_tensors
Config = DeepseekV2Config
