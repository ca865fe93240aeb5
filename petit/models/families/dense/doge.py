"""SmallDoge (transformers' `doge`): qwen3's attention (RMSNorm over each head of q and k, RoPE, grouped-query, biases
with `attention_bias`) with a dynamic mask: every score of a key gets that key's bias exp(A softplus(dt_proj v)) per
kv head (A [kv heads], dt_proj [kv heads, kv heads * head_dim] over the values; petit/models/blocks/dyn_mask.py), and
residuals scaled per channel: h = input_residual * h + attn(norm(h)), then h = post_attention_residual * h +
mlp(norm(h)) (SwiGLU, biases with `mlp_bias`); `sliding_window` when set.

Past `keep_window_size` keys transformers keeps only each query's top keys by that bias: not run, so the context is
at most keep_window_size (2048 by default). `is_moe` (the CDMoE) is refused: transformers views its router's output
[tokens, 2 * keys] as [2, tokens, keys], so in a prefill of n tokens token i's two key halves are other tokens'
(i // 2 and n / 2 + i // 2, by parity): its choice depends on the sequence and differs from its own decode steps.
"""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, positive_int, refuse_act
from petit.models.blocks.decoder import Norm, Vec
from petit.models.blocks.dyn_mask import PAD, Compact, DynMask, padded, rows
from petit.native import Weight


@dataclass(kw_only=True)
class DogeConfig(DecoderConfig):
    vocab_size: int = 32768
    hidden_size: int = 1024
    intermediate_size: int = 2048
    num_hidden_layers: int = 32
    num_attention_heads: int = 8
    rms_norm_eps: float = 1e-6
    attention_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = None
    keep_window_size: int = 2048
    is_moe: bool = False
    num_experts: int = 16384                # the CDMoE's (is_moe, refused): read, not used
    num_experts_per_tok: int = 64
    norm_topk_prob: bool = False
    model_type: str = "doge"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ()
    _IGNORED = frozenset({"output_router_logits", "router_aux_loss_coef"})     # training only

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "doge", "silu")
        if d.get("is_moe"):
            raise ValueError("config: is_moe: transformers' CDMoE views its router's output [tokens, 2 * keys] as "
                             "[2, tokens, keys], so a prefill routes each token on other tokens' logits and differs "
                             "from its own decode steps; Petit runs the dense Doge only")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",), window=True)
        boolean(self, "attention_bias", "mlp_bias", "is_moe")
        positive_int(self, "keep_window_size")


def _padded_rows(W: Weight, heads: int, d: int) -> Weight:
    """W's rows at `rows(heads, d)` of heads * (d + PAD), zero rows between (zero bytes: 0 in every type)."""
    n = W.shape[0]
    src = np.full(heads * padded(d), n)
    src[rows(heads, d)] = np.arange(n)
    raw = W.raw.reshape(n, -1)
    raw = np.ascontiguousarray(np.concatenate([raw, np.zeros_like(raw[:1])])[src])
    return Weight(raw, W.dtype, (len(src), W.shape[1])), src


def build(cfg: DogeConfig, t):
    H, K, d, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
    rope = default_rope(cfg)
    window = cfg.sliding_window or 0
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     mlp_bias=cfg.mlp_bias, qk_norm="head", rope_for=lambda i: rope, window_for=lambda i: window,
                     context_length=min(rope.context_length, cfg.keep_window_size))
    shrink = np.float32(np.sqrt(d / padded(d)))
    for i, L in enumerate(dec.layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        L.file_rows = {}
        for role, heads in (("q", H), ("k", K), ("v", K)):
            W, src = _padded_rows(getattr(L, role), heads, d)
            setattr(L, role, W)
            L.file_rows[role] = (src, None)
            b = getattr(L, role + "_b")
            if b is not None:
                setattr(L, role + "_b", Vec(np.concatenate([b.a, [0.0]])[src]))
        for name in ("q_norm", "k_norm"):
            n = getattr(L, name)
            w = np.concatenate([n.w.a * shrink, np.zeros(PAD, np.float32)])
            setattr(L, name, Norm("rms", cfg.rms_norm_eps * d / padded(d), Vec(w)))
        dt = t.float_weight(a + "dt_proj.weight", (K, K * d))
        cols = np.zeros((K, K * padded(d)), np.float32)
        cols[:, rows(K, d)] = dt.raw.view(np.float32).reshape(K, K * d)
        dt_b = t.vec(a + "dt_proj.bias", (K,)) if cfg.attention_bias else None
        L.pre_store = DynMask(Weight(cols.view(np.uint8), "f32", cols.shape), dt_b, t.vec(a + "A", (K,)), H, K, d,
                             d ** -0.5)
        L.att_out = Compact(H, d)
        L.resid_alpha = (t.vec(p + "input_residual", (D,)), t.vec(p + "post_attention_residual", (D,)))
    dec.arch.head_dim, dec.arch.attn_scale = padded(d), d ** -0.5
    return dec


Config = DogeConfig
