"""DiffLlama (the Differential Transformer on Llama, transformers' `diffllama`): Llama's block (RMSNorm, RoPE,
grouped-query q / k / v with `attention_bias`, SwiGLU MLP) whose attention subtracts two softmax attentions. Each
layer's lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init, lambda_init = 0.8 -
0.6 exp(-0.3 layer); pair p of the heads' outputs is [o1_p, o2_p] - lambda [o1_{p+H/2}, o2_{p+H/2}] (o1 / o2: the
head's attention over the first / last half of the kv heads' values), RMS-normed over its 2 head_dim values without
a weight and times (1 - lambda_init) before o_proj. Petit runs it as one attention of each head twice
(petit/models/blocks/diff_attn.py: the q / k / v products are Llama's, rows reordered, copied into the doubled heads;
the KV cache is twice Llama's). num_key_value_heads must be even and attention_dropout 0, as transformers requires."""
import math
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import default_rope, llama_like
from petit.models.blocks.config import DecoderConfig, boolean, check_decoder, refuse_act
from petit.models.blocks.decoder import Norm, Vec
from petit.models.blocks.diff_attn import DiffAttn, Expand, compact
from petit.native import Weight

LAMBDAS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")


@dataclass(kw_only=True)
class DiffLlamaConfig(DecoderConfig):
    vocab_size: int = 32000
    hidden_size: int = 2048
    intermediate_size: int = 8192
    num_hidden_layers: int = 16
    num_attention_heads: int = 32
    rms_norm_eps: float = 1e-5
    attention_bias: bool = False
    model_type: str = "diffllama"
    unknown_keys: list = field(default_factory=list, repr=False)

    _REQUIRED = ()
    _IGNORED = frozenset({"lambda_std_dev"})        # the lambdas' initialisation (training only)

    @classmethod
    def _refuse(cls, d):
        refuse_act(d, "hidden_act", ("silu", "swish"), "diffllama", "silu")
        if d.get("attention_dropout") not in (None, 0, 0.0):
            raise ValueError(f"config: attention_dropout {d['attention_dropout']!r}: DiffLlama defines no dropout "
                             "of its differential attention (transformers refuses it too)")

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings",))
        boolean(self, "attention_bias")
        if self.num_key_value_heads % 2:
            raise ValueError(f"config: num_key_value_heads {self.num_key_value_heads} must be even: DiffLlama "
                             "splits the values' kv heads into two halves")


def lambda_init(i: int) -> float:
    return 0.8 - 0.6 * math.exp(-0.3 * i)


def _rows(W: Weight, idx: np.ndarray) -> Weight:
    """The matrix of W's rows idx, in W's type (quantized rows are whole blocks along a row: copied as they are)."""
    if W.interleaved:
        raise ValueError("diffllama: an interleaved matrix cannot be rearranged")
    raw = np.ascontiguousarray(W.raw.reshape(W.shape[0], -1)[idx])
    return Weight(raw, W.dtype, (len(idx), W.shape[1]))


def build(cfg: DiffLlamaConfig, t):
    rope = default_rope(cfg)
    H, K, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    dec = llama_like(t, cfg, eps=cfg.rms_norm_eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias,
                     rope_for=lambda i: rope, context_length=rope.context_length)
    rows = compact(H, K, d)
    for i, L in enumerate(dec.layers):
        a = f"model.layers.{i}.self_attn."
        lq1, lk1, lq2, lk2 = (t.vec(a + n, (d,)).a for n in LAMBDAS)
        lam = np.exp(np.sum(lq1 * lk1, dtype=np.float32)) - np.exp(np.sum(lq2 * lk2, dtype=np.float32))
        init = lambda_init(i)
        L.q, L.k, L.v = (_rows(W, r) for W, r in zip((L.q, L.k, L.v), rows))
        biases = [None if b is None else Vec(b.a[r]) for b, r in zip((L.q_b, L.k_b, L.v_b), rows)]
        L.q_b = L.k_b = L.v_b = None                    # added by Expand, to the products before the copies
        L.pre_store = Expand(H, K, d, biases)
        norm = Norm("rms", cfg.rms_norm_eps, Vec(np.full(2 * d, 1.0 - init, np.float32)))
        L.att_out = DiffAttn(H, K, d, float(np.float32(lam) + np.float32(init)), norm)
        L.file_rows = {role: (r, None) for role, r in zip("qkv", rows)}
    dec.arch.num_attention_heads, dec.arch.num_key_value_heads = 2 * H, 2 * K
    return dec


Config = DiffLlamaConfig
