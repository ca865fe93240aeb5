"""HRM-Text's cycles (petit/models/families/dense/hrm_text.py) on the decoder's ordinary ops: the two states z_H and z_L
ride the residual stream. At each stack pass's first layer its `Cycle` (the layer's pre_block) ends the previous pass
(the stack's weightless RMSNorm of the stream) and sets the stream to the pass's input, z_L and z_H kept in the scratch
buffers of their own the decoder asks for (Decoder.extra {"z_h": D, "z_l": D}).
"""
from petit.models.blocks.decoder import Norm, Vec
from petit.native import lib


class Cycle:
    """A pass's first layer's pre_block: the stream [T, D] (the previous pass's unnormed output) becomes this pass's
    input. first: z_H = stream (the scaled embeddings), stream = z_L_init + z_H. low (after an L pass): z_L =
    norm(stream), stream = z_L + z_H. low_after_high: z_H = norm(stream), stream = z_L + z_H. high: z_L =
    norm(stream), stream = z_H + z_L. z_H in buf["z_h"], z_L in buf["z_l"]."""

    KINDS = ("first", "low", "low_after_high", "high")

    def __init__(self, kind: str, norm: Norm, D: int, z0: Vec):
        self.kind, self.norm, self.D, self.z0 = kind, norm, D, z0

    def run(self, buf, T: int) -> int:
        x, D = buf["resid"], self.D
        if self.kind == "first":
            rc = lib.pt_copy_rows(x, D, 0, buf["z_h"], D, 0, T, D)
            return rc | lib.pt_bias_act(x, self.z0.p, T, D, 0)
        if self.kind == "low":
            rc = self.norm(x, T, D, x)
            lib.pt_axpy(x, 1.0, buf["z_h"], T * D)
            return rc
        new, other = ("z_h", "z_l") if self.kind == "low_after_high" else ("z_l", "z_h")
        rc = self.norm(x, T, D, buf[new])
        rc |= lib.pt_copy_rows(buf[other], D, 0, x, D, 0, T, D)
        lib.pt_axpy(x, 1.0, buf[new], T * D)
        return rc

    def plan(self, plan, i: int, buf) -> None:
        x, D = buf["resid"], self.D
        if self.kind == "first":
            plan.copy(i, x, D, 0, buf["z_h"], D, 0, 1, D)
            plan.bias_act(i, x, self.z0, D, 0)
        elif self.kind == "low":
            plan.norm(i, self.norm, x, 1, D, x)
            plan.axpy(i, x, 1.0, buf["z_h"], D)
        else:
            new, other = ("z_h", "z_l") if self.kind == "low_after_high" else ("z_l", "z_h")
            plan.norm(i, self.norm, x, 1, D, buf[new])
            plan.copy(i, buf[other], D, 0, x, D, 0, 1, D)
            plan.axpy(i, x, 1.0, buf[new], D)
