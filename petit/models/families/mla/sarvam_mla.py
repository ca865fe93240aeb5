"""Sarvam-105B (`sarvam_mla`): transformers 5.25 runs it as DeepseekV3ForCausalLM
(petit/models/families/mla/deepseek_v3.py) under a config of its own, so the attention, router and tensor names are
DeepSeek-V3's. What differs is the config, which this family reads:

- transformers' defaults for Sarvam: no low-rank query (q_lora_rank null: one q_proj), routing over all experts at
  once (n_group 1, topk_group 1), 128 experts, the first layer dense, 4096 positions;
- the remote-code config's names: transformers' aliases `num_experts`, `num_local_experts`, `num_shared_experts`,
  `num_mtp_layers` (given twice they must agree); `moe_shared_expert_intermediate_size` (checked: n_shared_experts
  x moe_intermediate_size), `head_dim` (transformers derives it, qk_rope_head_dim; the remote files store
  kv_lora_rank + qk_rope_head_dim for vLLM) and `q_head_dim` (must be qk_nope + qk_rope, which transformers
  derives) read and dropped; rope_scaling type `deepseek_yarn`, which is yarn.
The multi-token-prediction layers (num_nextn_predict_layers) are not run: transformers builds none."""
from dataclasses import dataclass

from petit.models.families.mla import deepseek_v3
from petit.models.blocks.config import aliased
from petit.models.blocks.moe_config import shared_width

ALIASES = {"num_experts": "n_routed_experts", "num_local_experts": "n_routed_experts",
           "num_shared_experts": "n_shared_experts", "num_mtp_layers": "num_nextn_predict_layers"}


@dataclass(kw_only=True)
class SarvamMlaConfig(deepseek_v3.DeepseekV3Config):
    q_lora_rank: int | None = None
    n_group: int | None = 1
    topk_group: int | None = 1
    moe_intermediate_size: int = 2048
    n_shared_experts: int | None = 1
    n_routed_experts: int | None = 128
    num_experts_per_tok: int | None = 8
    first_k_dense_replace: int = 1
    model_type: str = "sarvam_mla"

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = aliased(d, ALIASES)
            shared_width(cls, d)
            nope, rope = d.get("qk_nope_head_dim", cls.qk_nope_head_dim), d.get("qk_rope_head_dim",
                                                                                cls.qk_rope_head_dim)
            if d.get("q_head_dim", nope + rope) != nope + rope:
                raise ValueError(f"config: q_head_dim {d['q_head_dim']!r} is not qk_nope_head_dim {nope!r} + "
                                 f"qk_rope_head_dim {rope!r}")
            d.pop("q_head_dim", None)
            d["head_dim"] = rope                    # transformers derives it; the remote files' value is vLLM's
            s = d.get("rope_scaling")
            if isinstance(s, dict) and "deepseek_yarn" in (s.get("type"), s.get("rope_type")):
                d["rope_scaling"] = {k: v for k, v in s.items() if k != "type"} | {"rope_type": "yarn"}
        return super().from_dict(d)


build = deepseek_v3.build
hf_tensors = deepseek_v3.hf_tensors
Config = SarvamMlaConfig
