"""Laguna (Poolside, `laguna`): GLM-4.7-Flash's pre-norm decoder layer around AfMoE's attention with Laguna's own
output gate, Gemma 3's RoPE per layer type with a partial rotary factor of each, and sigmoid-routed experts.

- Attention: per-head RMSNorm of q and k, each layer's query heads from `num_attention_heads_per_layer` (default
  `num_attention_heads` everywhere; the kv heads are shared), biases on q / k / v / o with `attention_bias`; the
  sliding layers (`layer_types`, default all full) see the last `sliding_window` positions. RoPE by halves on each
  layer type's first head_dim x partial_rotary_factor values with that type's theta and scaling (transformers 5's
  `rope_parameters` keyed by layer type: full 5e5 on half the head, sliding 1e4 on all of it by default). The heads'
  output times softplus(g_proj x), one gate a head (`gating` true / "per-head") or a value ("per-element", and
  transformers reads `gating` false so too), then o_proj.
- MLP: `mlp_layer_types` (default the first dense, a SwiGLU of `intermediate_size`, the rest sparse): the top
  `num_experts_per_tok` of `num_experts` SwiGLU experts on sigmoid(logits) + e_score_correction_bias (logits first
  soft-capped, cap tanh(l / cap), with `moe_router_logit_softcapping`), the chosen sigmoids renormalised, their sum
  times `moe_routed_scaling_factor`, plus an ungated shared expert (`shared_expert_intermediate_size`).
  `moe_apply_router_weight_on_input` is refused as transformers refuses it.
The checkpoints' names (mlp.experts.e_score_correction_bias, mlp.shared_expert.*) and transformers' module names
(mlp.gate.e_score_correction_bias, mlp.shared_experts.*) are both read.

RoPE settings are kept as given per layer type in `rope_types` (Petit's key; transformers' rope_parameters), since
the two types rotate different widths; the top-level rope_theta / rope_scaling, which transformers' Laguna ignores, are
reported and not read."""
from dataclasses import dataclass

from petit.models.blocks.common import layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing
from petit.models.blocks.rope_config import RopeByType

GATING = {True: "head", "per-head": "head", False: "element", "per-element": "element"}


@dataclass(kw_only=True)
class LagunaConfig(RopeByType, DecoderConfig):
    vocab_size: int = 100352
    hidden_size: int = 2048
    intermediate_size: int = 8192
    num_hidden_layers: int = 40
    num_attention_heads: int = 48
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-6
    sliding_window: int | None = 512
    layer_types: list | None = None
    rope_types: dict | None = None          # Petit's key: transformers 5's rope_parameters, per layer type
    attention_bias: bool = False
    gating: bool | str = True
    num_attention_heads_per_layer: list | None = None
    mlp_layer_types: list | None = None
    num_experts: int = 256
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    moe_routed_scaling_factor: float = 1.0
    moe_apply_router_weight_on_input: bool = False
    moe_router_logit_softcapping: float = 0.0
    model_type: str = "laguna"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY
    _ROPE_DEFAULT = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                           "partial_rotary_factor": 1.0}}

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "laguna", "silu")
        if d.get("moe_apply_router_weight_on_input"):
            raise ValueError("config: moe_apply_router_weight_on_input true is not supported (transformers' Laguna "
                             "refuses it too)")
        if d.get("gating", True) not in GATING:
            raise ValueError(f"config: gating {d['gating']!r} is not one of true, false, 'per-head', 'per-element'")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "moe_routed_scaling_factor"), ("tie_word_embeddings", "attention_bias"),
                      window=True)
        check_routing(self)
        positive_int(self, "moe_intermediate_size", "shared_expert_intermediate_size")
        n = self.num_hidden_layers
        window_of(self, self.types())
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["dense"] + ["sparse"] * (n - 1)
        if not isinstance(self.mlp_layer_types, list) or len(self.mlp_layer_types) != n or \
                any(t not in ("dense", "sparse") for t in self.mlp_layer_types):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got "
                             f"{self.mlp_layer_types!r}")
        heads = self.num_attention_heads_per_layer
        if heads is None:
            self.num_attention_heads_per_layer = heads = [self.num_attention_heads] * n
        if not isinstance(heads, list) or len(heads) != n or any(
                isinstance(h, bool) or not isinstance(h, int) or h < 1 or h % self.num_key_value_heads for h in heads):
            raise ValueError(f"config: num_attention_heads_per_layer must list {n} positive multiples of "
                             f"num_key_value_heads {self.num_key_value_heads}, got {heads!r}")
        c = self.moe_router_logit_softcapping
        if isinstance(c, bool) or not isinstance(c, (int, float)) or c < 0:
            raise ValueError(f"config: moe_router_logit_softcapping must be >= 0, got {c!r}")
        self.ropes()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "full_attention")


def _either(t, p: str, saved: str, module: str) -> str:
    """The name (under p) transformers saves when the file has it, else its module's."""
    return saved if t.has(p + saved) or t.has(p + saved + ".weight") else module


def build(cfg: LagunaConfig, t):
    types, ropes, E, D = cfg.types(), cfg.ropes(), cfg.num_experts, cfg.hidden_size
    heads = cfg.num_attention_heads_per_layer

    def moe(i, p):
        if cfg.mlp_layer_types[i] != "sparse":
            return None
        m = moe_weights(t, p, cfg, n_experts=E, top_k=cfg.num_experts_per_tok, inter=cfg.moe_intermediate_size,
                        norm_topk=True, router="mlp.gate", experts="mlp.experts",
                        shared=_either(t, p, "mlp.shared_expert.down_proj", "mlp.shared_experts.down_proj")
                        .rsplit(".", 1)[0],
                        shared_inter=cfg.shared_expert_intermediate_size)
        m.scoring, m.routed_scale = "sigmoid", float(cfg.moe_routed_scaling_factor)
        m.logit_softcap = float(cfg.moe_router_logit_softcapping)
        m.sel_bias = t.vec(p + _either(t, p, "mlp.experts.e_score_correction_bias",
                                       "mlp.gate.e_score_correction_bias"), (E,))
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     qk_norm="head", rope_for=lambda i: ropes[types[i]], window_for=window_of(cfg, types),
                     moe_for=moe, heads_for=lambda i: heads[i],
                     context_length=min(r.context_length for r in ropes.values()))
    per_head = GATING[cfg.gating] == "head"
    for i, L in enumerate(dec.layers):
        H = heads[i]
        L.attn_gate = t.weight(f"model.layers.{i}.self_attn.g_proj.weight", (H if per_head else H * cfg.head_dim, D))
        L.attn_gate_act, L.attn_gate_width = "softplus", cfg.head_dim if per_head else 1
    return dec


Config = LagunaConfig
