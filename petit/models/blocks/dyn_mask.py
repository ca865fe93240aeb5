"""SmallDoge's dynamic mask attention (transformers' `doge`) on the ordinary attention kernel.

Doge adds to every score of query i and key j (kv head h) the key's learned bias dt_j = exp(A_h softplus(z_j)),
z = dt_proj of the values [T, kv heads * head_dim] (+ its bias). The family gives each head two more values than
head_dim (`pad`; the RoPE rotates the first head_dim only): q / k / v / o read the checkpoint's rows and columns with
zeros there, and after the q / k norms kernels/doge.c writes dt_j into the key's first extra value and 1 / scale into
every query's, so the attention's scale * (q . k) gains exactly dt_j (the values' and outputs' extra values stay 0).
The per-head q / k RMSNorms then run over head_dim + pad values, their zeros included: eps * d / (d + pad) and the
weight times sqrt(d / (d + pad)) give the norm over d exactly. In an int8 KV cache dt_j is rounded with its key row.
"""
import numpy as np

from petit.native import lib

PAD = 2                     # the extra values a head: the bias slot, and one more to keep head_dim even


def padded(d: int) -> int:
    return d + PAD


def rows(heads: int, d: int) -> np.ndarray:
    """Where the checkpoint's rows go among heads * (d + PAD) (the rest zero)."""
    return (np.arange(heads)[:, None] * padded(d) + np.arange(d)[None, :]).reshape(-1)


class DynMask:
    """A layer's dt_proj (a Weight over the padded values [kv heads, kv heads * (d + PAD)]), its bias (a Vec or
    None), A (a Vec [kv heads]), and the slot / query value the kernel writes."""

    def __init__(self, dt_proj, dt_b, A, n_heads: int, n_kv: int, d: int, scale: float):
        self.dt_proj, self.dt_b, self.A = dt_proj, dt_b, A
        self.n_heads, self.n_kv, self.d, self.q_value = n_heads, n_kv, d, float(np.float32(1.0 / scale))

    def run(self, buf, T: int) -> int:
        """The oracle's calls: z into buf["qgate"] (unused by Doge), then the slots of q and k."""
        rc = lib.pt_matmul(self.dt_proj.c, buf["v"], T, buf["qgate"], 0)
        if self.dt_b is not None:
            rc |= lib.pt_bias_act(buf["qgate"], self.dt_b.p, T, self.n_kv, 0)
        return rc | lib.pt_doge_dt(buf["qgate"], self.A.p, T, self.n_heads, self.n_kv, padded(self.d), self.d,
                                   self.q_value, buf["q"], buf["k"])

    def plan(self, plan, i: int, buf) -> None:
        plan.matmul(i, [self.dt_proj], buf["v"], [buf["qgate"]])
        if self.dt_b is not None:
            plan.bias_act(i, buf["qgate"], self.dt_b, self.n_kv, 0)
        plan.doge_dt(i, buf["qgate"], self.A, buf["q"], buf["k"], self.n_heads, self.n_kv, padded(self.d), self.d,
                     self.q_value)


class Compact:
    """The attention's output [T, heads, d + PAD] without the extra values, [T, heads * d] in buf["q"] (free once
    attention has read it): o_proj's input, the checkpoint's o_proj as it is."""

    def __init__(self, heads: int, d: int):
        self.heads, self.d = heads, d

    def run(self, att, T: int, buf) -> tuple[int, object]:
        return lib.pt_copy_rows(att, padded(self.d), 0, buf["q"], self.d, 0, T * self.heads, self.d), buf["q"]

    def plan(self, plan, i: int, att, buf):
        plan.copy(i, att, padded(self.d), 0, buf["q"], self.d, 0, self.heads, self.d)
        return buf["q"]
