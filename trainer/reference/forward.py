"""The reference forward pass of a ModelSpec: the whole sequence at once, causal mask, no cache, every product in
float64 on the weights as stored (decoded by the reader). With `round_activations` the input of each product with a
block-type matrix is first rounded to int8 blocks, as the engine's integer kernels do."""
import numpy as np

from trainer.reference import ops
from trainer.reference.petit_reader import BLOCKS, round_to_int8_blocks


class Forward:
    def __init__(self, reader, spec, round_activations: bool = False):
        self.r, self.spec, self.round_activations = reader, spec, round_activations
        self._cache = {}

    def w(self, name):
        """A tensor decoded to float64 (kept for the next call: verify runs the forward twice)."""
        if name not in self._cache:
            self._cache[name] = self.r.weight(name)
        return self._cache[name]

    def mm(self, h, name, bias=None):
        if self.round_activations and self.r.tensors[name][0] in BLOCKS:
            h = round_to_int8_blocks(h)
        y = h @ self.w(name).T
        return y + self.w(bias) if bias else y

    def norm(self, x, n):
        if n is None:
            return x
        w = self.w(n.weight) + n.add if n.weight else None
        return ops.norm(x, n.kind, n.eps, w, self.w(n.bias) if n.bias else None)

    def attention(self, L, h):
        s, T = self.spec, h.shape[0]
        H, KV, hd = s.heads, s.kv_heads, s.head_dim
        q, k, v = self.mm(h, L.q, L.q_b), self.mm(h, L.k, L.k_b), self.mm(h, L.v, L.v_b)
        if L.q_norm is not None and not L.qk_norm_over_heads:            # over the whole projection (OLMo 2)
            q, k = self.norm(q, L.q_norm), self.norm(k, L.k_norm)
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        if L.q_norm is not None and L.qk_norm_over_heads:
            q, k = self.norm(q, L.q_norm), self.norm(k, L.k_norm)
        if L.rope is not None:
            inv, factor = L.rope.freqs(T)
            q = ops.rotate(q, L.rope.dim, inv, factor, L.rope.interleaved)
            k = ops.rotate(k, L.rope.dim, inv, factor, L.rope.interleaved)
        scale = s.attn_scale if s.attn_scale is not None else hd ** -0.5
        out = ops.attention(q, k, v, scale, s.attn_softcap, L.window, self.w(L.sinks) if L.sinks else None, L.chunk,
                            L.temperature)
        return self.norm(self.mm(out, L.o, L.o_b), L.post_attn_norm)

    def moe(self, L, h):
        m = L.moe
        logits = self.mm(h, m.router, m.router_b)
        if m.scoring == "sigmoid":
            p = 0.5 + 0.5 * np.tanh(0.5 * logits)
        else:
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
        top = np.argsort(-p, axis=1, kind="stable")[:, :m.top_k]       # ties: the lower expert first
        w = np.take_along_axis(p, top, axis=1)
        if m.norm_topk:
            w = w / w.sum(axis=1, keepdims=True)
        out = np.zeros_like(h)
        act = m.act or self.spec.act
        for e, (gate, up, down) in enumerate(m.experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                x = h[rows]
                if m.scale_input:
                    x = x * w[rows, slot][:, None]
                gb, ub, db = m.biases[e] if m.biases else (None, None, None)
                y = self.mm(ops.glu(act, self.mm(x, gate, gb), self.mm(x, up, ub)), down, db)
                np.add.at(out, rows, y if m.scale_input else y * w[rows, slot][:, None])
        if m.shared is not None:
            gate, up, down = m.shared
            y = self.mm(ops.act(self.spec.act, self.mm(h, gate)) * self.mm(h, up), down)
            if m.shared_gate is not None:
                y = y / (1.0 + np.exp(-self.mm(h, m.shared_gate)))
            out = out + y
        return self.norm(out, L.post_mlp_norm)

    def mlp(self, L, h):
        if L.moe is not None:
            return self.moe(L, h)
        if L.gate is not None:
            g, u = self.mm(h, L.gate, L.gate_b), self.mm(h, L.up, L.up_b)
            a = ops.act(self.spec.act, g) * u
        else:
            a = ops.act(self.spec.act, self.mm(h, L.up, L.up_b))
        return self.norm(self.mm(a, L.down, L.down_b), L.post_mlp_norm)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        s, T = self.spec, len(ids)
        x = self.w(s.embed)[ids] * s.embed_scale
        if s.pos_embed:
            x = x + self.w(s.pos_embed)[:T]
        rs = s.residual_scale
        for L in s.layers:
            h = self.norm(x, L.attn_norm)
            if s.parallel:
                m_in = self.norm(x, L.mlp_norm) if L.mlp_norm is not None else h
                x = x + rs * self.attention(L, h) + rs * self.mlp(L, m_in)
            else:
                x = x + rs * self.attention(L, h)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
        y = self.mm(self.norm(x, s.final_norm), s.head, s.head_b) * s.logit_scale
        if s.logit_softcap:
            y = s.logit_softcap * np.tanh(y / s.logit_softcap)
        return y
