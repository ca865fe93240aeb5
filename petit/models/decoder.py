"""The decoder every family runs: a stack of attention + MLP blocks described by plain data (`Arch`, `Layer`), over
weights prepared once. A family module maps its Hugging Face config and tensor names onto these pieces; this module
holds the only forward pass.

Per layer the pass is a handful of C calls: norm, q|k|v product (one call for the three), biases, q/k norms, RoPE +
cache store, attention (causal, optionally soft-capped and windowed), output product accumulated into the residual,
norm, gate|up product, gated activation, down product. What a family switches on adds a call, never a Python loop
over tokens or heads.
"""
import threading
from dataclasses import dataclass, field

import numpy as np

from petit import testing_faults
from petit.models.rope import Rope
from petit.native import ACTIVATIONS, Weight, ffi, lib

NORM_KINDS = {"rms": 0, "layer": 1}


def fptr(a: np.ndarray):
    return ffi.cast("float *", ffi.from_buffer(a))


class Vec:
    """A float32 vector (or [rows, n] per-head block) the C calls read: a norm weight or a bias."""

    def __init__(self, a: np.ndarray):
        self.a = np.ascontiguousarray(a, np.float32)
        self.p = fptr(self.a)
        self.rows = self.a.shape[0] if self.a.ndim == 2 else 1


@dataclass
class Norm:
    """A normalisation: RMSNorm or LayerNorm, weight (None: ones), bias (None: zeros)."""
    kind: str
    eps: float
    w: Vec | None = None
    b: Vec | None = None

    def __call__(self, x, rows: int, D: int, y) -> int:
        return lib.pt_norm(NORM_KINDS[self.kind], x, self.w.p if self.w else ffi.NULL, self.b.p if self.b else ffi.NULL,
                           self.eps, rows, D, self.w.rows if self.w else 1, y)


@dataclass
class Layer:
    """One block. Norms left None are absent (e.g. OLMo 2 has no pre-norms, only post-norms)."""
    q: Weight
    k: Weight
    v: Weight
    o: Weight
    down: Weight
    up: Weight
    gate: Weight | None = None          # None: a plain MLP act(up(x) + b) -> down
    attn_norm: Norm | None = None
    mlp_norm: Norm | None = None        # in a parallel block with one shared norm: None
    post_attn_norm: Norm | None = None  # applied to the attention output before the residual add (Gemma 2/3, OLMo 2)
    post_mlp_norm: Norm | None = None
    q_norm: Norm | None = None
    k_norm: Norm | None = None
    q_b: Vec | None = None
    k_b: Vec | None = None
    v_b: Vec | None = None
    o_b: Vec | None = None
    gate_b: Vec | None = None
    up_b: Vec | None = None
    down_b: Vec | None = None
    rope: Rope | None = None            # None: no position rotation in this layer (NoPE)
    window: int = 0                     # sliding-window size; 0: full causal attention


@dataclass
class Arch:
    """What is the same in every layer."""
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    context_length: int
    act: str = "silu"                   # the MLP activation (gated: act(gate) * up)
    parallel: bool = False              # x + attn(n1(x)) + mlp(n2(x)) instead of two sequential residual steps
    qk_norm_per_head: bool = True       # q/k norms over each head (Qwen 3, Gemma 3) or over the whole row (OLMo 2)
    attn_scale: float | None = None     # None: head_dim ** -0.5
    attn_softcap: float = 0.0
    residual_scale: float = 1.0         # Granite's residual_multiplier
    embed_scale: float = 1.0            # Gemma's sqrt(hidden_size), Granite's embedding_multiplier
    logit_scale: float = 1.0            # Cohere's logit_scale, 1 / Granite's logits_scaling
    logit_softcap: float = 0.0
    extra: dict = field(default_factory=dict)


class _Scratch:
    """Activation buffers for up to `cap` tokens, with their C pointers."""

    def __init__(self, a: Arch, cap: int):
        D, F = a.hidden_size, a.intermediate_size
        q, kv = a.num_attention_heads * a.head_dim, a.num_key_value_heads * a.head_dim
        self.cap = cap
        self.ids = np.zeros(cap, np.int32)
        self.ids_p = ffi.cast("int32_t *", ffi.from_buffer(self.ids))
        widths = {"x": D, "xn": D, "xn2": D, "tmp": D, "q": q, "k": kv, "v": kv, "att": q, "g": F, "u": F, "h": F}
        self.arrays = {n: np.zeros((cap, w), np.float32) for n, w in widths.items()}
        self.p = {n: fptr(a) for n, a in self.arrays.items()}


