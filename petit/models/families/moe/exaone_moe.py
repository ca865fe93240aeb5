"""K-EXAONE (LG AI Research's EXAONE MoE): EXAONE 4's attention (per-head q / k RMS norms before RoPE; with a
`sliding_window`, the sliding layers use RoPE in their window and the full layers no position encoding at all, as
petit/models/families/dense/exaone4.py) in OLMoE's pre-norm block (input_layernorm, post_attention_layernorm; not EXAONE
4's post-norms), and DeepSeek-V3's mixture of experts: the first `first_k_dense_replace` layers (or those
`mlp_layer_types` calls "dense") keep a SwiGLU MLP of `intermediate_size`; the others route each token to
`num_experts_per_tok` of `num_experts` experts of `moe_intermediate_size`:

    scores = sigmoid(gate x)                                     (`mlp.gate`, kept in float)
    choice among the experts of the topk_group best of n_group groups (a group's score: the sum of its best two
    scores + e_score_correction_bias), on scores + e_score_correction_bias
    weights = the chosen scores (renormalised with norm_topk_prob) x routed_scaling_factor

plus a shared expert of `moe_intermediate_size x num_shared_experts` every token takes, unweighted. transformers 5
writes the experts back in the Hub's layout (`mlp.experts.{e}.gate_proj / up_proj / down_proj`) and the bias as
`mlp.e_score_correction_bias` (`mlp.gate.e_score_correction_bias` is read too)."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like, window_of
from petit.models.blocks.config import boolean, positive_int, positive_number
from petit.models.families.dense.exaone4 import Exaone4Config
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

KINDS = ("dense", "sparse")


@dataclass(kw_only=True)
class ExaoneMoeConfig(Exaone4Config):
    max_position_embeddings: int = 2048
    mlp_layer_types: list | None = None
    first_k_dense_replace: int = 1
    moe_intermediate_size: int = 1024
    num_experts: int = 64
    num_experts_per_tok: int = 8
    num_shared_experts: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.5
    n_group: int = 1
    topk_group: int = 1
    model_type: str = "exaone_moe"
    _IGNORED = MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        check_routing(self)
        boolean(self, "norm_topk_prob")
        positive_int(self, "moe_intermediate_size", "n_group", "topk_group")
        positive_number(self, "routed_scaling_factor")
        if isinstance(self.num_shared_experts, bool) or not isinstance(self.num_shared_experts, int) or \
                self.num_shared_experts < 0:
            raise ValueError(f"config: num_shared_experts must be a non-negative integer, got "
                             f"{self.num_shared_experts!r}")
        if self.num_experts % self.n_group or self.topk_group > self.n_group:
            raise ValueError(f"config: {self.num_experts} experts in n_group {self.n_group} groups, topk_group "
                             f"{self.topk_group}: the groups must be equal and topk_group at most n_group")
        n = self.num_hidden_layers
        if self.mlp_layer_types is None:
            k = self.first_k_dense_replace
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise ValueError(f"config: first_k_dense_replace must be a non-negative integer, got {k!r}")
            self.mlp_layer_types = ["dense" if i < self.first_k_dense_replace else "sparse" for i in range(n)]
        if not isinstance(self.mlp_layer_types, list) or len(self.mlp_layer_types) != n or \
                any(t not in KINDS for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got "
                             f"{self.mlp_layer_types!r}")


def build(cfg: ExaoneMoeConfig, t):
    rope = default_rope(cfg)
    nope = cfg.sliding_window is not None       # the full layers of a local / global model have no RoPE
    rope_for = lambda i: None if nope and cfg.types[i] == "full_attention" else rope     # noqa: E731

    def moe_for(i, p):
        if cfg.mlp_layer_types[i] == "dense":
            return None
        S = cfg.moe_intermediate_size * cfg.num_shared_experts
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                        experts="mlp.experts", shared="mlp.shared_experts" if S else None, shared_inter=S)
        m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
        m.n_group, m.topk_group = (cfg.n_group, cfg.topk_group) if cfg.n_group > 1 else (0, 0)
        bias = p + "mlp.e_score_correction_bias"
        if not t.has(bias):
            bias = p + "mlp.gate.e_score_correction_bias"
        m.sel_bias = t.vec(bias, (cfg.num_experts,))
        return m

    return llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=rope_for, window_for=window_of(cfg, cfg.types),
                      context_length=rope.context_length, qk_norm="head", moe_for=moe_for)


Config = ExaoneMoeConfig
