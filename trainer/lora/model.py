"""LoRA on a frozen base: the forward and backward of one sequence, in the base's dtype (float32 to train, float64 for
the gradient check).

Every target matrix W of a layer computes y = W x + s B (A x), s = alpha / rank, with A [rank, in] and B [out, rank]
(PEFT's layout and names: `model.layers.{i}.self_attn.q_proj.lora_A.weight`). The base's products run through
FrozenBase (the engine's C kernels at float32); the adapters, the norms, RoPE, attention and SwiGLU in NumPy.

Activation checkpointing per layer, past a budget: the forward keeps each layer's caches while they fit in
`keep_bytes` (KEEP_BYTES: the first layers of a small model, all of a 135M one at 256 tokens but a few), and only the
input [T, D] of the layers after; the backward runs those layers' forward again with their caches, then their
backward, one layer at a time, so memory stays within the budget whatever the depth. A kept cache and one computed
again are the same arrays bit for bit, so the gradients do not depend on the budget. The LM head runs only on the
positions whose loss counts."""
from __future__ import annotations

import functools

import numpy as np

from trainer.layers import rmsnorm_backward, rmsnorm_forward, swiglu_backward, swiglu_forward
from trainer.lora.base import MODULES


HEAD_ROWS = 64             # positions whose logits [HEAD_ROWS, vocab] a step holds at once (Qwen2.5's 152k vocabulary
                           # at 512 positions: 311 MB an array, three of them, when they were made whole)
KEEP_BYTES = 256 << 20     # the layers' caches a training step keeps rather than computes again (SmolLM2-135M's
                           # shape at 256 tokens: 61 -> 77 tokens/s at q8_0, peak RSS +280 MiB)


def lora_name(layer: int, target: str, which: str) -> str:
    """PEFT's parameter name, which = "A" or "B"."""
    return f"model.layers.{layer}.{MODULES[target]}.lora_{which}.weight"


def init_adapters(base, targets, rank: int, seed: int) -> dict[str, np.ndarray]:
    """PEFT's init: A uniform in +-1/sqrt(in) (kaiming_uniform with a = sqrt(5)), B zero, float32."""
    rng = np.random.default_rng(seed)
    params = {}
    for i in range(len(base.layers)):
        for t in targets:
            n_in, n_out = base.in_out(i, t)
            bound = 1.0 / np.sqrt(n_in)
            params[lora_name(i, t, "A")] = rng.uniform(-bound, bound, (rank, n_in)).astype(np.float32)
            params[lora_name(i, t, "B")] = np.zeros((n_out, rank), np.float32)
    return params


# ---- pieces ----

