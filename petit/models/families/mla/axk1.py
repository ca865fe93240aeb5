"""A.X-K1 (SK Telecom, `axk1`): DeepSeek-V3's model (petit/models/families/mla/deepseek_v3.py: latent attention,
`noaux_tc` routing within the `topk_group` best of `n_group` groups, shared experts) in GLM-4.7-Flash's decoder layer
(petit/models/families/mla/glm4_moe_lite.py: the routed layers listed by `mlp_layer_types`), with one change of its own:
the MoE block's output (routed plus shared experts) is RMS-normed (`post_mlp_layernorm`, the model's eps) before the
residual add. What else differs is the config:

- its defaults (192 experts, top 8 within 4 of 8 groups, x 2.5; 64 heads; q_lora_rank 1536);
- `mlp_layer_types` derived, when absent, from the legacy `first_k_dense_replace` (default 1) and `moe_layer_freq`
  (default 1) as transformers does: sparse where i >= first_k_dense_replace and i % moe_layer_freq == 0;
- `num_local_experts`, transformers' alias of `n_routed_experts`;
- the low-rank query is always there (`q_lora_rank` null is refused: transformers builds q_a_proj whatever it says).

The checkpoints store the norm at the decoder layer (`model.layers.N.post_mlp_layernorm`, which transformers renames
to `mlp.post_mlp_layernorm` at load and back when saving); either name is read. The released files also store it for
the dense layers, which do not use it (transformers ignores them; so does Petit), and route without a score correction
bias (transformers then keeps it zero: the choice on the sigmoids alone)."""
from dataclasses import dataclass

from petit.models.blocks import deepseek_common as dc
from petit.models.blocks.common import norm
from petit.models.blocks.config import aliased
from petit.models.families.mla.glm4_moe_lite import Glm4MoeLiteConfig

UNREAD = ("post_mlp_layernorm.weight",)     # a dense layer's, stored by the released files and never used


@dataclass(kw_only=True)
class AXK1Config(Glm4MoeLiteConfig):
    vocab_size: int = 163840
    hidden_size: int = 7168
    intermediate_size: int = 18432
    num_hidden_layers: int = 61
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 64
    moe_intermediate_size: int = 2048
    n_shared_experts: int | None = 1
    n_routed_experts: int | None = 192
    num_experts_per_tok: int | None = 8
    routed_scaling_factor: float = 2.5
    kv_lora_rank: int = 512
    q_lora_rank: int | None = 1536
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    qk_nope_head_dim: int = 128
    n_group: int | None = 8
    topk_group: int | None = 4
    max_position_embeddings: int = 32768
    rms_norm_eps: float = 1e-6
    model_type: str = "axk1"
    _REQUIRED = ()

    @classmethod
    def from_dict(cls, d):
        return super().from_dict(aliased(d, {"num_local_experts": "n_routed_experts"}) if isinstance(d, dict) else d)

    def _validate(self):
        if self.q_lora_rank is None:
            raise ValueError("config: q_lora_rank null: A.X-K1's attention always has the low-rank query (transformers "
                             "builds q_a_proj of q_lora_rank whatever the config says)")
        dc.legacy_mlp_types(self)
        super()._validate()


def build(cfg: AXK1Config, t):
    dec = dc.build(cfg, t, scoring="sigmoid", norm_topk=cfg.norm_topk_prob, group_score="top2_sum", sel_bias=False,
                   yarn_mscale=True, n_group=cfg.n_group or 0, topk_group=cfg.topk_group or 0)
    for i, L in enumerate(dec.layers):
        if L.moe is None:
            continue
        p = f"model.layers.{i}."
        bias = p + "mlp.gate.e_score_correction_bias"
        if t.has(bias):                 # the released files have none: zero, the choice on the sigmoids alone
            L.moe.sel_bias = t.vec(bias, (cfg.n_routed_experts,))
        name = p + "post_mlp_layernorm" if t.has(p + "post_mlp_layernorm.weight") else p + "mlp.post_mlp_layernorm"
        L.post_mlp_norm = norm(t, name, cfg.hidden_size, "rms", cfg.rms_norm_eps)
    return dec


hf_tensors = dc.hf_tensors
Config = AXK1Config
