"""The reference forward pass of a ModelSpec: the whole sequence at once, causal mask, no cache, every product in
float64 on the weights as stored (decoded by the reader). With `round_activations` the input of each product with a
block-type matrix is first rounded to int8 blocks, as the engine's integer kernels do."""
import numpy as np

from trainer.reference import ops
from trainer.reference.petit_reader import BLOCKS, KQ8, round_per_token, round_to_int8_blocks


class Forward:
    def __init__(self, reader, spec, round_activations: bool = False):
        self.r, self.spec, self.round_activations = reader, spec, round_activations
        self._cache = {}
        self.routing = []                # each MoE layer's chosen experts [T, top_k] in the last logits() call

    def w(self, name):
        """A tensor decoded to float64 (kept for the next call: verify runs the forward twice)."""
        if name not in self._cache:
            self._cache[name] = self.r.weight(name)
        return self._cache[name]

    def mm(self, h, name, bias=None):
        if self.r.tensors[name][0] == "tq2":       # BitNet's own activation rounding: part of the model
            h = round_per_token(h)
        elif self.round_activations and self.r.tensors[name][0] in BLOCKS:
            h = round_to_int8_blocks(h, 256 if self.r.tensors[name][0] in KQ8 else 32)
        y = h @ self.w(name).T
        return y + self.w(bias) if bias else y

    def norm(self, x, n):
        if n is None:
            return x
        w = self.w(n.weight) + n.add if n.weight else None
        y = ops.norm(x, n.kind, n.eps, w, self.w(n.bias) if n.bias else None)
        if n.gate is not None:                       # A.X-K2's gated norm (issue 36, fam36m)
            y = y * ops.act("sigmoid", self.mm(ops.act("silu", self.mm(y, n.gate[0])), n.gate[1]))
        return y

    def mamba(self, L, h):
        m, T = L.mamba, h.shape[0]
        xz = self.mm(h, m.in_proj)
        di = xz.shape[1] // 2
        x, z = xz[:, :di], xz[:, di:]
        w = self.w(m.conv).reshape(di, -1)                           # [di, K]
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, di)), x], axis=0)
        conv = sum(padded[k:k + T] * w[:, k] for k in range(K)) + (self.w(m.conv_b) if m.conv_b else 0.0)
        u = conv * (0.5 + 0.5 * np.tanh(0.5 * conv))                # silu
        Hm, R = m.heads, m.dt_rank
        dbc, hd = self.mm(u, m.x_proj), di // Hm
        nb = dbc.shape[1] // Hm
        ds = (nb - R) // 2
        A = -np.exp(self.w(m.A_log)).reshape(di, ds)
        Dv, dt_b = self.w(m.D).reshape(di), self.w(m.dt_b).reshape(di)
        y = np.empty((T, di))
        for hh in range(Hm):                                         # Zamba's heads; one elsewhere
            c, blk = slice(hh * hd, (hh + 1) * hd), dbc[:, hh * nb:(hh + 1) * nb]
            dt, B, C = blk[:, :R], blk[:, R:R + ds], blk[:, R + ds:]
            if m.inner_eps is not None:
                ws = [self.w(n) for n in m.inner_w] if m.inner_w else [None] * 3
                dt, B, C = (ops.norm(a, "rms", m.inner_eps, w, None) for a, w in zip((dt, B, C), ws))
            # dt_proj kept float: head h's block of it (the whole matrix when there is one head)
            pre = self.mm(dt, m.dt_proj) if Hm == 1 else dt @ self.w(m.dt_proj)[c, hh * R:(hh + 1) * R].T
            dt = np.logaddexp(0.0, pre + dt_b[c])                   # softplus
            s = np.zeros((hd, ds))
            for t in range(T):
                s = np.exp(dt[t][:, None] * A[c]) * s + (dt[t] * u[t, c])[:, None] * B[t][None, :]
                y[t, c] = s @ C[t] + Dv[c] * u[t, c]
        return self.mm(y * (z * (0.5 + 0.5 * np.tanh(0.5 * z))), m.out_proj)

    def deltanet(self, L, h):
        m, T = L.deltanet, h.shape[0]
        kd, vd = m.n_k * m.dk, m.n_v * m.dv
        zx = self.mm(h, m.in_proj)
        cw = 2 * kd + vd
        qkv, z, b, a = zx[:, :cw], zx[:, cw:cw + vd], zx[:, cw + vd:cw + vd + m.n_v], zx[:, cw + vd + m.n_v:]
        w = self.w(m.conv).reshape(cw, -1)
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, cw)), qkv], axis=0)
        u = sum(padded[k:k + T] * w[:, k] for k in range(K))
        u = u * (0.5 + 0.5 * np.tanh(0.5 * u))                                  # silu
        q, k = u[:, :kd].reshape(T, m.n_k, m.dk), u[:, kd:2 * kd].reshape(T, m.n_k, m.dk)
        v = u[:, 2 * kd:].reshape(T, m.n_v, m.dv)
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) / np.sqrt(m.dk)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
        of = np.arange(m.n_v) // (m.n_v // m.n_k)                                # the key head of each value head
        q, k = q[:, of], k[:, of]
        beta = (0.5 + 0.5 * np.tanh(0.5 * b)) * m.beta_scale
        if m.kda and m.kda_lower_bound < 0:          # Ling 3's bounded gate (issue 36, fam36m)
            g = m.kda_lower_bound * ops.act("sigmoid", np.exp(self.w(m.A_log).reshape(m.n_v, 1))
                                            * (a + self.w(m.dt_bias)).reshape(T, m.n_v, m.dk))
        elif m.kda:                                   # Kimi: a log decay per head and key channel
            g = (-np.exp(self.w(m.A_log).reshape(m.n_v, 1))
                 * np.logaddexp(0.0, a + self.w(m.dt_bias)).reshape(T, m.n_v, m.dk))
        else:
            g = -np.exp(self.w(m.A_log)) * np.logaddexp(0.0, a + self.w(m.dt_bias))
        S, o = np.zeros((m.n_v, m.dk, m.dv)), np.empty((T, m.n_v, m.dv))
        for t in range(T):
            S = S * (np.exp(g[t])[:, :, None] if m.kda else np.exp(g[t])[:, None, None])
            delta = (v[t] - np.einsum("hij,hi->hj", S, k[t])) * beta[t][:, None]
            S = S + k[t][:, :, None] * delta[:, None, :]
            o[t] = np.einsum("hij,hi->hj", S, q[t])
        o = ops.norm(o, "rms", m.eps, self.w(m.norm), None).reshape(T, vd)
        gate = 0.5 + 0.5 * np.tanh(0.5 * z)                           # sigmoid(z): Kimi's gate; times z: silu
        return self.mm(o * (gate if m.kda else z * gate), m.out_proj)

    def short_conv(self, L, h):
        m, T = L.short_conv, h.shape[0]
        bcx = self.mm(h, m.in_proj)
        D = bcx.shape[1] // 3
        v = bcx[:, :D] * bcx[:, 2 * D:]
        w = self.w(m.conv).reshape(D, -1)
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, D)), v], axis=0)
        c = sum(padded[k:k + T] * w[:, k] for k in range(K))
        return self.mm(bcx[:, D:2 * D] * c, m.out_proj)

    def rglru(self, L, h):
        m, T = L.rglru, h.shape[0]
        xy = self.mm(h, m.in_proj)
        W = xy.shape[1] // 2
        x, y = xy[:, :W] + self.w(m.x_b), ops.act("gelu_tanh", xy[:, W:] + self.w(m.y_b))
        w = self.w(m.conv).reshape(W, -1)
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, W)), x], axis=0)
        u = sum(padded[k:k + T] * w[:, k] for k in range(K)) + self.w(m.conv_b)
        H = m.heads
        uh = u.reshape(T, H, W // H)
        ig = 1.0 / (1.0 + np.exp(-(np.einsum("thi,hio->tho", uh, self.w(m.wx)).reshape(T, W)
                                   + self.w(m.bx).reshape(W))))
        rg = 1.0 / (1.0 + np.exp(-(np.einsum("thi,hio->tho", uh, self.w(m.wa)).reshape(T, W)
                                   + self.w(m.ba).reshape(W))))
        log_a = -8.0 * rg * np.logaddexp(0.0, self.w(m.c))
        s, out = np.zeros(W), np.empty((T, W))
        for t in range(T):
            if t == 0:                   # transformers' reset at position 0: no decay, no input normalisation
                s = ig[t] * u[t]
            else:
                s = np.exp(log_a[t]) * s + np.sqrt(1.0 - np.exp(2.0 * log_a[t])) * ig[t] * u[t]
            out[t] = s
        return self.mm(out * y, m.out_proj, m.out_b)

    def rwkv6(self, L, x):
        m, T = L.rwkv6, x.shape[0]
        D = x.shape[1]
        H, N = m.heads, D // m.heads
        h = self.norm(x, m.ln1)
        sx = np.concatenate([np.zeros((1, D)), h[:-1]]) - h
        maa = [self.w(n).reshape(D) for n in m.maa]
        lora = np.tanh((h + sx * maa[0]) @ self.w(m.maa_w1)).reshape(T, 5, -1)
        mm = np.einsum("tie,ied->itd", lora, self.w(m.maa_w2))
        mix = [h + sx * (maa[1 + i] + mm[i]) for i in range(5)]                     # w, k, v, r, g
        r, k, v = self.mm(mix[3], m.in_proj), self.mm(mix[1], m.k), self.mm(mix[2], m.v)
        g = ops.act("silu", self.mm(mix[4], m.g))
        w = np.exp(-np.exp(self.w(m.decay).reshape(D) + np.tanh(mix[0] @ self.w(m.dec_w1)) @ self.w(m.dec_w2)))
        u = self.w(m.bonus).reshape(H, N)
        S, y = np.zeros((H, N, N)), np.empty((T, H, N))
        for t in range(T):
            kt, vt, rt, wt = (a[t].reshape(H, N) for a in (k, v, r, w))
            kv = kt[:, :, None] * vt[:, None, :]
            y[t] = np.einsum("hi,hij->hj", rt, u[:, :, None] * kv + S)
            S = S * wt[:, :, None] + kv
        y = ops.norm(y, "layer", m.gn_eps, None, None).reshape(T, D)
        x = x + m.scale * self.mm((y * self.w(m.lnx_w) + self.w(m.lnx_b)) * g, m.out_proj)
        h = self.norm(x, m.ln2)
        sx = np.concatenate([np.zeros((1, D)), h[:-1]]) - h
        xk, xr = h + sx * self.w(m.cm_k).reshape(D), h + sx * self.w(m.cm_r).reshape(D)
        kk = np.maximum(self.mm(xk, m.ck), 0.0) ** 2
        x = x + m.scale * (1.0 / (1.0 + np.exp(-self.mm(xr, m.cr)))) * self.mm(kk, m.cv)
        return x / 2 if m.halve else x

    def gla(self, L, h):
        m, T = L.gla, h.shape[0]
        D = h.shape[1]
        H, N = m.heads, D // m.heads
        sx = np.concatenate([np.zeros((1, D)), h[:-1]]) - h
        maa = [self.w(n).reshape(D) for n in m.maa]                                  # x, w, k, v, r, g
        lora = np.tanh((h + sx * maa[0]) @ self.w(m.maa_w1)).reshape(T, 5, -1)
        mm = np.einsum("tie,ied->itd", lora, self.w(m.maa_w2))                     # r, k, v, w, g blocks
        mix = {c: h + sx * (maa[1 + "wkvrg".index(c)] + mm["rkvwg".index(c)]) for c in "wkvrg"}
        r = self.mm(mix["r"], m.in_proj, m.rb)
        k, v = (np.repeat(z.reshape(T, m.kv_heads, N), H // m.kv_heads, axis=1).reshape(T, D)
                for z in (self.mm(mix["k"], m.k, m.kb), self.mm(mix["v"], m.v, m.vb)))
        g = 1.0 / (1.0 + np.exp(-self.mm(mix["g"], m.g)))
        w = np.exp(-np.exp(self.w(m.decay).reshape(D) + np.tanh(mix["w"] @ self.w(m.dec_w1)) @ self.w(m.dec_w2)))
        k = k * (1.0 - w)
        S, y = np.zeros((H, N, N)), np.empty((T, H, N))
        for t in range(T):
            kt, vt, rt, wt = (a[t].reshape(H, N) for a in (k, v, r, w))
            S = S * wt[:, :, None] + kt[:, :, None] * vt[:, None, :]
            y[t] = N ** -0.5 * np.einsum("hi,hij->hj", rt, S)
        return self.mm(y.reshape(T, D) * g, m.out_proj)

    def rwkv7(self, L, x):
        m, T = L.rwkv7, x.shape[0]
        D = x.shape[1]
        H, N = m.heads, D // m.heads
        sig = lambda z: 1.0 / (1.0 + np.exp(-z))                       # noqa: E731
        h = self.norm(x, m.ln1)
        sx = np.concatenate([np.zeros((1, D)), h[:-1]]) - h
        xs = [h + sx * self.w(n).reshape(D) for n in m.maa]                # r, w, k, v, a, g

        def lora(c, z, act):
            down, up, bias = m.lora[c]
            y = act(z @ self.w(down).T) @ self.w(up).T
            return y + self.w(bias) if bias else y
        r, k, v = self.mm(xs[0], m.in_proj), self.mm(xs[2], m.k), self.mm(xs[3], m.v)
        w = np.exp(-0.606531 * sig(lora("w", xs[1], np.tanh)))
        if m.first:
            self._v_first = v
        else:
            v = v + (self._v_first - v) * sig(lora("v", xs[3], lambda z: z))
        g = lora("g", xs[5], sig)
        a = sig(lora("a", xs[4], lambda z: z))
        kk = (k * self.w(m.k_k).reshape(D)).reshape(T, H, N)
        kk = kk / np.maximum(np.sqrt((kk * kk).sum(-1, keepdims=True)), 1e-12)
        k = k * (1 + (a - 1) * self.w(m.k_a).reshape(D))
        S, y = np.zeros((H, N, N)), np.empty((T, H, N))
        for t in range(T):
            rt, wt, kt, vt, at = (z[t].reshape(H, N) for z in (r, w, k, v, a))
            sa = np.einsum("hij,hj->hi", S, -kk[t])
            S = S * wt[:, None, :] + vt[:, :, None] * kt[:, None, :] + sa[:, :, None] * (kk[t] * at)[:, None, :]
            y[t] = np.einsum("hij,hj->hi", S, rt)
        y = ops.norm(y, "layer", m.gn_eps, None, None).reshape(T, D) * self.w(m.lnx_w) + self.w(m.lnx_b)
        rk = ((r * k).reshape(T, H, N) * self.w(m.r_k).reshape(H, N)).sum(-1, keepdims=True)
        y = y + (v.reshape(T, H, N) * rk).reshape(T, D)
        x = x + self.mm(y * g, m.out_proj)
        h = self.norm(x, m.ln2)
        sx = np.concatenate([np.zeros((1, D)), h[:-1]]) - h
        kk2 = np.maximum(self.mm(h + sx * self.w(m.cm_k).reshape(D), m.ck), 0.0) ** 2
        return x + self.mm(kk2, m.cv)

    def rwkv4(self, L, x):
        m, T = L.rwkv4, x.shape[0]
        D = x.shape[1]
        h = self.norm(x, m.ln1)
        prev = np.concatenate([np.zeros((1, D)), h[:-1]])
        xs = [h * self.w(n).reshape(D) + prev * (1 - self.w(n).reshape(D)) for n in m.mix]
        k, v = self.mm(xs[0], m.in_proj), self.mm(xs[1], m.v)
        r = 1.0 / (1.0 + np.exp(-self.mm(xs[2], m.r)))
        w, u = -np.exp(self.w(m.decay).reshape(D)), self.w(m.first).reshape(D)
        num, den, y = np.zeros(D), np.zeros(D), np.empty((T, D))
        for t in range(T):                   # the plain sums (float64 needs no running maximum at these sizes)
            y[t] = (num + np.exp(u + k[t]) * v[t]) / (den + np.exp(u + k[t]))
            num, den = np.exp(w) * num + np.exp(k[t]) * v[t], np.exp(w) * den + np.exp(k[t])
        x = x + m.scale * self.mm(r * y, m.out_proj)
        h = self.norm(x, m.ln2)
        prev = np.concatenate([np.zeros((1, D)), h[:-1]])
        ck, cr = (self.w(n).reshape(D) for n in m.cm)
        kk = np.maximum(self.mm(h * ck + prev * (1 - ck), m.ck), 0.0) ** 2
        x = x + m.scale * (1.0 / (1.0 + np.exp(-self.mm(h * cr + prev * (1 - cr), m.cr)))) * self.mm(kk, m.cv)
        return x / 2 if m.halve else x

    def mlstm(self, L, h):
        """issue 36, fam36n: xLSTM's mLSTM layer in the parallel (quadratic) form, not the engine's recurrence."""
        m, T = L.mlstm, h.shape[0]
        H, dk, dv = m.heads, m.dk, m.dv
        z = self.mm(h, m.in_proj) + self.w(m.in_b)
        Dk, Dv = H * dk, H * dv
        q, k = z[:, :Dk].reshape(T, H, dk), z[:, Dk:2 * Dk].reshape(T, H, dk)
        v, o = z[:, 2 * Dk:2 * Dk + Dv].reshape(T, H, dv), z[:, 2 * Dk + Dv:2 * Dk + 2 * Dv]
        ig, fg = z[:, 2 * Dk + 2 * Dv:2 * Dk + 2 * Dv + H], z[:, 2 * Dk + 2 * Dv + H:]
        if m.cap:
            ig, fg = m.cap * np.tanh(ig / m.cap), m.cap * np.tanh(fg / m.cap)
        B = np.cumsum(-np.logaddexp(0.0, -fg), axis=0)                    # [T, H]
        causal = np.tril(np.ones((T, T), bool))
        y = np.empty((T, H, dv))
        for j in range(H):
            logD = np.where(causal, B[:, None, j] - B[None, :, j] + ig[None, :, j], -np.inf)
            mt = np.maximum(B[:, j], logD.max(axis=1))
            S = (q[:, j] @ k[:, j].T) / np.sqrt(dk) * np.exp(logD - mt[:, None])
            y[:, j] = S @ v[:, j] / (np.maximum(np.abs(S.sum(axis=1)), np.exp(-mt)) + m.eps)[:, None]
        y = (y - y.mean(axis=2, keepdims=True)) / np.sqrt(y.var(axis=2, keepdims=True) + m.norm_eps)
        y = y.reshape(T, Dv) * self.w(m.norm_w).reshape(Dv) / (1.0 + np.exp(-o))
        return self.mm(y, m.out_proj)

    def mamba2(self, L, h):
        m, T = L.mamba2, h.shape[0]
        zxbcdt = self.mm(h, m.in_proj)
        H, G, N = m.n_heads, m.n_groups, m.state
        di = (zxbcdt.shape[1] - 2 * G * N - H) // 2
        conv_dim = di + 2 * G * N
        z, xbc, dt = zxbcdt[:, :di], zxbcdt[:, di:di + conv_dim], zxbcdt[:, di + conv_dim:]
        w = self.w(m.conv).reshape(conv_dim, -1)
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, conv_dim)), xbc], axis=0)
        c = sum(padded[k:k + T] * w[:, k] for k in range(K)) + (self.w(m.conv_b) if m.conv_b else 0.0)
        u = c * (0.5 + 0.5 * np.tanh(0.5 * c))
        P = di // H
        x, B, C = u[:, :di].reshape(T, H, P), u[:, di:di + G * N].reshape(T, G, N), u[:, di + G * N:].reshape(T, G, N)
        dt = np.clip(np.logaddexp(0.0, dt + self.w(m.dt_bias)), *m.dt_limit)           # [T, H]
        A, Dv = -np.exp(self.w(m.A_log)), self.w(m.D)
        grp = np.arange(H) // (H // G)
        S, y = np.zeros((H, P, N)), np.empty((T, H, P))
        for t in range(T):
            S = np.exp(dt[t] * A)[:, None, None] * S + (dt[t][:, None] * x[t])[:, :, None] * B[t][grp][:, None, :]
            y[t] = np.einsum("hpn,hn->hp", S, C[t][grp]) + Dv[:, None] * x[t]
        y, gate = y.reshape(T, di), z * (0.5 + 0.5 * np.tanh(0.5 * z))
        g = y * gate if m.norm_mode != "norm_first" else y
        if m.norm_mode != "none":                    # per group of di / norm_groups channels (Falcon-H1)
            gs = g.reshape(T, m.norm_groups, -1)
            g = ops.norm(gs, "rms", m.eps, self.w(m.norm).reshape(m.norm_groups, -1), None).reshape(T, di)
        if m.norm_mode == "norm_first":
            g = g * gate
        return self.mm(g, m.out_proj)

    def mla(self, L, h):
        s, m, T = self.spec, L.mla, h.shape[0]
        H = len(m.k_absorb)                          # the layer's own heads (Dots 3's sliding layers: fewer)
        # LongCat-Flash's and Dots 3's latent rescaling (longcat group; issue 36, fam36k): the normed query latent,
        # which Dots 3's indexer reads too, times q_scale, the normed kv latent times kv_scale
        x = (self.norm(self.mm(h, m.q_a), m.q_a_norm) if m.q_a else h) * m.q_scale
        q_in = np.concatenate([x, self.mm(h, m.q_a)], axis=1) if m.q_cat else x     # A.X-K2 (issue 36, fam36m)
        q_nope, q_pe = self.mm(q_in, m.q_nope).reshape(T, H, -1), self.mm(q_in, m.q_pe).reshape(T, H, -1)
        c, k_pe = self.norm(self.mm(h, m.kv_c), m.kv_norm) * m.kv_scale, self.mm(h, m.kv_pe)[:, None, :]
        if m.k_pe_norm is not None:                   # Dots 3's k_rope_only_layernorm (issue 36, fam36k)
            k_pe = self.norm(k_pe, m.k_pe_norm)
        if L.rope is not None:                        # Kimi Linear's latent attention: no rotation at all
            inv, factor = L.rope.freqs(T)
            q_pe = ops.rotate(q_pe, L.rope.dim, inv, factor, L.rope.interleaved)
            k_pe = ops.rotate(k_pe, L.rope.dim, inv, factor, L.rope.interleaved)
        k_nope = np.stack([c @ self.w(n) for n in m.k_absorb], axis=1)                 # [T, H, nope]
        v = np.stack([c @ self.w(n).T for n in m.v_absorb], axis=1)                    # [T, H, v]
        q = np.concatenate([q_nope, q_pe], axis=2)
        if L.temperature is not None:           # Mistral 4 (issue 36, newdec): Ministral 3's query scaling, (f, a, 1)
            f, a = L.temperature[:2]
            q = q * (1.0 + a * np.log(np.floor(np.arange(T) / f) + 1.0))[:, None, None]
        k = np.concatenate([k_nope, np.broadcast_to(k_pe, (T, H, k_pe.shape[2]))], axis=2)
        scale = s.attn_scale if m.scale is None else m.scale
        if m.dsa is not None:                   # DeepSeek Sparse Attention: each query's chosen positions only
            keep = self.dsa_keep(m.dsa, h, x, L.rope)
            sc = np.einsum("thd,shd->hts", q, k) * scale
            sc[:, ~keep] = -np.inf
            mx = sc.max(axis=-1, keepdims=True)
            sk = self.w(L.sinks)[:, None, None] if L.sinks else None        # HY-V4's sinks (fam36m)
            mx = np.maximum(mx, sk) if sk is not None else mx
            p = np.exp(sc - mx)
            p /= p.sum(axis=-1, keepdims=True) + (np.exp(sk - mx) if sk is not None else 0.0)
            out = np.einsum("hts,shd->thd", p, v).reshape(T, -1)
        else:       # the same weights over values of another width: attention over [T, H, nope + rope] scores, then v
            out = ops.attention_values(q, k, v, scale, L.window)
        if m.gate is not None:      # sigmoid gates: one a head (Dots 3, Ling 3) or a value (A.X-K2, HY-V4); issue 36
            g = ops.act("sigmoid", self.mm(h if m.gate_x else q_in, m.gate))
            out = (out.reshape(T, g.shape[1], -1) * g[:, :, None]).reshape(T, -1)
        return self.norm(self.mm(out, L.o, L.o_b), L.post_attn_norm)

    def dsa_keep(self, d, h, q_resid, rope):
        """[T, T] bool: the positions each query attends to (a shared layer: the last indexer's choice)."""
        T = h.shape[0]
        if d.wq_b is None:
            return self._dsa_keep
        iq = self.mm(q_resid, d.wq_b).reshape(T, d.heads, d.dim)
        ik = self.norm(self.mm(h, d.wk), d.k_norm)[:, None, :]
        inv, factor = rope.freqs(T)
        iq = ops.rotate(iq, rope.dim, inv, factor, d.interleaved)
        ik = ops.rotate(ik, rope.dim, inv, factor, d.interleaved)[:, 0]
        w = self.w(d.w_proj)
        hw = (h @ w.T) * d.heads ** -0.5                                            # [T, heads]
        score = np.einsum("th,ths->ts", hw, np.maximum(np.einsum("thd,sd->ths", iq, ik) * d.dim ** -0.5, 0.0))
        keep = np.zeros((T, T), bool)
        for t in range(T):
            if t < d.top_k:
                keep[t, :t + 1] = True
            else:
                keep[t, np.argsort(-score[t, :t + 1], kind="stable")[:d.top_k]] = True
        self._dsa_keep = keep
        choice = np.full((T, d.top_k), -1)               # the choice routes too: [T, top_k] positions, -1 after
        for t in range(T):
            s = np.flatnonzero(keep[t])
            choice[t, :len(s)] = s
        self.routing.append(choice)
        return keep

    def attention(self, L, h):
        if L.mla is not None:
            return self.mla(L, h)
        s, T = self.spec, h.shape[0]
        H, KV, hd = L.heads or s.heads, s.kv_heads, s.head_dim
        q, k, v = self.mm(h, L.q, L.q_b), self.mm(h, L.k, L.k_b), self.mm(h, L.v, L.v_b)
        if L.clip:
            q, k, v = (np.clip(a, -L.clip, L.clip) for a in (q, k, v))
        if L.q_norm is not None and not L.qk_norm_over_heads:            # over the whole projection (OLMo 2)
            q, k = self.norm(q, L.q_norm), self.norm(k, L.k_norm)
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        if L.q_norm is not None and L.qk_norm_over_heads and not L.norm_after_rope:
            q, k = self.norm(q, L.q_norm), self.norm(k, L.k_norm)
        if L.rope is not None:
            inv, factor = L.rope.freqs(T)
            q = ops.rotate(q, L.rope.dim, inv, factor, L.rope.interleaved)
            k = ops.rotate(k, L.rope.dim, inv, factor, L.rope.interleaved)
        if L.norm_after_rope:
            q, k = self.norm(q, L.q_norm), self.norm(k, L.k_norm)
        scale = s.attn_scale if s.attn_scale is not None else hd ** -0.5
        if L.diff is not None:                       # DiffLlama (issue 36, fam36d)
            return self.mm(self.diff(L.diff, q, k, v, scale, L.window), L.o, L.o_b)
        bias = None
        if L.key_bias is not None:                   # SmallDoge (issue 36, fam36d): exp(A softplus(dt_proj v))
            A, dt, dt_b = L.key_bias
            z = self.mm(v.reshape(T, KV * hd), dt, dt_b)
            bias = np.exp(self.w(A) * np.where(z > 20, z, np.log1p(np.exp(np.minimum(z, 20))))).T
        keep = self.block_keep(L, h, H) if L.block_sparse is not None else None     # MiniMax-M3 (fam36i)
        if L.keep is not None:                       # Qwen4-Exp's QSA (issue 36, the q4exp group)
            keep = L.keep(self, L, h, H)
        out = ops.attention(q, k, v, scale, s.attn_softcap, L.window, self.w(L.sinks) if L.sinks else None, L.chunk,
                            L.temperature, L.alibi, bias, keep)
        if L.attn_gate is not None:                  # Qwen3-Next: each output value times sigmoid of its gate
            g = self.mm(h, L.attn_gate)
            if L.attn_gate_b is not None:            # Beam (issue 36, fam36i): one bias a head
                g = g + np.repeat(self.w(L.attn_gate_b), hd)
            g = np.logaddexp(0.0, g) if L.attn_gate_softplus else 0.5 + 0.5 * np.tanh(0.5 * g)
            out = out * np.repeat(g, L.attn_gate_width, axis=1)    # Laguna (fam36g): softplus, one a head or value
        if L.moa_router is not None:                 # JetMoE: each expert's heads times its gate (jetmoe group)
            logits = self.mm(h, L.moa_router)
            E = logits.shape[1]
            top = np.argsort(-logits, axis=1, kind="stable")[:, :L.moa_top_k]      # ties: the lower expert first
            self.routing.append(np.sort(top, axis=1))
            sel = np.take_along_axis(logits, top, axis=1)
            g = np.exp(sel - sel[:, :1])
            w = np.zeros_like(logits)
            np.put_along_axis(w, top, g / g.sum(axis=1, keepdims=True), axis=1)
            out = (out.reshape(T, KV, E, hd) * w[:, None, :, None]).reshape(T, -1)
        return self.norm(self.mm(self.norm(out, L.o_norm), L.o, L.o_b), L.post_attn_norm)

    def block_keep(self, L, h, H):
        """[H, T, T] bool: the positions each query head may see in a MiniMax-M3 sparse layer (issue 36, fam36i)."""
        b, T = L.block_sparse, h.shape[0]
        iq = self.norm(self.mm(h, b.wq).reshape(T, b.heads, b.dim), b.q_norm)
        ik = self.norm(self.mm(h, b.wk), b.k_norm)[:, None, :]
        if L.rope is not None:
            inv, factor = L.rope.freqs(T)
            iq = ops.rotate(iq, L.rope.dim, inv, factor, L.rope.interleaved)
            ik = ops.rotate(ik, L.rope.dim, inv, factor, L.rope.interleaved)
        score = np.einsum("thd,sd->hts", iq, ik[:, 0])
        keep = np.zeros((b.heads, T, T), bool)
        choice = np.full((T, b.heads, b.top_k), -1)
        for t in range(T):
            qb = t // b.block
            local = sorted({max(qb - j, 0) for j in range(b.local)})
            for hh in range(b.heads):
                best = np.array([score[hh, t, c * b.block:min((c + 1) * b.block, t + 1)].max() for c in range(qb + 1)])
                best[local] = np.inf
                chosen = np.sort(np.argsort(-best, kind="stable")[:b.top_k])
                choice[t, hh, :len(chosen)] = chosen
                for c in chosen:
                    keep[hh, t, c * b.block:(c + 1) * b.block] = True
        self.routing.append(choice.reshape(T, -1))
        return np.repeat(keep, H // b.heads, axis=0)

    def diff(self, D, q, k, v, scale, window):
        """DiffLlama's two attentions over the halves of the values, their pairs subtracted and RMS-normed."""
        T, H, hd = q.shape
        half = v.shape[1] // 2
        o1, o2 = (ops.attention(q, k, np.concatenate([part, part], axis=1), scale, 0.0, window).reshape(T, H, hd)
                  for part in (v[:, :half], v[:, half:]))
        pairs = np.concatenate([o1, o2], axis=2)                         # [T, H, 2 hd]
        lam = np.exp(self.w(D.q1) @ self.w(D.k1)) - np.exp(self.w(D.q2) @ self.w(D.k2)) + D.init
        z = pairs[:, :H // 2] - lam * pairs[:, H // 2:]
        z = z / np.sqrt((z * z).mean(axis=2, keepdims=True) + D.eps) * (1.0 - D.init)
        return z.reshape(T, H * hd)

    def moe(self, L, h):
        m = L.moe
        logits = self.mm(h, m.router, m.router_b)
        if m.logit_softcap:                          # Laguna (issue 36, fam36g)
            logits = m.logit_softcap * np.tanh(logits / m.logit_softcap)
        if m.scoring == "sparsemixer":
            return self.norm(self._sparsemixer(m, h, logits), L.post_mlp_norm)
        if m.scoring == "sigmoid":
            p = 0.5 + 0.5 * np.tanh(0.5 * logits)
        else:
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
        c = logits if m.bias_logits else p                              # what the choice is made on
        c = c + self.w(m.sel_bias) if m.sel_bias else c
        if m.n_group > 1:                                               # only the best groups' experts
            g = c.reshape(len(c), m.n_group, -1)
            score = g.max(axis=2) if m.group_score == "max" else np.sort(g, axis=2)[:, :, -2:].sum(axis=2)
            keep = np.argsort(-score, axis=1, kind="stable")[:, :m.topk_group]
            mask = np.zeros_like(score, bool)
            np.put_along_axis(mask, keep, True, axis=1)
            c = np.where(np.repeat(mask, g.shape[2], axis=1), c, 0.0 if m.group_fill_zero else -np.inf)
        top = np.argsort(-c, axis=1, kind="stable")[:, :m.top_k]       # ties: the lower expert first
        self.routing.append(np.sort(top, axis=1))
        w = np.take_along_axis(p, top, axis=1)
        if m.norm_topk:
            w = w / (w.sum(axis=1, keepdims=True) + m.norm_eps)
        w = w * m.routed_scale
        out = np.zeros_like(h)
        act = m.act or self.spec.act
        for e, (gate, up, down) in enumerate(m.experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                x = h[rows]
                if m.scale_input:
                    x = x * w[rows, slot][:, None]
                gb, ub, db = m.biases[e] if m.biases else (None, None, None)
                if m.plain:                                             # no gate (Nemotron-H)
                    y = self.mm(ops.act(act, self.mm(x, up, ub)), down, db)
                else:
                    y = self.mm(ops.glu_clamped(act, self.mm(x, gate, gb), self.mm(x, up, ub), m.swiglu_limit,
                                                m.limit_after_act), down, db)
                if m.post_norm:                                         # Ergo: each route normed (fam36h)
                    y = ops.norm(y, "rms", m.post_norm_eps, self.w(m.post_norm)[e], None)
                np.add.at(out, rows, y if m.scale_input else y * w[rows, slot][:, None])
        if m.n_zero:                                  # zero-computation experts: h times their weight (longcat)
            out = out + h * np.where(top >= len(m.experts), w, 0.0).sum(axis=1)[:, None]
        if m.shared is not None:
            gate, up, down = m.shared
            gb, ub, db = m.shared_b or (None, None, None)
            if m.plain:
                y = self.mm(ops.act(act, self.mm(h, up, ub)), down, db)
            else:
                y = self.mm(ops.glu_clamped(self.spec.act, self.mm(h, gate, gb), self.mm(h, up, ub),
                                            m.sh_swiglu_limit, m.limit_after_act), down, db)
            if m.shared_gate is not None:
                y = y / (1.0 + np.exp(-self.mm(h, m.shared_gate)))
            if m.sh_post_norm:
                y = ops.norm(y, "rms", m.post_norm_eps, self.w(m.sh_post_norm), None)
            out = out + y
        return self.norm(out, L.post_mlp_norm)

    def lightning(self, m, h):
        """Issue 30, the hybrid group: MiniMax's lightning attention (spec.LightningSpec), token by token."""
        T, H, hd = h.shape[0], m.n_heads, m.head_dim
        di = H * hd
        zx = self.mm(h, m.in_proj)
        silu = lambda a: a * (0.5 + 0.5 * np.tanh(0.5 * a))          # noqa: E731
        v, k, q = (silu(zx[:, j * di:(j + 1) * di]).reshape(T, H, hd) for j in (1, 2, 3))
        lam = np.exp(-np.asarray(m.slopes, np.float64))
        S, o = np.zeros((H, hd, hd)), np.empty((T, H, hd))
        for t in range(T):
            S = lam[:, None, None] * S + k[t][:, :, None] * v[t][:, None, :]
            o[t] = np.einsum("hi,hij->hj", q[t], S)
        o = ops.norm(o.reshape(T, di), "rms", m.eps, self.w(m.norm), None)
        return self.mm(o * (0.5 + 0.5 * np.tanh(0.5 * zx[:, :di])), m.out_proj)

    def shared(self, S, x, e0):
        """Issue 30, the hybrid group: one use of Zamba2's shared block (spec.SharedSpec)."""
        s, T = self.spec, x.shape[0]
        H, KV, hd = s.heads, s.kv_heads, s.head_dim

        def proj(h, name, key):
            y = self.mm(h, name)
            if key in S.adapters:
                a, b = S.adapters[key]
                y = y + self.mm(self.mm(h, a), b)
            return y
        c = self.norm(np.concatenate([x, e0], axis=1), S.in_norm)
        q, k, v = proj(c, S.q, "q"), proj(c, S.k, "k"), proj(c, S.v, "v")
        q, k, v = q.reshape(T, H, hd), k.reshape(T, KV, hd), v.reshape(T, KV, hd)
        if S.rope is not None:
            inv, factor = S.rope.freqs(T)
            q = ops.rotate(q, S.rope.dim, inv, factor, S.rope.interleaved)
            k = ops.rotate(k, S.rope.dim, inv, factor, S.rope.interleaved)
        y = self.norm(self.mm(ops.attention(q, k, v, S.scale, 0.0, 0), S.o), S.ff_norm)
        m = self.mm(ops.act(s.act, proj(y, S.gate, "gate")) * proj(y, S.up, "up"), S.down)
        return self.mm(m, S.linear)

    def _sparsemixer(self, m, h, logits):
        """PhiMoE's routing (transformers' sparsemixer, eval): for each choice in turn the best expert not yet chosen,
        weighed by the softmax over the experts not yet chosen within the relative threshold 2 eps of its logit;
        not renormalised. Then the chosen experts' outputs times their weights, summed."""
        T, E = logits.shape
        top = np.zeros((T, m.top_k), np.int64)
        w = np.zeros((T, m.top_k))
        kept = np.zeros((T, m.top_k, E), bool)
        for t in range(T):
            l, left = logits[t], np.ones(E, bool)
            for j in range(m.top_k):
                e = int(np.flatnonzero(left)[np.argmax(l[left])])
                mx = l[e]
                with np.errstate(divide="ignore", invalid="ignore"):
                    keep = left & ~((mx - l) / np.maximum(np.abs(l), mx) > 2 * m.jitter_eps)
                keep[e] = True
                top[t, j], w[t, j], kept[t, j] = e, 1.0 / np.exp(l[keep] - mx).sum(), keep
                left[e] = False
        # the routing record: the experts, then each choice's mask (a flipped mask changes a weight, not an expert)
        self.routing.append(np.concatenate([np.sort(top, axis=1), kept.reshape(T, -1).astype(np.int64)], axis=1))
        out = np.zeros_like(h)
        for e, (gate, up, down) in enumerate(m.experts):
            rows, slot = np.nonzero(top == e)
            if rows.size:
                x = h[rows]
                y = self.mm(ops.glu(m.act or self.spec.act, self.mm(x, gate), self.mm(x, up)), down)
                np.add.at(out, rows, y * w[rows, slot][:, None])
        return out

    def mlp(self, L, h):
        if L.moe is not None:                        # with down_b: an output bias after the experts (JetMoE)
            return self.moe(L, h) + self.w(L.down_b) if L.down_b else self.moe(L, h)
        if L.gate is not None:
            g, u = self.mm(h, L.gate, L.gate_b), self.mm(h, L.up, L.up_b)
            a = ops.glu(self.spec.act, g, u)            # gpt-oss's clamped SwiGLU too (MiniMax-M3)
        elif L.xielu is not None:
            a = ops.xielu(self.mm(h, L.up, L.up_b), *(float(self.w(n).reshape(-1)[0]) for n in L.xielu),
                          bf16=L.xielu_bf16)
        else:
            a = ops.act(self.spec.act, self.mm(h, L.up, L.up_b))
        return self.norm(self.mm(self.norm(a, L.down_norm), L.down, L.down_b), L.post_mlp_norm)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        s, T = self.spec, len(ids)
        self.routing = []
        if s.forward is not None:                     # issue 30, the gemma group: a family's own forward (Gemma 3n)
            return s.forward(self, ids)
        x = self.w(s.embed)[ids] * s.embed_scale
        if s.pos_embed:
            x = x + self.w(s.pos_embed)[s.pos_offset:s.pos_offset + T]
        x = self.norm(x, s.embed_norm)
        rs = s.residual_scale
        e0 = x                                        # Zamba's shared blocks read the embeddings beside x
        for L in s.layers:
            if L.lightning is not None:               # MiniMax: post-norms on the stream, x = alpha x + beta f(x)
                x = self.norm(L.resid_alpha[0] * x + rs * self.lightning(L.lightning, self.norm(x, L.attn_norm)),
                              L.resid_attn_norm)
                x = self.norm(L.resid_alpha[1] * x + rs * self.mlp(L, self.norm(x, L.mlp_norm)), L.resid_mlp_norm)
                continue
            if L.shared is not None:                  # Zamba: the mixer reads norm(x + the shared block's output)
                mix = self.mamba if L.mamba is not None else self.mamba2        # Zamba v1's: multi-head Mamba-1
                x = x + rs * mix(L, self.norm(x + self.shared(L.shared, x, e0), L.attn_norm))
                continue
            h = self.norm(x, L.attn_norm)
            if L.mamba is not None:                   # a Mamba block: its mixer only; a hybrid's (Jamba) with an MLP
                x = x + rs * self.mamba(L, h)
                if L.moe is not None or L.down is not None:
                    x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.mamba2 is not None:                  # a Mamba-2 mixer; a hybrid's (Granite 4.0-H) with an MLP after
                x = x + rs * self.mamba2(L, h)
                if L.o is not None:                   # Falcon-H1: attention beside the mixer, on the same input
                    x = x + rs * self.attention(L, h)
                if L.moe is not None or L.down is not None:
                    x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.short_conv is not None:              # LFM2: the conv in place of attention, then the MLP
                x = x + rs * self.norm(self.short_conv(L, h), L.post_attn_norm)     # LFM3's post-norm
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.mlstm is not None:                   # issue 36, fam36n: xLSTM's mLSTM layer, then the MLP
                x = x + rs * self.mlstm(L, h)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.rwkv4 is not None:                   # a whole RWKV-4 block
                x = self.rwkv4(L, x)
                continue
            if L.rwkv7 is not None:                   # a whole RWKV-7 block (layer 0 keeps v_first)
                x = self.rwkv7(L, x)
                continue
            if L.gla is not None:                     # issue 30, ggufx: QRWKV6's time mixing, then the MLP
                x = x + rs * self.gla(L, h)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.rwkv6 is not None:                   # a whole RWKV-6 block (its own norms and adds)
                x = self.rwkv6(L, x)
                continue
            if L.rglru is not None:                   # Griffin's recurrent block, then the MLP
                x = x + rs * self.rglru(L, h)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.deltanet is not None:                # Qwen3-Next's linear attention, then the MLP or experts
                x = x + rs * self.deltanet(L, h)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.q is None and L.mla is None:         # an MLP block alone (Nemotron-H)
                x = x + rs * self.mlp(L, self.norm(x, L.mlp_norm))
                continue
            if L.up is None and L.moe is None:        # an attention block alone (Nemotron-H)
                x = x + rs * self.attention(L, h)
                continue
            if s.parallel:
                m_in = self.norm(x, L.mlp_norm) if L.mlp_norm is not None else h
                x = x + rs * self.attention(L, h) + rs * self.mlp(L, m_in)
            else:
                a0, a1 = (self.w(a) if isinstance(a, str) else a for a in L.resid_alpha)    # names: per channel
                b0, b1 = L.branch_scale
                x = self.norm(a0 * x + rs * b0 * self.attention(L, h), L.resid_attn_norm)
                x = self.norm(a1 * x + rs * b1 * self.mlp(L, self.norm(x, L.mlp_norm)), L.resid_mlp_norm)
        x = self.norm(x, s.final_norm)                # final_norm None: none
        if s.head_dense is not None:                  # issue 36, fam36j: ModernBERT's prediction head
            W, b, act, n = s.head_dense
            x = self.norm(ops.act(act, self.mm(x, W, b)), n)
        y = self.mm(x, s.head, s.head_b) * s.logit_scale
        if s.logit_softcap:
            y = s.logit_softcap * np.tanh(y / s.logit_softcap)
        return y
