"""LFM2-MoE (LiquidAI's LFM2-8B-A1B): LFM2's hybrid of gated short convolutions and attention
(petit/models/families/hybrid/lfm2.py) with routed experts. The first `num_dense_layers` layers keep a dense SwiGLU MLP
of `intermediate_size` (w1 / w3 / w2; no LFM2 auto-adjust of the width); every later layer routes each token to
`num_experts_per_tok` of `num_experts` SwiGLU experts of `moe_intermediate_size`:

    scores = sigmoid(router x)                                   (`feed_forward.gate`, kept in float)
    chosen = top-k of scores + expert_bias                       (`feed_forward.expert_bias`, with use_expert_bias)
    weights = scores[chosen] / (their sum + 1e-6) x routed_scaling_factor     (the renormalisation with norm_topk_prob)

transformers 5 writes the experts back in the Hub's layout (`feed_forward.experts.{e}.w1 / w3 / w2`), read as is.
The renormalisation's 1e-6 is kernels/moe.c's `norm_eps` (a relative 1e-6 of weights that sum to about top_k / 2)."""
from dataclasses import dataclass

from petit.models.families.hybrid import lfm2
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

NORM_EPS = 1e-6             # Lfm2MoeTopKRouter: routing_weights / (routing_weights.sum() + 1e-6)


@dataclass(kw_only=True)
class Lfm2MoeConfig(DecoderConfig):
    max_position_embeddings: int = 128000
    rope_theta: float = 1000000.0
    norm_eps: float = 1e-5
    conv_bias: bool = False
    conv_L_cache: int = 3
    layer_types: list | None = None
    tie_word_embeddings: bool = True
    moe_intermediate_size: int = 1792
    num_dense_layers: int = 2
    num_experts: int = 32
    num_experts_per_tok: int = 4
    use_expert_bias: bool = True
    routed_scaling_factor: float = 1.0
    norm_topk_prob: bool = True
    model_type: str = "lfm2_moe"
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict) and "tie_embedding" in d:        # the name LiquidAI's config.json uses
            d = dict(d)
            d.setdefault("tie_word_embeddings", d.pop("tie_embedding"))
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("norm_eps", "rope_theta", "routed_scaling_factor"),
                      ("tie_word_embeddings", "conv_bias", "use_expert_bias"))
        positive_int(self, "conv_L_cache", "moe_intermediate_size")
        check_routing(self)
        boolean(self, "norm_topk_prob")
        n = self.num_hidden_layers
        if not isinstance(self.layer_types, list) or len(self.layer_types) != n or \
                any(t not in lfm2.KINDS for t in self.layer_types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(lfm2.KINDS)} (lfm2_moe has "
                             f"no default), got {self.layer_types!r}")
        if isinstance(self.num_dense_layers, bool) or not isinstance(self.num_dense_layers, int) or \
                not 0 <= self.num_dense_layers <= n:
            raise ValueError(f"config: num_dense_layers must be an integer in [0, {n}], got {self.num_dense_layers!r}")
        if self.conv_bias:
            raise ValueError("config: conv_bias true is not supported by the lfm2_moe family (no released model has "
                             "it)")

    @property
    def ff_width(self) -> int:
        return self.intermediate_size


def build(cfg: Lfm2MoeConfig, t):
    D = cfg.hidden_size

    def ffn(i, p):
        if i < cfg.num_dense_layers:
            return lfm2.swiglu(t, p, cfg.intermediate_size, D)
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="feed_forward.gate",
                        experts="feed_forward.experts", names=("w1", "w3", "w2"))
        m.scoring, m.routed_scale = "sigmoid", float(cfg.routed_scaling_factor)
        if cfg.norm_topk_prob:
            m.norm_eps = NORM_EPS
        if cfg.use_expert_bias:
            m.sel_bias = t.vec(p + "feed_forward.expert_bias", (cfg.num_experts,))
        return {"moe": m}

    return lfm2.build(cfg, t, ffn)


Config = Lfm2MoeConfig
