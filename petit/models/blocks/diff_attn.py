"""Differential attention (DiffLlama, the Differential Transformer on Llama) from the decoder's ordinary ops.

transformers' DiffLlama keeps Llama's q / k / v of H query and K kv heads of d, and runs softmax attention twice with
the same probabilities: once over the first K/2 value heads, once over the last K/2 (each repeated to K heads). Head
h's two outputs side by side, [o1_h, o2_h] (2d wide), give pair p < H/2:

    z_p = [o1_p, o2_p] - lambda [o1_{p+H/2}, o2_{p+H/2}],   out_p = (1 - lambda_init) RMSNorm(z_p)   (no weight)

and o_proj reads the H/2 pairs' out_p side by side (H d values, as Llama's o_proj does).

The engine runs this as one attention of 2H query heads over 2K kv heads, each original head twice (a KV cache twice
Llama's), in blocks of G = H/K query heads reading one kv head, ordered so that chunk c < K/2 of each token's output
is [o1 of group c, o2 of group c, o1 of group c + K/2, o2 of group c + K/2] (4 G d values; `layout` gives the
checkpoint's rows of these heads). q / k / v are the checkpoint's projections with their rows reordered (`compact`:
chunk c = [group c, group c + K/2] of q, [kv head c, kv head c + K/2] of k and v), and `Expand`, after their
products, adds their biases and copies each chunk into the doubled heads. Then `DiffAttn` gathers z's two terms with
row copies (the chunks are uniform rows, G head-wide copies each), one axpy makes z, a norm of 2d-wide rows with
(1 - lambda_init) as its weight makes out: no op of its own."""
import numpy as np

from petit.native import lib


def layout(H: int, K: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source rows of the engine's q [2H d], k [2K d] and v [2K d] in the checkpoint's q / k / v rows."""
    G, half = H // K, K // 2
    q, k, v = [], [], []
    for c in range(half):
        for j, s in ((c, 0), (c, 1), (c + half, 0), (c + half, 1)):
            q += [h * d + np.arange(d) for h in range(j * G, (j + 1) * G)]
            k.append(j * d + np.arange(d))
            v.append((s * half + c) * d + np.arange(d))
    return tuple(np.concatenate(r) for r in (q, k, v))


def compact(H: int, K: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checkpoint's q / k / v rows in the order the engine's products write them (chunk c < K/2: group c, then
    group c + K/2 of q; kv head c, then kv head c + K/2 of k and v)."""
    G, half = H // K, K // 2
    q = [h * d + np.arange(d) for c in range(half) for j in (c, c + half) for h in range(j * G, (j + 1) * G)]
    kv = [j * d + np.arange(d) for c in range(half) for j in (c, c + half)]
    return np.concatenate(q), np.concatenate(kv), np.concatenate(kv)


class Expand:
    """After the q / k / v products (the `compact` rows, T rows of H d, K d, K d values): their biases (Vecs in the
    `compact` order, or None), then each chunk copied into `layout`'s doubled heads, through a free buffer (att,
    qgate: attention has not run yet, and DiffLlama has no attention gate)."""

    def __init__(self, H: int, K: int, d: int, biases):
        G = H // K
        self.H, self.K, self.d, self.biases = H, K, d, biases
        # per projection: (name, the temporary, values a token, chunk width, [(x_off, y_off, width)])
        self.steps = [("q", "att", H * d, 2 * G * d, [(0, 0, G * d), (0, G * d, G * d), (G * d, 2 * G * d, G * d),
                                                      (G * d, 3 * G * d, G * d)]),
                      ("k", "qgate", K * d, 2 * d, [(0, 0, d), (0, d, d), (d, 2 * d, d), (d, 3 * d, d)]),
                      ("v", "att", K * d, 2 * d, [(0, 0, 2 * d), (0, 2 * d, 2 * d)])]

    def run(self, buf, T: int) -> int:
        rc = 0
        for (name, tmp, width, chunk, copies), b in zip(self.steps, self.biases):
            rc |= lib.pt_copy_rows(buf[name], width, 0, buf[tmp], width, 0, T, width)
            if b is not None:
                rc |= lib.pt_bias_act(buf[tmp], b.p, T, width, 0)
            for x_off, y_off, w in copies:
                rc |= lib.pt_copy_rows(buf[tmp], chunk, x_off, buf[name], 2 * chunk, y_off, T * (self.K // 2), w)
        return rc

    def plan(self, plan, i: int, buf) -> None:
        for (name, tmp, width, chunk, copies), b in zip(self.steps, self.biases):
            plan.copy(i, buf[name], width, 0, buf[tmp], width, 0, 1, width)
            if b is not None:
                plan.bias_act(i, buf[tmp], b, width, 0)
            for x_off, y_off, w in copies:
                plan.copy(i, buf[tmp], chunk, x_off, buf[name], 2 * chunk, y_off, self.K // 2, w)


class DiffAttn:
    """A layer's differential combination: lambda (lambda_1 - lambda_2 + lambda_init) and the norm of each pair
    (a decoder Norm, its weight 1 - lambda_init), for H query heads, K kv heads of d (the checkpoint's counts)."""

    def __init__(self, H: int, K: int, d: int, lam: float, norm):
        self.H, self.K, self.d, self.lam, self.norm = H, K, d, np.float32(lam), norm
        G = H // K
        # (x_off, y_off, width) of the copies into z's first term; the second's read 2 G d further
        self.copies = [(s * G * d + i * d, 2 * i * d + s * d, d) for i in range(G) for s in (0, 1)]
        if G == 1:
            self.copies = [(0, 0, 2 * d)]

    def _steps(self, att, buf):
        """The copies (x, x_stride, x_off, y, y_stride, y_off, rows a token, width), then z's buffers."""
        G, d = self.H // self.K, self.d
        z, other = buf["q"], buf["qgate"]        # free once attention has read q; qgate unused by DiffLlama
        for dst, base in ((z, 0), (other, 2 * G * d)):
            for x_off, y_off, w in self.copies:
                yield att, 4 * G * d, base + x_off, dst, 2 * G * d, y_off, self.K // 2, w

    def run(self, att, T: int, buf) -> tuple[int, object]:
        """The oracle's calls: (rc, o_proj's input)."""
        rc = 0
        for x, xs, xo, y, ys, yo, rows, w in self._steps(att, buf):
            rc |= lib.pt_copy_rows(x, xs, xo, y, ys, yo, T * rows, w)
        width = self.H * self.d
        lib.pt_axpy(buf["q"], -self.lam, buf["qgate"], T * width)
        rc |= self.norm(buf["q"], T * self.H // 2, 2 * self.d, buf["q"])
        return rc, buf["q"]

    def plan(self, plan, i: int, att, buf):
        """The same as plan ops of layer i; returns o_proj's input."""
        for x, xs, xo, y, ys, yo, rows, w in self._steps(att, buf):
            plan.copy(i, x, xs, xo, y, ys, yo, rows, w)
        plan.axpy(i, buf["q"], float(-self.lam), buf["qgate"], self.H * self.d)
        plan.norm(i, self.norm, buf["q"], self.H // 2, 2 * self.d, buf["q"])
        return buf["q"]
