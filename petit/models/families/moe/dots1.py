"""dots.llm1 (`dots1`, rednote-hilab): Qwen3's attention (RMSNorm over each head of q and k before RoPE, optional
q / k / v / o biases, sliding windows by `layer_types`: by default the layers from `max_window_layers` on slide when
`sliding_window` is set) with DeepSeek-V3's experts from layer `first_k_dense_replace` on (a SwiGLU MLP of
`intermediate_size` before): sigmoid scores of `mlp.gate`, the choice made on score + `e_score_correction_bias`
among the `topk_group` best of `n_group` groups (a group's score its best two), the chosen scores as the weights
(renormalised with `norm_topk_prob`), times `routed_scaling_factor`, plus `n_shared_experts` shared experts as one
SwiGLU MLP of n_shared_experts x `moe_intermediate_size`, unweighted. The experts run in kernels/moe.c (sigmoid
scoring, selection bias, groups: as deepseek_v3's)."""
from dataclasses import dataclass

from petit.models.blocks.common import LAYER_TYPES, layer_types, llama_like
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_number, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


@dataclass(kw_only=True)
class Dots1Config(DecoderConfig):
    vocab_size: int = 152064
    hidden_size: int = 4608
    intermediate_size: int = 10944
    num_hidden_layers: int = 62
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 32
    moe_intermediate_size: int = 1408
    n_shared_experts: int | None = None
    n_routed_experts: int | None = None
    n_group: int | None = 1
    topk_group: int | None = 1
    num_experts_per_tok: int | None = None
    first_k_dense_replace: int | None = 0
    norm_topk_prob: bool | None = False
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    routed_scaling_factor: float = 1.0
    sliding_window: int | None = 4096
    max_window_layers: int | None = 62
    layer_types: list | None = None
    model_type: str = "dots1"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu",), cls.model_type, "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"), ("tie_word_embeddings",
                                                                                       "attention_bias"))
        E, k = self.n_routed_experts, self.num_experts_per_tok
        if not isinstance(E, int) or isinstance(E, bool) or E <= 0 or not isinstance(k, int) or not 0 < k <= E:
            raise ValueError(f"config: dots1 needs n_routed_experts and num_experts_per_tok (1 .. experts), got "
                             f"{E!r} and {k!r}")
        G, tg = self.n_group or 1, self.topk_group or 1
        if E % G or not 0 < tg <= G or (G > 1 and E // G < 2):
            raise ValueError(f"config: n_group {G} / topk_group {tg} do not divide {E} experts into groups of at "
                             f"least two (transformers scores a group by its best two)")
        self.first_k_dense_replace = self.first_k_dense_replace or 0
        self.norm_topk_prob = bool(self.norm_topk_prob)
        boolean(self, "norm_topk_prob")
        positive_number(self, "moe_intermediate_size")
        if self.sliding_window is not None:
            positive_number(self, "sliding_window")
        w = self.max_window_layers if self.max_window_layers is not None else self.num_hidden_layers
        self.types = layer_types(self, lambda i: "sliding_attention" if self.sliding_window is not None and i >= w
                                 else "full_attention")
        if len(self.types) != self.num_hidden_layers or any(t not in LAYER_TYPES for t in self.types):
            raise ValueError(f"config: layer_types must list {self.num_hidden_layers} values of "
                             f"{' / '.join(LAYER_TYPES)}, got {self.types!r}")
        if "sliding_attention" in self.types and not self.sliding_window:
            raise ValueError("config: sliding layers need a positive sliding_window, got None")


def build(cfg: Dots1Config, t):
    def moe(i, p):
        if i < cfg.first_k_dense_replace:
            return None
        n_sh = cfg.n_shared_experts or 0
        m = moe_weights(t, p, cfg, n_experts=cfg.n_routed_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                        experts="mlp.experts", shared="mlp.shared_experts" if n_sh else None,
                        shared_inter=n_sh * cfg.moe_intermediate_size)
        m.scoring, m.group_score, m.routed_scale = "sigmoid", "top2_sum", float(cfg.routed_scaling_factor)
        if (cfg.n_group or 1) > 1:
            m.n_group, m.topk_group = cfg.n_group, cfg.topk_group
        m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.n_routed_experts,))
        return m

    widths = [cfg.intermediate_size, cfg.moe_intermediate_size * max(cfg.n_shared_experts or 0, 1)]
    return llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                      qk_norm="head", moe_for=moe, intermediate_size=max(widths),
                      window_for=lambda i: cfg.sliding_window if cfg.types[i] == "sliding_attention" else 0)


Config = Dots1Config
