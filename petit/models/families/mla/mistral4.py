"""Mistral 4 (`mistral4`, Mistral4ForCausalLM: the text model of Mistral Small 4, released as a `mistral3` folder):
DeepSeek-V3 (petit/models/families/mla/deepseek_v3.py) under Mistral's names and defaults. What differs:

- the router (Mistral4TopkRouter) chooses on the softmax of the router logits with no e_score_correction_bias:
  deepseek_v3's `scoring_func` "softmax" without the bias (groups scored by their two best probabilities,
  `n_group` / `topk_group` 1 by default: no group limit; the chosen probabilities renormalised with
  `norm_topk_prob`, times `routed_scaling_factor`, default 1). transformers reads no `scoring_func`: one in the file
  is ignored;
- every query after RoPE x (1 + beta ln(1 + floor(p / n))), ministral3's scaling (beta: rope_parameters'
  `llama_4_scaling_beta`, n: its `original_max_position_embeddings`; kept as `llama_4_scaling`, which transformers
  cannot run without);
- rope_parameters' `partial_rotary_factor` is the rope part of a head, qk_rope_head_dim / (qk_nope_head_dim +
  qk_rope_head_dim) (the config writes it so): read as that, another value refused (transformers would rotate
  another width than the latent attention's rope part);
- the defaults: yarn RoPE (factor 128 over 8192 positions, mscale = mscale_all_dim = 1), every layer routed
  (`first_k_dense_replace` 0), the widths of Mistral Small 4."""
from dataclasses import dataclass, field

from petit.models.blocks import deepseek_common as dc
from petit.models.families.mla import deepseek_v3
from petit.models.blocks.moe import split_experts
from petit.models.families.dense.ministral3 import OWN_ROPE_KEYS, check_llama_4_scaling, with_llama_4_scaling


def _default_rope() -> dict:
    return {"rope_type": "yarn", "factor": 128.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0,
            "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0}


@dataclass(kw_only=True)
class Mistral4Config(deepseek_v3.DeepseekV3Config):
    vocab_size: int = 131072
    hidden_size: int = 4096
    intermediate_size: int = 12288
    num_hidden_layers: int = 36
    num_attention_heads: int = 32
    max_position_embeddings: int = 1048576
    kv_lora_rank: int = 256
    q_lora_rank: int | None = 1024
    qk_nope_head_dim: int = 64
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    moe_intermediate_size: int = 2048
    n_shared_experts: int | None = 1
    n_routed_experts: int | None = 128
    num_experts_per_tok: int | None = 4
    first_k_dense_replace: int = 0
    n_group: int | None = 1
    topk_group: int | None = 1
    routed_scaling_factor: float = 1.0
    scoring_func: str = "softmax"
    rope_scaling: dict | None = field(default_factory=_default_rope)
    partial_rotary_factor: float | None = None
    llama_4_scaling: list | None = field(default_factory=lambda: [0.1, 8192])    # [beta, n]: Petit's key
    model_type: str = "mistral4"
    _REQUIRED = ()              # transformers' Mistral4Config gives every size a default (Mistral Small 4's)
    _ROPE_SCALING_EXTRA = OWN_ROPE_KEYS | {"original_max_position_embeddings"}

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict):
            d = {k: v for k, v in d.items() if k != "scoring_func"}
        return super().from_dict(with_llama_4_scaling(d))

    def _validate(self):
        if isinstance(self.rope_scaling, dict):
            self.rope_scaling = {k: v for k, v in self.rope_scaling.items() if k not in OWN_ROPE_KEYS}
        super()._validate()
        check_llama_4_scaling(self)
        head = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.partial_rotary_factor is not None and int(head * self.partial_rotary_factor) != self.qk_rope_head_dim:
            raise ValueError(f"config: partial_rotary_factor {self.partial_rotary_factor!r} rotates "
                             f"{int(head * self.partial_rotary_factor)} of each head's {head} dims; the "
                             f"{self.model_type} family rotates the latent attention's rope part, qk_rope_head_dim "
                             f"{self.qk_rope_head_dim} (partial_rotary_factor {self.qk_rope_head_dim}/{head})")


def build(cfg: Mistral4Config, t):
    net = dc.build(cfg, t, scoring="softmax", norm_topk=cfg.norm_topk_prob, group_score="top2_sum", sel_bias=False,
                   yarn_mscale=True, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0)
    beta, n = cfg.llama_4_scaling
    if beta:
        for L in net.layers:
            L.temperature = (float(n), float(beta), 1)
    return net


def hf_tensors(cfg: Mistral4Config, ckpt) -> dict:
    """deepseek_v3's latent-attention tensors, and each routed expert's matrices from the 3-D `gate_up_proj` /
    `down_proj` transformers 5 saves Mistral 4's experts as (its per-expert names read as they are)."""
    out, held = dc.hf_tensors(cfg, ckpt), {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        if dc.sparse(cfg, i) and p + "mlp.experts.gate_up_proj" in ckpt:
            out |= split_experts(ckpt, p, cfg.n_routed_experts, cfg.moe_intermediate_size, cfg.hidden_size, held=held)
    return out


Config = Mistral4Config
