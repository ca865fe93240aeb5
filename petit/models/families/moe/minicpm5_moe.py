"""MiniCPM5-MoE (OpenBMB): a Llama block (pre-norms, rotate-half RoPE over whole heads, no q / k norms) whose
attention output is gated element by element: `q_gate_proj` (written back as `self_attn.q_proj`, [heads x 2 x
head_dim, hidden]) gives each head's query and then its gate rows, the output times sigmoid(gate) before o_proj
(split when read into q_proj and q_gate, as Qwen3-Next's). The MLP of the layers `mlp_layer_types` calls "dense"
(by default the first `first_k_dense_replace` = 1) is a SwiGLU of `intermediate_size`; the others route as
DeepSeek-V3: sigmoid scores, the choice on score + `e_score_correction_bias` within the `topk_group` best of
`n_group` groups (a group's best two summed), renormalised with `norm_topk_prob`, times `routed_scaling_factor`,
over `n_routed_experts` experts of `moe_intermediate_size`, plus `n_shared_experts` shared experts unweighted."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

KINDS = ("dense", "sparse")


@dataclass(kw_only=True)
class MiniCPM5MoeConfig(DecoderConfig):
    num_key_value_heads: int | None = 2
    head_dim: int | None = 128
    max_position_embeddings: int = 524288
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5000000.0
    attention_bias: bool = False
    mlp_layer_types: list | None = None
    first_k_dense_replace: int = 1          # a key transformers reads (and pops) when mlp_layer_types is absent
    moe_intermediate_size: int = 512
    n_routed_experts: int = 160
    num_experts_per_tok: int = 16
    n_shared_experts: int = 1
    routed_scaling_factor: float = 3.66
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    model_type: str = "minicpm5_moe"
    _IGNORED = MOE_TRAINING_ONLY | {"num_nextn_predict_layers"}

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "minicpm5_moe", "silu")
        if d.get("use_gated_attention", True) is False:
            raise ValueError("config: use_gated_attention false is not supported by the minicpm5_moe family "
                             "(transformers refuses it too)")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"),
                      ("tie_word_embeddings", "attention_bias", "norm_topk_prob"))
        check_routing(self, "n_routed_experts")
        positive_int(self, "moe_intermediate_size", "n_group", "topk_group")
        positive_number(self, "routed_scaling_factor")
        boolean(self, "norm_topk_prob")
        if self.attention_bias:
            raise ValueError("config: attention_bias true is not supported by the minicpm5_moe family (no released "
                             "MiniCPM5-MoE has it)")
        if self.n_routed_experts % self.n_group or self.topk_group > self.n_group:
            raise ValueError(f"config: n_routed_experts {self.n_routed_experts} in n_group {self.n_group} groups, "
                             f"topk_group {self.topk_group}: the groups must be equal and topk_group at most n_group")
        n = self.num_hidden_layers
        if self.mlp_layer_types is None:
            k = self.first_k_dense_replace
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise ValueError(f"config: first_k_dense_replace must be a non-negative integer, got {k!r}")
            self.mlp_layer_types = ["dense" if i < k else "sparse" for i in range(n)]
        if not isinstance(self.mlp_layer_types, list) or len(self.mlp_layer_types) != n or \
                any(t not in KINDS for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got "
                             f"{self.mlp_layer_types!r}")


def hf_tensors(cfg: MiniCPM5MoeConfig, ckpt) -> dict:
    """Each layer's q_proj (the checkpoint's q_gate_proj) split into the query and the gate rows of each head."""
    D, H, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.self_attn."
        for src in (p + "q_proj.weight", p + "q_gate_proj.weight"):
            if src in ckpt and tuple(ckpt.info(src)[1]) == (2 * H * hd, D):
                for name, j in (("q_proj", 0), ("q_gate", 1)):
                    out[p + f"{name}.weight"] = ((H * hd, D), lambda s=src, j=j: ckpt.f32(s).reshape(
                        H, 2, hd, D)[:, j].reshape(H * hd, D), (src,))
    return out


def build(cfg: MiniCPM5MoeConfig, t):
    rope = default_rope(cfg)

    def moe_for(i, p):
        if cfg.mlp_layer_types[i] == "dense":
            return None
        S = cfg.n_shared_experts * cfg.moe_intermediate_size
        m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                        experts="mlp.experts", shared="mlp.shared_experts" if S else None, shared_inter=S)
        m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
        m.n_group, m.topk_group = (cfg.n_group, cfg.topk_group) if cfg.n_group > 1 else (0, 0)
        m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.n_routed_experts,))
        return m

    widest = max(cfg.intermediate_size, cfg.moe_intermediate_size * max(cfg.n_shared_experts, 1))
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, rope_for=lambda i: rope, moe_for=moe_for,
                     context_length=rope.context_length, intermediate_size=widest)
    for i, L in enumerate(dec.layers):
        L.attn_gate = t.weight(f"model.layers.{i}.self_attn.q_gate.weight",
                               (cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size))
    return dec


Config = MiniCPM5MoeConfig
