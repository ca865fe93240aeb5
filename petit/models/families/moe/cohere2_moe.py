"""Cohere 2 MoE (`cohere2_moe`): Cohere 2's parallel block (x + attn(n(x)) + mlp(n(x)), RoPE on interleaved pairs in
the sliding-window layers, none in the full-attention ones) with routed experts.

- Norms: RMSNorm when `rms_norm_eps` is set, else Cohere's LayerNorm without bias (`layer_norm_eps`).
- Layers: the first `first_k_dense_replace` (`mlp_layer_types` "dense") have a SwiGLU MLP of
  `prefix_dense_intermediate_size` and their own sliding pattern (`prefix_dense_sliding_window_pattern`; with 1 they
  are full attention WITH RoPE, transformers' force_rope); the rest slide except every `sliding_window_pattern`-th,
  counted from the first of them (`layer_types` when given).
- Experts (Mixtral's SwiGLU of `intermediate_size`): the top `num_experts_per_tok` router logits, weighed by the
  softmax over those (`expert_selection_fn` softmax: Mixtral's renormalised softmax) or by their sigmoids
  (renormalised with `norm_topk_prob`); `num_shared_experts` shared experts as one MLP of num_shared_experts x
  `intermediate_size`, combined by `shared_expert_combination_strategy`: "sum", or "average" ((routed + shared) / 2:
  the routed weights times 0.5, and the shared expert behind a zero gate, sigmoid(0) = 0.5 exactly, which `hf_tensors`
  supplies as `mlp.shared_experts_gate.weight`).
- logits x `logit_scale`; tied by default."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.dense import cohere
from petit.models.blocks.common import arch, attention_weights, default_rope, embed_and_head, norm
from petit.models.blocks.config import positive_int
from petit.models.blocks.decoder import Decoder, Layer
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY, check_routing

ZERO_GATE = "mlp.shared_experts_gate.weight"        # "average": the shared expert times sigmoid(0) = 0.5


@dataclass(kw_only=True)
class Cohere2MoeConfig(cohere.CohereConfig):
    vocab_size: int = 256000
    hidden_size: int = 8192
    intermediate_size: int = 22528
    num_hidden_layers: int = 40
    num_attention_heads: int = 64
    head_dim: int | None = 128
    sliding_window: int | None = 4096
    num_experts_per_tok: int = 2
    num_experts: int = 8
    num_shared_experts: int = 0
    shared_expert_combination_strategy: str = "average"
    expert_selection_fn: str = "softmax"
    layer_types: list | None = None
    mlp_layer_types: list | None = None
    first_k_dense_replace: int = 0
    prefix_dense_sliding_window_pattern: int = 1
    norm_topk_prob: bool = True
    prefix_dense_intermediate_size: int | None = None
    rms_norm_eps: float | None = None
    sliding_window_pattern: int = 4
    model_type: str = "cohere2_moe"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY
    _ROPE_LAYER_TYPES = ("sliding_attention",)

    def _validate(self):
        super()._validate()
        check_routing(self)
        positive_int(self, "sliding_window_pattern", "prefix_dense_sliding_window_pattern")
        if self.expert_selection_fn not in ("softmax", "sigmoid"):
            raise ValueError(f"config: expert_selection_fn {self.expert_selection_fn!r} is not supported by the "
                             f"cohere2_moe family (softmax, sigmoid)")
        if self.shared_expert_combination_strategy not in ("sum", "average"):
            raise ValueError(f"config: shared_expert_combination_strategy {self.shared_expert_combination_strategy!r} "
                             f"is not supported by the cohere2_moe family (sum, average)")
        n, k = self.num_hidden_layers, self.first_k_dense_replace or 0
        if self.layer_types is None:
            self.layer_types = (["sliding_attention" if (i + 1) % self.prefix_dense_sliding_window_pattern else
                                 "full_attention" for i in range(k)]
                                + ["sliding_attention" if (i + 1) % self.sliding_window_pattern else "full_attention"
                                   for i in range(n - k)])
        if self.mlp_layer_types is None:
            self.mlp_layer_types = ["dense" if i < k else "sparse" for i in range(n)]
        for name, allowed in (("layer_types", ("sliding_attention", "full_attention")),
                              ("mlp_layer_types", ("dense", "sparse"))):
            v = getattr(self, name)
            if not isinstance(v, list) or len(v) != n or any(x not in allowed for x in v):
                raise ValueError(f"config: {name} must list {n} values of {' / '.join(allowed)}, got {v!r}")
        if "dense" in self.mlp_layer_types and not self.prefix_dense_intermediate_size:
            raise ValueError("config: dense layers (mlp_layer_types) need prefix_dense_intermediate_size")
        if "sliding_attention" in self.layer_types and not self.sliding_window:
            raise ValueError("config: sliding layers need a positive sliding_window, got None")


def hf_tensors(cfg: Cohere2MoeConfig, ckpt) -> dict:
    """The zero gate of "average" (not a checkpoint tensor)."""
    if not (cfg.num_shared_experts and cfg.shared_expert_combination_strategy == "average"):
        return {}
    zero = lambda: np.zeros((1, cfg.hidden_size), np.float32)        # noqa: E731
    return {f"model.layers.{i}.{ZERO_GATE}": ((1, cfg.hidden_size), zero, ())
            for i, kind in enumerate(cfg.mlp_layer_types) if kind == "sparse"}


def build(cfg: Cohere2MoeConfig, t):
    D, eps = cfg.hidden_size, cfg.rms_norm_eps if cfg.rms_norm_eps is not None else cfg.layer_norm_eps
    kind = "rms" if cfg.rms_norm_eps is not None else "layer"
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, interleaved=True)
    average = cfg.shared_expert_combination_strategy == "average"
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        dense = cfg.mlp_layer_types[i] == "dense"
        sliding = cfg.layer_types[i] == "sliding_attention"
        rotates = sliding or (dense and cfg.prefix_dense_sliding_window_pattern == 1)
        if dense:
            F = cfg.prefix_dense_intermediate_size
            mlp = {x: t.weight(f"{p}mlp.{x}_proj.weight", (D, F) if x == "down" else (F, D))
                   for x in ("gate", "up", "down")}
        else:
            sh = cfg.num_shared_experts
            m = moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                            inter=cfg.intermediate_size,
                            norm_topk=cfg.expert_selection_fn == "softmax" or cfg.norm_topk_prob, router="mlp.gate",
                            experts="mlp.experts", shared="mlp.shared_experts" if sh else None,
                            shared_inter=sh * cfg.intermediate_size,
                            shared_gate=ZERO_GATE[:-len(".weight")] if sh and average else None)
            m.scoring = cfg.expert_selection_fn
            if sh and average:
                m.routed_scale = 0.5
            mlp = {"moe": m}
        L = Layer(**attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias), **mlp,
                  attn_norm=norm(t, p + "input_layernorm", D, kind, eps), rope=rope if rotates else None,
                  window=cfg.sliding_window if sliding else 0)
        layers.append(L)
    final = norm(t, "model.norm", D, kind, eps)
    widths = [cfg.prefix_dense_intermediate_size or 0, cfg.intermediate_size * max(cfg.num_shared_experts, 1)]
    a = arch(cfg, context_length=rope.context_length, parallel=True, logit_scale=cfg.logit_scale,
             intermediate_size=max(widths))
    return Decoder(a, E, layers, final, head)


Config = Cohere2MoeConfig
