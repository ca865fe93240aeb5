"""Mellum (JetBrains Mellum 2): Qwen3-MoE's attention (RMSNorm on each head of q and k) and routed SwiGLU experts
(softmax over `num_experts` logits, the top `num_experts_per_tok`, renormalised when `norm_topk_prob`), with each
layer's kinds listed: `layer_types` (sliding_attention layers see the last `sliding_window` positions) and
`mlp_layer_types` ("dense": a SwiGLU MLP of `intermediate_size`; "sparse": the experts). RoPE per layer type:
full layers rope_theta (500000 by default, with its scaling), sliding layers their own theta (10000), unscaled.
The multi-token-prediction layers (`num_mtp_layers`, weights under `mtp.`) are for speculative training and are
not run; transformers does not build them either."""
from dataclasses import dataclass, field

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import positive_number
from petit.models.blocks.moe import moe_weights
from petit.models.families.moe.qwen3_moe import Qwen3MoeConfig

MLP_TYPES = ("dense", "sparse")


@dataclass(kw_only=True)
class MellumConfig(Qwen3MoeConfig):
    num_experts: int = 64
    num_local_experts: int | None = None        # the spelling transformers 5 saves (num_experts is its alias)
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 896
    norm_topk_prob: bool = True
    head_dim: int | None = 128
    rope_theta: float = 500000.0                # transformers 5: rope_parameters["full_attention"]["rope_theta"]
    rope_local_base_freq: float = 10000.0       # transformers 5: rope_parameters["sliding_attention"]["rope_theta"]
    sliding_window: int | None = 1024
    max_position_embeddings: int = 131072
    mlp_layer_types: list | None = None
    model_type: str = "mellum"
    unknown_keys: list = field(default_factory=list, repr=False)

    _ROPE_LOCAL_THETA = True
    _IGNORED = Qwen3MoeConfig._IGNORED | {"num_mtp_layers", "num_nextn_predict_layers", "mtp_layer_types",
                                          "mtp_mlp_layer_types"}
    # Qwen's keys that Mellum's config refuses; a `.petit` file carries them at these neutral values
    _NOT_MELLUM = {"use_sliding_window": False, "max_window_layers": 0, "decoder_sparse_step": 1, "mlp_only_layers": []}

    @classmethod
    def _refuse(cls, d):
        given = [k for k, v in cls._NOT_MELLUM.items() if k in d and d[k] != v]
        if given:
            raise ValueError(f"config: {', '.join(given)}: not Mellum keys (its layers are listed by layer_types "
                             f"and mlp_layer_types)")
        both = d.get("num_experts"), d.get("num_local_experts")
        if None not in both and both[0] != both[1]:
            raise ValueError(f"config: num_experts {both[0]} and num_local_experts {both[1]} differ")
        if 0 in both:
            raise ValueError("config: num_experts 0 (Mellum's sparse layers need experts)")

    def _validate(self):
        for k, v in self._NOT_MELLUM.items():
            setattr(self, k, v)
        if self.num_local_experts is not None:
            self.num_experts = self.num_local_experts
        super()._validate()
        positive_number(self, "rope_local_base_freq")
        self.types()
        self.sparse()

    def types(self) -> list[str]:
        return layer_types(self, lambda i: "full_attention")

    def sparse(self) -> list[bool]:
        n, given = self.num_hidden_layers, self.mlp_layer_types
        if given is None:
            return [True] * n
        if not isinstance(given, list) or len(given) != n or any(t not in MLP_TYPES for t in given):
            raise ValueError(f"config: mlp_layer_types must list {n} values of dense / sparse, got {given!r}")
        return [t == "sparse" for t in given]


def build(cfg: MellumConfig, t):
    sparse, types = cfg.sparse(), cfg.types()
    full, local = default_rope(cfg), default_rope(cfg, base=cfg.rope_local_base_freq, scaling=None)
    return llama_like(
        t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, qk_norm="head",
        rope_for=lambda i: local if types[i] == "sliding_attention" else full,
        window_for=window_of(cfg, types), context_length=full.context_length,
        moe_for=lambda i, p: moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                                         inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob,
                                         router="mlp.gate", experts="mlp.experts") if sparse[i] else None)


Config = MellumConfig
