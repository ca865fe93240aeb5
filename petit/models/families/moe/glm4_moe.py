"""GLM-4.5 / GLM-4.6 (`glm4_moe`): a Llama block (RMSNorm, q/k/v biases with `attention_bias`, none on o_proj,
RMSNorm over each head of q and k before RoPE with `use_qk_norm`, partial rotary rotate-half on the first
`partial_rotary_factor` of each head) whose MLPs from `first_k_dense_replace` on are routed experts chosen as
DeepSeek-V3 chooses (`noaux_tc`): sigmoid scores, the choice on score + `e_score_correction_bias` within the
`topk_group` best of `n_group` groups (a group's best two summed), the chosen scores renormalised
(`norm_topk_prob`) and times `routed_scaling_factor`; `n_shared_experts` shared experts, unweighted."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing


@dataclass(kw_only=True)
class Glm4MoeConfig(DecoderConfig):
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    partial_rotary_factor: float = 0.5
    attention_bias: bool = False
    use_qk_norm: bool = False
    moe_intermediate_size: int = 1408
    n_routed_experts: int = 128
    num_experts_per_tok: int = 8
    n_shared_experts: int = 1
    first_k_dense_replace: int = 1
    routed_scaling_factor: float = 1.0
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    model_type: str = "glm4_moe"
    _IGNORED = MOE_TRAINING_ONLY | {"num_nextn_predict_layers"}     # the multi-token-prediction layers: not run

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "glm4_moe", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "partial_rotary_factor", "routed_scaling_factor"),
                      ("tie_word_embeddings", "attention_bias", "use_qk_norm", "norm_topk_prob"))
        check_routing(self, "n_routed_experts")
        positive_int(self, "moe_intermediate_size", "n_group", "topk_group")
        positive_number(self, "routed_scaling_factor")
        if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
            raise ValueError(f"config: n_routed_experts {self.n_routed_experts} in n_group {self.n_group} groups, "
                             f"topk_group {self.topk_group}: the groups must be equal and topk_group at most n_group")
        self.rotary_dim = int(self.head_dim * self.partial_rotary_factor)


def _moe(cfg: Glm4MoeConfig, t, i: int, p: str):
    if i < cfg.first_k_dense_replace:
        return None
    m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                    inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                    experts="mlp.experts", shared="mlp.shared_experts" if cfg.n_shared_experts else None,
                    shared_inter=cfg.n_shared_experts * cfg.moe_intermediate_size)
    m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
    m.n_group, m.topk_group = (cfg.n_group, cfg.topk_group) if cfg.n_group > 1 else (0, 0)
    m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.n_routed_experts,))
    return m


def build(cfg: Glm4MoeConfig, t):
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size * max(cfg.n_shared_experts, 1))
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, rope_for=lambda i: rope,
                      qk_norm="head" if cfg.use_qk_norm else None, moe_for=lambda i, p: _moe(cfg, t, i, p),
                      context_length=rope.context_length, intermediate_size=widest)


Config = Glm4MoeConfig
