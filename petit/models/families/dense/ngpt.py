"""The normalized transformer (nGPT) of NVIDIA's Dory (petit/models/families/dense/dory.py) on the decoder's ordinary
ops.

nGPT keeps every hidden state on the unit sphere: its norms are L2 norms, x / sqrt(sum(x^2) + eps), which are RMS
norms over n values with eps / n and a weight of 1 / sqrt(n) (`l2`, times a per-channel `scale` where a learned
rate follows the norm). Each block starts by normalising the residual stream itself (the block adds to the normed
stream, not to its input): `Entry`, the layer's pre_block hook. A looped model's loops start from the input
section's output: before a loop's first layer the stream becomes L2(stream) + L2(the input section's output),
that second term kept in buf["stash"] (Arch.shortcut) by the first loop's entry.
"""
import numpy as np

from petit.models.blocks.decoder import Norm, Vec
from petit.native import lib


def l2(n: int, eps: float, scale=None) -> Norm:
    """x / sqrt(sum(x^2) + eps) over rows of n values (times `scale` per value, or per [rows, n] block)."""
    w = np.full(n, 1.0 / np.sqrt(n)) if scale is None else np.asarray(scale, np.float64) / np.sqrt(n)
    return Norm("rms", eps / n, Vec(w.astype(np.float32)))


class Entry:
    """A block's pre_block: the residual stream [T, D] normed in place (`norm`, an l2 of D); before it, at a loop's
    start, `loops` times stream = norm(stream) + stash, the first loop's entry (`first`) setting stash =
    norm(stream) (the input section's output normed) before that."""

    def __init__(self, norm: Norm, D: int, first: bool = False, loops: int = 0):
        self.norm, self.D, self.first, self.loops = norm, D, first, loops

    def run(self, buf, T: int) -> int:
        rc = self.norm(buf["resid"], T, self.D, buf["stash"]) if self.first else 0
        for _ in range(self.loops):
            rc |= self.norm(buf["resid"], T, self.D, buf["resid"])
            lib.pt_axpy(buf["resid"], 1.0, buf["stash"], T * self.D)
        return rc | self.norm(buf["resid"], T, self.D, buf["resid"])

    def plan(self, plan, i: int, buf) -> None:
        if self.first:
            plan.norm(i, self.norm, buf["resid"], 1, self.D, buf["stash"])
        for _ in range(self.loops):
            plan.norm(i, self.norm, buf["resid"], 1, self.D, buf["resid"])
            plan.axpy(i, buf["resid"], 1.0, buf["stash"], self.D)
        plan.norm(i, self.norm, buf["resid"], 1, self.D, buf["resid"])


class GateScale:
    """A layer's pre_store: the output gate's logits (buf["qgate"], [T, width]) times `cols` per column before the
    sigmoid reads them (Dory's (s_gate * hidden^(1/4) / initializer_range)^2)."""

    def __init__(self, cols: Vec, width: int):
        self.cols, self.width = cols, width

    def run(self, buf, T: int) -> int:
        return lib.pt_scale_cols(buf["qgate"], self.cols.p, T, self.width)

    def plan(self, plan, i: int, buf) -> None:
        plan.scale_cols(i, buf["qgate"], self.cols, self.width)
