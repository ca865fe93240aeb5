"""Differential attention (DiffLlama, the Differential Transformer on Llama) from the decoder's ordinary ops.

transformers' DiffLlama keeps Llama's q / k / v of H query and K kv heads of d, and runs softmax attention twice with
the same probabilities: once over the first K/2 value heads, once over the last K/2 (each repeated to K heads). Head
h's two outputs side by side, [o1_h, o2_h] (2d wide), give pair p < H/2:

    z_p = [o1_p, o2_p] - lambda [o1_{p+H/2}, o2_{p+H/2}],   out_p = (1 - lambda_init) RMSNorm(z_p)   (no weight)

and o_proj reads the H/2 pairs' out_p side by side (H d values, as Llama's o_proj does).

The engine runs this as one attention of 2H query heads over 2K kv heads, each original head twice: `layout` gives
the rows of q_proj, k_proj and v_proj that build these heads (so the projections are 2x as wide and the KV cache
holds 2x Llama's), in blocks of G = H/K query heads reading one kv head, ordered so that chunk c < K/2 of each
token's output is [o1 of group c, o2 of group c, o1 of group c + K/2, o2 of group c + K/2] (4 G d values). Then
`pairs` gathers z's two terms with row copies (the chunks are uniform rows, G head-wide copies each), one axpy makes
z, a norm of 2d-wide rows with (1 - lambda_init) as its weight makes out: no op of its own."""
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
