"""Hunyuan V1 MoE (Tencent Hunyuan-A13B): Hunyuan V1 dense's attention (RMSNorm over each head of q and k after RoPE,
RoPE `dynamic` with an NTK `alpha`) with routed experts in every layer: softmax over `num_experts` logits of
`mlp.gate.wg`, the top `moe_topk` renormalised to sum 1, each expert a SwiGLU of `intermediate_size`, plus
`mlp.shared_mlp`, a SwiGLU of the same width added unweighted. `num_experts` and `moe_topk` may be per-layer lists,
as transformers reads them."""
from dataclasses import dataclass

from petit.models.blocks.common import default_rope, llama_like, norm
from petit.models.families.dense.hunyuan_v1_dense import HunYuanDenseV1Config
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY


@dataclass(kw_only=True)
class HunYuanMoEV1Config(HunYuanDenseV1Config):
    num_experts: int | list = 1
    moe_topk: int | list = 1
    model_type: str = "hunyuan_v1_moe"
    _IGNORED = HunYuanDenseV1Config._IGNORED | MOE_TRAINING_ONLY

    def _validate(self):
        super()._validate()
        n = self.num_hidden_layers
        for key in ("num_experts", "moe_topk"):
            v = getattr(self, key)
            per = v if isinstance(v, list) else [v] * n
            if len(per) != n or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in per):
                raise ValueError(f"config: {key} must be a positive integer or a list of {n} of them, got {v!r}")
            setattr(self, f"_{key}", per)
        for i, (e, k) in enumerate(zip(self._num_experts, self._moe_topk)):
            if k > e:
                raise ValueError(f"config: moe_topk {k} exceeds num_experts {e} in layer {i}")

    def layer_experts(self, i: int) -> tuple[int, int]:
        return self._num_experts[i], self._moe_topk[i]


def build(cfg: HunYuanMoEV1Config, t):
    rope = default_rope(cfg, base=cfg.rope_base(), scaling=None if cfg.alpha else "config")

    def moe(i, p):
        e, k = cfg.layer_experts(i)
        return moe_weights(t, p, cfg, n_experts=e, top_k=k, inter=cfg.intermediate_size, norm_topk=True,
                           router="mlp.gate.wg", experts="mlp.experts", shared="mlp.shared_mlp",
                           shared_inter=cfg.intermediate_size)

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, context_length=rope.context_length, moe_for=moe)
    for i, L in enumerate(dec.layers):
        a = f"model.layers.{i}.self_attn."
        L.q_norm = norm(t, a + "query_layernorm", cfg.head_dim, "rms", cfg.rms_norm_eps)
        L.k_norm = norm(t, a + "key_layernorm", cfg.head_dim, "rms", cfg.rms_norm_eps)
        L.norm_after_rope = True
    return dec


Config = HunYuanMoEV1Config
