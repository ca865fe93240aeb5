"""Beam (Reflection AI, transformers' `beam`, BeamForCausalLM): DeepSeek-V3's experts under a gated, sliding-window
attention in Gemma's four-norm block:

- attention: q / k RMS-normed per head, sliding windows (`sliding_window`) in the sliding layers; RoPE per layer type
  from `rope_parameters` (by default the sliding layers rotate, the full ones have none); in a layer without RoPE
  each query is scaled by (1 + (p + 1) / 2048) ** 0.1 at position p (scalable softmax: the attention kernel's
  temperature, mode 2); each head's output times sigmoid(gate_proj x + gate_bias of the head), then o_proj;
- the block: h = h / sqrt(i) + r sqrt((i - 1) / i) after each sublayer's post-norm (i = 2 (layer + 1) for the
  attention, one more for the MLP), which keeps the stream the plain sum of the embeddings and every sublayer's
  output divided by sqrt(i): Petit adds plainly and gives the RMSNorms reading the stream eps x i instead (exact:
  RMSNorm(x / sqrt(i), eps) = RMSNorm(x, eps i)), no op a sublayer;
- `mlp_layer_types` (by default three dense layers, then experts): a SwiGLU of `intermediate_size`, or experts chosen
  as DeepSeek-V3 chooses (sigmoid + `e_score_correction_bias`, `n_group` groups by their two best, the best
  `topk_group`), their sigmoids renormalised (+ 1e-20) with `norm_topk_prob`, x `routed_scaling_factor`; no shared
  expert;
- logits soft-capped at `final_logit_softcapping` (30).

A converted file keeps the layer types that rotate as Petit's own key `rope_layer_types`."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, check_decoder, positive_int, refuse_act
from petit.models.blocks.decoder import Vec
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing
from petit.models.blocks.rope_config import LAYER_TYPES, per_layer_type

SSMAX = (2048.0, 0.1, 2)         # the NoPE layers' query scale (1 + (p + 1) / 2048) ** 0.1: attention mode 2


@dataclass(kw_only=True)
class BeamConfig(DecoderConfig):
    vocab_size: int = 151936
    hidden_size: int = 5120
    intermediate_size: int = 20480
    num_hidden_layers: int = 52
    num_attention_heads: int = 48
    num_key_value_heads: int | None = 8
    head_dim: int | None = 128
    max_position_embeddings: int = 8192
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    sliding_window: int | None = 512
    moe_intermediate_size: int = 2560
    num_experts_per_tok: int = 8
    num_experts: int = 256
    norm_topk_prob: bool = True
    n_group: int | None = 8
    topk_group: int | None = 4
    routed_scaling_factor: float = 2.5
    final_logit_softcapping: float | None = 30.0
    layer_types: list | None = None
    mlp_layer_types: list | None = None
    rope_layer_types: list | None = None       # Petit's key: the layer types that rotate (from rope_parameters)
    model_type: str = "beam"
    unknown_keys: list = field(default_factory=list, repr=False)
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY
    _ROPE_LAYER_TYPES = LAYER_TYPES

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict):
            n = d.get("num_hidden_layers", cls.num_hidden_layers)
            if d.get("rope_parameters") is None and d.get("rope_layer_types") is None:     # transformers' default
                d = dict(d, rope_parameters={"sliding_attention": {"rope_type": "default"}, "full_attention": None})
            if d.get("rope_parameters") is not None:
                used = d.get("layer_types") or _types(n)
                d = dict(d, **per_layer_type(d["rope_parameters"], used, "beam"))
        return super().from_dict(d)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "beam", "silu")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "routed_scaling_factor"),
                      ("tie_word_embeddings", "attention_bias", "norm_topk_prob"), window=True)
        check_routing(self)
        positive_int(self, "moe_intermediate_size", "n_group", "topk_group")
        if self.num_experts % self.n_group or self.num_experts // self.n_group < 2 or self.topk_group > self.n_group:
            raise ValueError(f"config: {self.num_experts} experts in n_group {self.n_group} groups of at least two, "
                             f"topk_group {self.topk_group} of them, are needed (the groups score by their best two)")
        if self.final_logit_softcapping is not None:
            self.final_logit_softcapping = float(self.final_logit_softcapping)
            if not self.final_logit_softcapping > 0:
                raise ValueError(f"config: final_logit_softcapping must be positive or null, got "
                                 f"{self.final_logit_softcapping!r}")
        n = self.num_hidden_layers
        mlp = self.mlp_layer_types or ["dense"] * min(3, n) + ["sparse"] * max(n - 3, 0)
        if not isinstance(mlp, list) or len(mlp) != n or any(k not in ("dense", "sparse") for k in mlp):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got {mlp!r}")
        self.mlp_layer_types = mlp
        if not isinstance(self.rope_layer_types, list) or any(t not in LAYER_TYPES for t in self.rope_layer_types):
            raise ValueError(f"config: rope_layer_types must list layer types of {' / '.join(LAYER_TYPES)}, got "
                             f"{self.rope_layer_types!r}")
        window_of(self, self.types())

    def types(self):
        return layer_types(self, _types(self.num_hidden_layers).__getitem__)


def _types(n: int) -> list:
    """transformers' default: every sixth layer full attention, and the last; the others sliding."""
    return ["sliding_attention" if (i + 1) % 6 and i != n - 1 else "full_attention" for i in range(n)]


def build(cfg: BeamConfig, t):
    H, hd, D = cfg.num_attention_heads, cfg.head_dim, cfg.hidden_size
    rope, types, rotates = default_rope(cfg), cfg.types(), set(cfg.rope_layer_types)

    def moe_for(i, p):
        if cfg.mlp_layer_types[i] == "dense":
            return None
        m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                        inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob, router="mlp.gate",
                        experts="mlp.experts")
        m.scoring, m.group_score, m.n_group, m.topk_group = "sigmoid", "top2_sum", cfg.n_group, cfg.topk_group
        m.sel_bias = t.vec(p + "mlp.gate.e_score_correction_bias", (cfg.num_experts,))
        m.routed_scale, m.norm_eps = float(cfg.routed_scaling_factor), 1e-20 if cfg.norm_topk_prob else 0.0
        return m

    b = cfg.attention_bias
    net = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=b, o_bias=b, qk_norm="head", sandwich=True,
                     rope_for=lambda i: rope if types[i] in rotates else None, window_for=window_of(cfg, types),
                     moe_for=moe_for, context_length=rope.context_length,
                     logit_softcap=cfg.final_logit_softcapping or 0.0)
    for i, L in enumerate(net.layers):
        p = f"model.layers.{i}.self_attn."
        L.attn_gate = t.weight(p + "gate_proj.weight", (H * hd, D))
        L.attn_gate_b = Vec(np.repeat(t.vec(p + "gate_bias", (H,)).a, hd))
        L.attn_norm.eps *= 2 * i + 1            # the stream's depth: the sublayers added before it, plus one
        L.mlp_norm.eps *= 2 * i + 2
        if L.rope is None:
            L.temperature = SSMAX
    net.final_norm.eps *= 2 * cfg.num_hidden_layers + 1
    return net


Config = BeamConfig
