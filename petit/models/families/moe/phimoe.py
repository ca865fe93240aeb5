"""PhiMoE (Phi-3.5-MoE, `phimoe`): Mixtral's layout of routed experts in every layer (w1 gate, w3 up, w2 down of
`intermediate_size`) under Phi-3's longrope RoPE, with LayerNorms (weight and bias, eps `rms_norm_eps`), optional
q / k / v / o biases (`attention_bias`) and an LM head bias (`lm_head_bias`), and PhiMoE's own routing, the
sparsemixer (kernels/moe.c scoring 2): for each of the two choices in turn, the best expert e not yet chosen and its
logit m; its weight is the softmax over the experts not yet chosen whose (m - l_j) / max(|l_j|, m) <= 2 ·
`router_jitter_noise`, taken at e; the two weights are not renormalised (a weight is 1 when no other expert is that
close). transformers' sparsemixer always chooses two: another `num_experts_per_tok` is refused.
`input_jitter_noise` and the sparsemixer's Gumbel sampling are training-only.

RoPE: `rope_scaling` (`rope_parameters`) longrope with PhiMoE's `short_mscale` / `long_mscale`: per forward pass
reaching seq_len positions, the frequencies use `long_factor` when seq_len > `original_max_position_embeddings`,
else `short_factor`, and cos / sin are multiplied by long_mscale when seq_len > the scaling's own
`original_max_position_embeddings`, else short_mscale. That is transformers 4.57's PhimoeRotaryEmbedding and the
model's own code; transformers 5.25 computes the frequencies without the length and so always takes short_factor
(a regression: tests/fixtures/hf5_moe_a/README.md shows it on the 4.57 fixture), while its mscale choice is the same.
Petit follows the model (tests/fixtures/hf_moe_more/phimoe, made by 4.57, holds the long regime; hf5_moe_a/phimoe,
made by 5.25, the short one, where both agree)."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import llama_like
from petit.models.blocks.config import boolean, positive_number
from petit.models.families.moe.mixtral import MixtralConfig
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.moe_config import MOE_TRAINING_ONLY
from petit.models.blocks.rope import Rope, scaling_type

MSCALES = ("short_mscale", "long_mscale")


@dataclass(kw_only=True)
class PhimoeConfig(MixtralConfig):
    vocab_size: int = 32064
    hidden_size: int = 4096
    intermediate_size: int = 6400
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 8
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 4096 * 32
    rope_theta: float = 1e6
    sliding_window: int | None = None
    num_local_experts: int = 16
    num_experts_per_tok: int = 2
    router_jitter_noise: float = 0.01
    attention_bias: bool = False
    lm_head_bias: bool = False
    original_max_position_embeddings: int | None = None
    model_type: str = "phimoe"
    _REQUIRED = ()
    _IGNORED = MOE_TRAINING_ONLY | {"input_jitter_noise"}
    _ROPE_SCALING_EXTRA = frozenset(MSCALES)

    def _validate(self):
        s = self.rope_scaling
        plain = {k: v for k, v in s.items() if k not in MSCALES} if isinstance(s, dict) else s
        self.rope_scaling = plain
        try:
            super()._validate()
        finally:
            self.rope_scaling = s
        if self.num_experts_per_tok != 2:
            raise ValueError(f"config: num_experts_per_tok {self.num_experts_per_tok} is not supported by the phimoe "
                             f"family: PhiMoE's sparsemixer always chooses two experts")
        positive_number(self, "router_jitter_noise")
        boolean(self, "attention_bias", "lm_head_bias")
        if isinstance(s, dict) and scaling_type(plain) == "longrope":
            for k in MSCALES:
                v = s.get(k)
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ValueError(f"config: rope_scaling {k} must be a number, got {v!r} (PhiMoE's longrope "
                                     f"multiplies cos / sin by it)")
            if not isinstance(s.get("original_max_position_embeddings"), int):
                raise ValueError("config: rope_scaling original_max_position_embeddings must be an integer (PhiMoE "
                                 "chooses the mscale by it)")
        elif isinstance(s, dict) and any(k in s for k in MSCALES):
            raise ValueError(f"config: {' / '.join(MSCALES)} belong to PhiMoE's longrope, not to a "
                             f"{scaling_type(plain)} rope_scaling")


class PhimoeRope(Rope):
    """Phi-3's longrope (frequencies by the forward's length) with PhiMoE's mscale (cos / sin times short_mscale or
    long_mscale, by the length against the scaling's own original_max_position_embeddings)."""

    def __init__(self, dim: int, base: float, scaling: dict | None, max_pos: int, orig: int | None):
        s = dict(scaling or {})
        self.mscale = tuple(s.pop(k, None) for k in MSCALES)
        self.mscale_at = s.get("original_max_position_embeddings")
        super().__init__(dim, base, s or None, max_pos, orig)

    def _long_mscale(self, seq_len: int) -> bool:
        return self.kind == "longrope" and self.mscale[0] is not None and seq_len > self.mscale_at

    def inv_freq(self, seq_len: int) -> tuple[np.ndarray, float]:
        inv, att = super().inv_freq(seq_len)
        if self.kind == "longrope" and self.mscale[0] is not None:
            att = float(self.mscale[1] if self._long_mscale(seq_len) else self.mscale[0])
        return inv, att

    def tables(self, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        if self.kind != "longrope":
            return super().tables(seq_len)
        key = (seq_len > (self.orig_max or self.s.get("original_max_position_embeddings") or self.max_pos),
               self._long_mscale(seq_len))
        if key != self._key or seq_len > self._n:
            n = max(seq_len, 2 * self._n if key == self._key else seq_len, 256)
            inv, att = self.inv_freq(seq_len)
            ang = np.arange(n, dtype=np.float32)[:, None] * inv[None, :]          # float32 as transformers
            self.cos = (np.cos(ang.astype(np.float64)) * att).astype(np.float32)
            self.sin = (np.sin(ang.astype(np.float64)) * att).astype(np.float32)
            self._key, self._n = key, n
        return self.cos, self.sin


def build(cfg: PhimoeConfig, t):
    rope = PhimoeRope(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, cfg.max_position_embeddings,
                      cfg.original_max_position_embeddings)
    w = cfg.sliding_window or 0

    def moe(i, p):
        m = moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=2, inter=cfg.intermediate_size,
                        norm_topk=False, router="block_sparse_moe.gate", experts="block_sparse_moe.experts",
                        names=("w1", "w3", "w2"))
        m.scoring, m.jitter_eps = "sparsemixer", float(cfg.router_jitter_noise)
        return m

    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, kind="layer", norm_bias=True, qkv_bias=cfg.attention_bias,
                     o_bias=cfg.attention_bias, rope_for=lambda i: rope, window_for=lambda i: w,
                     context_length=rope.context_length, moe_for=moe)
    if cfg.lm_head_bias:
        dec.lm_head_b = t.vec("lm_head.bias", (cfg.vocab_size,))
    return dec


Config = PhimoeConfig