def _rope(x, cos, sin, dim, pairs, inverse=False):
    """Rotate the first `dim` values of each head of x [T, heads, hd] (a copy); inverse: the transposed rotation
    (the backward)."""
    out = x.copy()
    if pairs:
        x1, x2 = x[..., 0:dim:2], x[..., 1:dim:2]
        i1, i2 = (slice(0, dim, 2), slice(1, dim, 2))
    else:
        x1, x2 = x[..., :dim // 2], x[..., dim // 2:dim]
        i1, i2 = (slice(0, dim // 2), slice(dim // 2, dim))
    c, s = cos[:, None, :], (-sin if inverse else sin)[:, None, :]
    out[..., i1] = x1 * c - x2 * s
    out[..., i2] = x2 * c + x1 * s
    return out


@functools.lru_cache(maxsize=8)
def _mask_of(T: int, G: int, window: int, dtype_name: str) -> np.ndarray:
    t, j = np.arange(T)[:, None], np.arange(T)[None, :]
    ok = (j <= t) & ((window <= 0) | (t - j < window))
    mask = np.tile(np.where(ok, 0.0, -np.inf).astype(dtype_name), (G, 1))
    mask.flags.writeable = False
    return mask


def _mask(T: int, G: int, window: int, dtype) -> np.ndarray:
    """(G*T, T) additive mask: 0 where key j may be seen from query t (j <= t, within the window), -inf elsewhere."""
    return _mask_of(T, G, window, np.dtype(dtype).name)


def _attention(q, k, v, scale, window):
    """q [T, H, hd], k / v [T, KV, hd] -> out [T, H*hd] and the cache of the backward."""
    T, H, hd = q.shape
    KV = k.shape[1]
    G = H // KV
    # contiguous copies: NumPy's stacked matmul takes BLAS only on contiguous operands (else a slow loop)
    qg = np.ascontiguousarray(q.reshape(T, KV, G, hd).transpose(1, 2, 0, 3)).reshape(KV, G * T, hd)
    kt, vt = np.ascontiguousarray(k.transpose(1, 0, 2)), np.ascontiguousarray(v.transpose(1, 0, 2))
    att = qg @ np.ascontiguousarray(kt.transpose(0, 2, 1))
    att *= att.dtype.type(scale)
    att += _mask(T, G, window, att.dtype)
    att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(axis=-1, keepdims=True)
    y = att @ vt
    out = y.reshape(KV, G, T, hd).transpose(2, 0, 1, 3).reshape(T, H * hd)
    return out, (qg, kt, vt, att, scale)


def _attention_backward(dout, cache):
    qg, kt, vt, att, scale = cache
    KV, GT, hd = qg.shape
    T = kt.shape[1]
    G = GT // T
    dy = np.ascontiguousarray(dout.reshape(T, KV, G, hd).transpose(1, 2, 0, 3)).reshape(KV, G * T, hd)
    att_t = np.ascontiguousarray(att.transpose(0, 2, 1))
    dv = att_t @ dy
    datt = dy @ np.ascontiguousarray(vt.transpose(0, 2, 1))
    datt -= np.sum(datt * att, axis=-1, keepdims=True)
    datt *= att
    datt *= datt.dtype.type(scale)
    dq = (datt @ kt).reshape(KV, G, T, hd).transpose(2, 0, 1, 3).reshape(T, KV * G, hd)
    dk = (np.ascontiguousarray(datt.transpose(0, 2, 1)) @ qg).transpose(1, 0, 2)
    return dq, dk, dv.transpose(1, 0, 2)


class _Linear:
    """One target (or frozen) matrix of a layer: y = W x (+ b) (+ s B A x)."""

    def __init__(self, base, W, b, A, B, s):
        self.base, self.W, self.b, self.A, self.B, self.s = base, W, b, A, B, s

    def forward(self, x):
        y = self.base.mm(self.W, x)
        if self.b is not None:
            y += self.b
        u = None
        if self.A is not None:
            u = x @ self.A.T
            y += (self.s * u) @ self.B.T
        return y, (x, u)

    def backward(self, dy, cache, gA, gB):
        x, u = cache
        dx = self.base.mmt(self.W, dy)
        if self.A is not None:
            dyB = dy @ self.B
            dyB *= dyB.dtype.type(self.s)
            gB += self.s * (dy.T @ u)
            gA += dyB.T @ x
            dx += dyB @ self.A
        return dx


class LoraModel:
    """The base with adapters `params` (name -> array, PEFT names, in the base's dtype), scale s = alpha / rank."""

    def __init__(self, base, params: dict, alpha: float, rank: int, keep_bytes: int = KEEP_BYTES):
        self.base, self.params, self.s = base, params, float(alpha) / float(rank)
        self.keep_bytes = keep_bytes

    def _lin(self, i, t):
        L = self.base.layers[i]
        A, B = self.params.get(lora_name(i, t, "A")), self.params.get(lora_name(i, t, "B"))
        return _Linear(self.base, L["W"][t], L["b"].get(t), A, B, self.s)

    def layer_forward(self, i, x, keep: bool):
        base, L = self.base, self.base.layers[i]
        T, H, KV, hd = x.shape[0], base.H, base.KV, base.hd
        c = {}
        h, c["n1"] = rmsnorm_forward(x, *L["norm1"])
        q, c["q"] = self._lin(i, "q").forward(h)
        k, c["k"] = self._lin(i, "k").forward(h)
        v, c["v"] = self._lin(i, "v").forward(h)
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        if L["q_norm"] is not None:
            q, c["qn"] = self._qk_norm(q, L["q_norm"])
            k, c["kn"] = self._qk_norm(k, L["k_norm"])
        cos, sin, dim, pairs = base.rope_tables(i, T)
        c["rope"] = (cos, sin, dim, pairs)
        q, k = _rope(q, cos, sin, dim, pairs), _rope(k, cos, sin, dim, pairs)
        a, c["att"] = _attention(q, k, v, base.scale, L["window"])
        o, c["o"] = self._lin(i, "o").forward(a)
        x = x + o
        h2, c["n2"] = rmsnorm_forward(x, *L["norm2"])
        g, c["gate"] = self._lin(i, "gate").forward(h2)
        u, c["up"] = self._lin(i, "up").forward(h2)
        m, c["glu"] = swiglu_forward(g, u)
        d, c["down"] = self._lin(i, "down").forward(m)
        return x + d, (c if keep else None)

    def _qk_norm(self, x, norm):
        if self.base.per_head_qk:
            return rmsnorm_forward(x, *norm)
        T = x.shape[0]
        y, cache = rmsnorm_forward(x.reshape(T, -1), *norm)
        return y.reshape(x.shape), cache

    def _qk_norm_backward(self, dy, cache):
        if self.base.per_head_qk:
            return rmsnorm_backward(dy, cache)[0]
        return rmsnorm_backward(dy.reshape(dy.shape[0], -1), cache)[0].reshape(dy.shape)

    def layer_backward(self, i, dx, c, grads):
        base, L = self.base, self.base.layers[i]
        T, H, KV, hd = dx.shape[0], base.H, base.KV, base.hd

        def back(t, dy):
            lin = self._lin(i, t)
            gA, gB = grads.get(lora_name(i, t, "A")), grads.get(lora_name(i, t, "B"))
            return lin.backward(dy, c[t], gA, gB)

        dm = back("down", dx)
        dg, du = swiglu_backward(dm, c["glu"])
        dh2 = back("gate", dg) + back("up", du)
        dx = dx + rmsnorm_backward(dh2, c["n2"])[0]
        da = back("o", dx)
        dq, dk, dv = _attention_backward(da, c["att"])
        cos, sin, dim, pairs = c["rope"]
        dq, dk = _rope(dq, cos, sin, dim, pairs, inverse=True), _rope(dk, cos, sin, dim, pairs, inverse=True)
        if L["q_norm"] is not None:
            dq, dk = self._qk_norm_backward(dq, c["qn"]), self._qk_norm_backward(dk, c["kn"])
        dh = back("q", dq.reshape(T, H * hd)) + back("k", dk.reshape(T, KV * hd)) + back("v", dv.reshape(T, KV * hd))
        return dx + rmsnorm_backward(dh, c["n1"])[0]

    def _head(self, xf):
        logits = self.base.mm(self.base.head, xf)
        if self.base.logit_scale != 1.0:
            logits *= logits.dtype.type(self.base.logit_scale)
        return logits

    def _head_loss(self, xf, rows, targets, w, dxf) -> float:
        """sum w * -log p(targets) at positions `rows` of the final hidden states xf; with dxf, the gradient of
        that sum with respect to xf[rows] is written there."""
        base = self.base
        z = self._head(xf[rows])
        z -= z.max(axis=-1, keepdims=True)
        n = np.arange(len(rows))
        z_t = z[n, targets]
        np.exp(z, out=z)
        sums = z.sum(axis=-1)
        loss = float(np.sum((np.log(sums) - z_t).astype(np.float64) * w))
        if dxf is not None:
            z /= sums[:, None]                           # the softmax, then its gradient
            z[n, targets] -= 1.0
            z *= w[:, None]
            if base.logit_scale != 1.0:
                z *= z.dtype.type(base.logit_scale)
            dxf[rows] = base.mmt(base.head, z)
        return loss

    def loss(self, ids, targets, weights, grads: dict | None = None) -> float:
        """sum_t weights[t] * -log p(targets[t] | ids[:t+1]) over one sequence; with `grads` (name -> array of
        zeros, or running sums), the gradients of that sum are added into it. ids, targets, weights: [T]."""
        base = self.base
        x = base.embed_rows(ids)
        inputs, kept, held = [], [], 0
        for i in range(len(base.layers)):
            inputs.append(x)
            x, cache = self.layer_forward(i, x, keep=grads is not None and held < self.keep_bytes)
            held += _nbytes(cache)
            kept.append(cache if held <= self.keep_bytes else None)
        xf, c_final = rmsnorm_forward(x, *base.final)
        sel = np.flatnonzero(weights)
        if not len(sel):
            return 0.0
        dxf = np.zeros_like(xf) if grads is not None else None
        loss = 0.0
        for at in range(0, len(sel), HEAD_ROWS):      # a few positions at a time: [T, vocab] never whole
            rows = sel[at:at + HEAD_ROWS]
            loss += self._head_loss(xf, rows, targets[rows], np.asarray(weights, xf.dtype)[rows], dxf)
        if grads is None:
            return loss
        dx = rmsnorm_backward(dxf, c_final)[0]
        for i in reversed(range(len(base.layers))):
            cache = kept[i] if kept[i] is not None else self.layer_forward(i, inputs[i], keep=True)[1]
            dx = self.layer_backward(i, dx, cache, grads)
            inputs[i] = kept[i] = None
        return loss


def _nbytes(obj) -> int:
    """The bytes of the arrays a layer's cache holds (views counted as their own: an upper bound)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(v) for v in obj)
    return 0