class Decoder:
    """The forward pass.

    Args:
        arch: the sizes and the switches.
        embed: the token embedding [vocab, hidden].
        layers: the blocks.
        final_norm: the norm before the LM head.
        lm_head: the output matrix (the embedding when tied); lm_head_b an optional bias.
        pos_embed: learned absolute positions [n_pos, hidden] (GPT-2), float32, or None.
    """

    def __init__(self, arch: Arch, embed: Weight, layers: list[Layer], final_norm: Norm, lm_head: Weight,
                 lm_head_b: Vec | None = None, pos_embed: np.ndarray | None = None):
        self.arch, self.embed, self.layers, self.final_norm = arch, embed, layers, final_norm
        self.lm_head, self.lm_head_b, self.pos_embed = lm_head, lm_head_b, pos_embed
        self._scratch = None
        self._lock = threading.Lock()     # one forward pass at a time: the scratch buffers are shared
        testing_faults.apply(self)        # TEST-ONLY: a no-op unless PETIT_TEST_FAULT is set (petit/testing_faults.py)

    @property
    def weight_type(self) -> str:
        return self.layers[0].down.dtype if self.layers else self.embed.dtype

    def scratch(self, T: int) -> _Scratch:
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _Scratch(self.arch, max(T, 16))
        return self._scratch

    def forward(self, ids, cache, logits_out: np.ndarray | None = None) -> None:
        """Run tokens `ids` at positions cache.pos .. cache.pos+T-1, append them to the cache, and write the logits
        of the last logits_out.shape[0] positions into logits_out (or skip the head when it is None)."""
        with self._lock:
            self._forward(ids, cache, logits_out)

    def _forward(self, ids, cache, logits_out) -> None:
        a, T = self.arch, len(ids)
        KV, hd, D, F = a.num_key_value_heads, a.head_dim, a.hidden_size, a.intermediate_size
        layout = (len(self.layers), KV, cache.n_ctx, hd)
        if cache.layout != layout or cache.n_ctx > a.context_length:
            raise ValueError(f"this KV cache {cache.layout} was not made for this model (needs {layout[:2]} + "
                             f"(n_ctx <= {a.context_length}, {hd})): use model.new_cache()")
        pos0 = cache.pos
        if pos0 + T > cache.n_ctx:
            raise ValueError(f"context full: {pos0} + {T} tokens exceed the cache size {cache.n_ctx}")
        s = self.scratch(T)
        s.ids[:T] = ids
        p = s.p
        if lib.pt_get_rows(self.embed.c, s.ids_p, T, p["x"]) != 0:
            bad = [int(t) for t in ids if not 0 <= t < a.vocab_size]
            raise ValueError(f"token id(s) {bad[:5]} out of range for a vocabulary of {a.vocab_size}")
        x = s.arrays["x"]
        if a.embed_scale != 1.0:
            x[:T] *= np.float32(a.embed_scale)
        if self.pos_embed is not None:
            x[:T] += self.pos_embed[pos0:pos0 + T]
        tables = {}                          # one RoPE table per distinct Rope object, for this pass
        scale = a.attn_scale if a.attn_scale is not None else hd ** -0.5
        rc = 0                               # the C calls return 0, or < 0 on a bad argument; checked once per layer
        for i, L in enumerate(self.layers):
            # attention input: the pre-norm (or the residual itself when the layer has none)
            h = p["x"]
            if L.attn_norm is not None:
                rc |= L.attn_norm(p["x"], T, D, p["xn"])
                h = p["xn"]
            mlp_in = None
            if a.parallel:                   # both branches read the block's input
                if L.mlp_norm is not None:
                    rc |= L.mlp_norm(p["x"], T, D, p["xn2"])
                    mlp_in = p["xn2"]
                else:
                    mlp_in = h
            rc |= self._attention(i, L, h, T, pos0, cache, s, tables, scale)
            rc |= self._residual(L.o, L.o_b, L.post_attn_norm, p["att"], T, s)
            if mlp_in is None:
                mlp_in = p["x"]
                if L.mlp_norm is not None:
                    rc |= L.mlp_norm(p["x"], T, D, p["xn"])
                    mlp_in = p["xn"]
            rc |= self._mlp(L, mlp_in, T, F, s)
            rc |= self._residual(L.down, L.down_b, L.post_mlp_norm, p["h"], T, s)
            if rc:
                raise RuntimeError(f"kernel error {rc} in layer {i} (positions {pos0}..{pos0 + T - 1})")
        cache.pos = pos0 + T
        if logits_out is not None:
            self._head(p, T, D, logits_out)

    def _attention(self, i, L: Layer, h, T, pos0, cache, s, tables, scale) -> int:
        a, p = self.arch, s.p
        H, KV, hd = a.num_attention_heads, a.num_key_value_heads, a.head_dim
        rc = lib.pt_matmul3(L.q.c, L.k.c, L.v.c, h, T, p["q"], p["k"], p["v"])
        for b, name, n in ((L.q_b, "q", H * hd), (L.k_b, "k", KV * hd), (L.v_b, "v", KV * hd)):
            if b is not None:
                rc |= lib.pt_bias_act(p[name], b.p, T, n, 0)
        for norm, name, heads in ((L.q_norm, "q", H), (L.k_norm, "k", KV)):
            if norm is not None:
                rc |= norm(p[name], T * heads, hd, p[name]) if a.qk_norm_per_head else norm(p[name], T, heads * hd,
                                                                                             p[name])
        if L.rope is not None:
            key = id(L.rope)
            if key not in tables:
                cos, sin = L.rope.tables(pos0 + T)
                tables[key] = (fptr(cos), fptr(sin), cos.shape[0], L.rope.dim, int(L.rope.interleaved), (cos, sin))
            cp, sp, n_pos, rot, inter, _ = tables[key]
        else:
            cp, sp, n_pos, rot, inter = ffi.NULL, ffi.NULL, 0, 0, 0
        kc, vc = cache.k_ptr[i], cache.v_ptr[i]
        if cache.kv_type == "int8":
            ks, vs = cache.ks_ptr[i], cache.vs_ptr[i]
            rc |= lib.pt_rope_store_q8(p["q"], p["k"], p["v"], T, H, KV, hd, rot, pos0, cp, sp, n_pos, inter,
                                       kc, ks, vc, vs, cache.n_ctx)
            rc |= lib.pt_attention_q8(p["q"], kc, ks, vc, vs, cache.n_ctx, T, H, KV, hd, pos0, scale,
                                      a.attn_softcap, L.window, p["att"])
        else:
            rc |= lib.pt_rope_store(p["q"], p["k"], p["v"], T, H, KV, hd, rot, pos0, cp, sp, n_pos, inter,
                                    kc, vc, cache.n_ctx)
            rc |= lib.pt_attention(p["q"], kc, vc, cache.n_ctx, T, H, KV, hd, pos0, scale, a.attn_softcap,
                                   L.window, p["att"])
        return rc

    def _mlp(self, L: Layer, h, T, F, s) -> int:
        p, act = s.p, ACTIVATIONS[self.arch.act]
        if L.gate is not None:
            rc = lib.pt_matmul3(L.gate.c, L.up.c, ffi.NULL, h, T, p["g"], p["u"], ffi.NULL)
            if L.up_b is not None:
                rc |= lib.pt_bias_act(p["g"], L.gate_b.p, T, F, 0) | lib.pt_bias_act(p["u"], L.up_b.p, T, F, 0)
            return rc | lib.pt_glu(act, p["g"], p["u"], T * F, p["h"])
        rc = lib.pt_matmul(L.up.c, h, T, p["h"], 0)
        return rc | lib.pt_bias_act(p["h"], L.up_b.p if L.up_b else ffi.NULL, T, F, act)

    def _residual(self, W: Weight, b: Vec | None, post: Norm | None, h, T, s) -> int:
        """x += scale * post(W h + b): straight into the residual when nothing sits between."""
        a, p, D = self.arch, s.p, self.arch.hidden_size
        if post is None and a.residual_scale == 1.0:
            rc = lib.pt_matmul(W.c, h, T, p["x"], 1)
            return rc | (lib.pt_bias_act(p["x"], b.p, T, D, 0) if b is not None else 0)
        rc = lib.pt_matmul(W.c, h, T, p["tmp"], 0)
        if b is not None:
            rc |= lib.pt_bias_act(p["tmp"], b.p, T, D, 0)
        if post is not None:
            rc |= post(p["tmp"], T, D, p["tmp"])
        lib.pt_axpy(p["x"], a.residual_scale, p["tmp"], T * D)
        return rc

    def _head(self, p, T, D, logits_out) -> None:
        a = self.arch
        n = logits_out.shape[0]             # the last n positions
        first = p["x"] + (T - n) * D
        self.final_norm(first, n, D, p["xn"])
        if lib.pt_matmul(self.lm_head.c, p["xn"], n, fptr(logits_out), 0):
            raise RuntimeError("kernel error in the LM head")
        if self.lm_head_b is not None:
            logits_out += self.lm_head_b.a
        if a.logit_scale != 1.0:
            logits_out *= np.float32(a.logit_scale)
        if a.logit_softcap:
            c = np.float32(a.logit_softcap)
            np.tanh(logits_out / c, out=logits_out)
            logits_out *= c
