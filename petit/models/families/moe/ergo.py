"""Ergo (Amazon): Gemma 2's sandwich block (input_layernorm, post_attention_layernorm on the attention's output,
pre_feedforward_layernorm, post_feedforward_layernorm on the MLP's; RMSNorm, eps 1e-12) whose residual adds are
gates: h = sigmoid(w) * post_norm(branch) + sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2) * h, per channel
(`attention_residual_gate`, `feedforward_residual_gate`: post-norms weighted by the first factor, resid_alpha the
second). Attention: one fused qkv_proj (split into q / k / v rows when read), RMSNorm on each head of q and k,
head_dim hidden / heads; the sliding layers (`sliding_window`, `local_attention_window` in the released configs) use
RoPE on adjacent pairs, every `global_attention_every_n_layers`-th layer is full with no position encoding and q, k
times sqrt(`global_attention_scale`) when set (on their norms' weights here). MLPs: the first `num_dense_blocks`
layers (or `mlp_layer_types` "dense") relu(up x)^2 -> down of first_dense_intermediate_size; the others route to
the top `num_experts_per_tok` of sigmoid(float32 router logits) + e_score_correction_bias, weighed by the chosen
sigmoids / (their sum + 1e-20) x moe_routed_scaling_factor, each expert relu(up x)^2 -> down then RMS-normed with
its own weight row (`post_expert_norm`, pt_moe.post_norm), plus a shared expert relu(up x)^2 -> down, RMS-normed
(`shared_experts.norm`). The LM head is never tied. transformers saves the released layout (`tok_embeddings`,
`layers.N.attention.wqkv`, `feed_forward.gate_kernel` [hidden, experts], 3-D `feed_forward.up_proj` [E, hidden,
inter], ...: its conversion mapping's sources), read here as it reads them, as are its modules' names."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import default_rope, layer_types, llama_like, window_of
from petit.models.blocks.config import DecoderConfig, aliased, check_decoder, positive_int, positive_number
from petit.models.blocks.decoder import Vec
from petit.models.families.moe.ergo_names import hf_tensors  # noqa: F401  (the family's reading of the released names)
from petit.models.blocks.moe import Moe
from petit.models.blocks.moe_config import check_routing, mlp_kinds

@dataclass(kw_only=True)
class ErgoConfig(DecoderConfig):
    intermediate_size: int | None = None        # not Ergo's: first_dense_intermediate_size (reported when given)
    vocab_size: int = 262144
    hidden_size: int = 8192
    num_hidden_layers: int = 64
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 524288
    rms_norm_eps: float = 1e-12
    rope_theta: float = 1_000_000.0
    first_dense_intermediate_size: int = 32768
    num_dense_blocks: int = 1
    moe_intermediate_size: int = 4096
    shared_intermediate_size: int = 8192
    num_experts: int = 256
    num_experts_per_tok: int = 8
    moe_routed_scaling_factor: float = 8 ** 0.5
    sliding_window: int = 512
    global_attention_every_n_layers: int = 4
    global_attention_scale: float | None = None
    layer_types: list | None = None
    mlp_layer_types: list | None = None
    model_type: str = "ergo"

    _REQUIRED = ()
    _ROPE_LAYER_TYPES = ("sliding_attention",)          # the full layers have no position encoding

    @classmethod
    def from_dict(cls, d: dict):
        if isinstance(d, dict):
            d = aliased(d, {"local_attention_window": "sliding_window"})
            heads, D = d.get("num_attention_heads", cls.num_attention_heads), d.get("hidden_size", cls.hidden_size)
            if d.get("head_dim") is not None and isinstance(heads, int) and heads and d["head_dim"] != D // heads:
                raise ValueError(f"config: head_dim {d['head_dim']!r}: transformers' Ergo uses hidden_size / "
                                 f"num_attention_heads ({D // heads})")
            for k, why in (("head_dim", None), ("intermediate_size", "first_dense_intermediate_size"),
                           ("hidden_act", "relu squared"), ("tie_word_embeddings", "the LM head is never tied")):
                if d.get(k) is not None and why:
                    d[f"{k} (not read by Ergo: {why})"] = None      # reported by the shared check
                d = {n: v for n, v in d.items() if n != k}
        return super().from_dict(d)

    def to_dict(self) -> dict:
        d = super().to_dict()
        for k in ("intermediate_size", "head_dim", "hidden_act", "tie_word_embeddings"):
            d.pop(k)
        return d

    def _validate(self):
        positive_int(self, "first_dense_intermediate_size", "moe_intermediate_size", "shared_intermediate_size",
                     "global_attention_every_n_layers")
        self.intermediate_size = self.first_dense_intermediate_size      # the dense MLPs' width (their scratch)
        check_decoder(self, ("rms_norm_eps", "rope_theta", "moe_routed_scaling_factor"), window=True)
        if self.global_attention_scale is not None:
            positive_number(self, "global_attention_scale")
        check_routing(self)
        self.types(), self.sparse()

    def types(self) -> list[str]:
        n = self.global_attention_every_n_layers
        return layer_types(self, lambda i: "sliding_attention" if (i + 1) % n else "full_attention")

    def sparse(self) -> list[bool]:
        return mlp_kinds(self, lambda i: i < self.num_dense_blocks)


def build(cfg: ErgoConfig, t):
    types, sparse, D, E, eps = cfg.types(), cfg.sparse(), cfg.hidden_size, cfg.num_experts, cfg.rms_norm_eps
    rope = default_rope(cfg, interleaved=True)
    S, F = cfg.shared_intermediate_size, cfg.moe_intermediate_size

    def moe_for(i, p):
        if not sparse[i]:
            return None
        x = p + "mlp.experts."
        return Moe(t.float_weight(p + "mlp.gate.linear.weight", (E, D)), None,
                   [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
                   [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)], cfg.num_experts_per_tok, True,
                   act="relu2", plain=True, shared=(None, t.weight(p + "mlp.shared_experts.up_proj.weight", (S, D)),
                                                    t.weight(p + "mlp.shared_experts.down_proj.weight", (D, S))),
                   scoring="sigmoid", sel_bias=t.vec(p + "mlp.gate.e_score_correction_bias", (E,)), norm_eps=1e-20,
                   routed_scale=float(cfg.moe_routed_scaling_factor), post_norm=t.vec(x + "post_expert_norm.weight",
                                                                                      (E, D)),
                   sh_post_norm=t.vec(p + "mlp.shared_experts.norm.weight", (D,)), post_norm_eps=eps)

    def mlp_for(i, p):
        F0 = cfg.first_dense_intermediate_size
        return {"up": t.weight(p + "mlp.up_proj.weight", (F0, D)),
                "down": t.weight(p + "mlp.down_proj.weight", (D, F0))}

    dec = llama_like(t, cfg, eps=eps, qk_norm="head", sandwich=True, moe_for=moe_for, mlp_for=mlp_for,
                     act="relu2", rope_for=lambda i: rope if types[i] == "sliding_attention" else None,
                     window_for=window_of(cfg, types), context_length=rope.context_length)
    gs = cfg.global_attention_scale
    for i, L in enumerate(dec.layers):
        p = f"model.layers.{i}."
        gates = [t.array(p + n, (D,)).astype(np.float64) for n in ("attention_residual_gate.weight",
                                                                     "feedforward_residual_gate.weight")]
        branch = [1.0 / (1.0 + np.exp(-w)) for w in gates]
        L.resid_alpha = tuple(Vec(np.sqrt(1.0 + b) * np.exp(-0.5 * np.logaddexp(0.0, w)))
                              for b, w in zip(branch, gates))
        for norm, b in zip((L.post_attn_norm, L.post_mlp_norm), branch):
            norm.w = Vec(norm.w.a * b)
        if gs is not None and types[i] == "full_attention":        # q and k times sqrt(global_attention_scale)
            for norm in (L.q_norm, L.k_norm):
                norm.w = Vec(norm.w.a * np.sqrt(gs))
    return dec


Config = ErgoConfig
