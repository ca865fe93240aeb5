"""A norm's output times a sigmoid gate computed from it by a low-rank MLP (issue 36, fam36m: A.X-K2's gated RMSNorm,
Megatron's GatedNormWrapper): y = norm(x), then y *= sigmoid(up silu(down y)), down [rank, D] and up [D, rank]
(transformers' AXK2GateMLP fc1 / fc2, the checkpoint's W_down / W_up), both kept in float32.

A `Norm` with `gate` set runs these after its norm wherever it is called (decoder.Norm.__call__ op by op, Plan.norm
in the plan): two products, the SiLU and the gated product (pt_glu's sigmoid, in place), over scratch of its own."""
from dataclasses import dataclass, field

import numpy as np

from petit.native import ACTIVATIONS, GLU_ACTIVATIONS, Weight, ffi, lib


@dataclass
class NormGate:
    down: Weight                        # [rank, D], float32
    up: Weight                          # [D, rank], float32
    _bufs: dict = field(default_factory=dict, repr=False)
    _cap: int = field(default=0, repr=False)

    def buffers(self, cap: int) -> tuple:
        """(h [cap, rank], g [cap, D]) pointers, grown to `cap` rows (the smaller ones kept for plans pointing at
        them)."""
        if self._cap < cap:
            self._bufs = {name: np.zeros((cap, w.shape[0]), np.float32) for name, w in (("h", self.down),
                                                                                    ("g", self.up))}
            self._old = getattr(self, "_old", []) + [self._bufs]
            self._cap = cap
        return tuple(ffi.cast("float *", ffi.from_buffer(self._bufs[n])) for n in ("h", "g"))

    def run(self, y, T: int, D: int) -> int:
        """y [T, D] *= sigmoid(up silu(down y)), op by op."""
        h, g = self.buffers(T)
        rc = lib.pt_matmul(self.down.c, y, T, h, 0)
        rc |= lib.pt_bias_act(h, ffi.NULL, T, self.down.shape[0], ACTIVATIONS["silu"])
        rc |= lib.pt_matmul(self.up.c, h, T, g, 0)
        return rc | lib.pt_glu(GLU_ACTIVATIONS["sigmoid"], g, y, T * D, y)

    def plan(self, plan, layer: int, y, D: int) -> None:
        """The ops of `run`, in its order, over the plan's scratch."""
        h, g = self.buffers(plan.scratch.cap)
        plan.matmul(layer, [self.down], y, [h])
        plan.bias_act(layer, h, None, self.down.shape[0], ACTIVATIONS["silu"])
        plan.matmul(layer, [self.up], h, [g])
        plan.glu(layer, GLU_ACTIVATIONS["sigmoid"], g, y, D, y)


def norm_gate(t, name: str, D: int, rank: int, names: tuple = ("mlp.fc1", "mlp.fc2")) -> NormGate:
    """The gate MLP under `name` (a gated norm's module), by the module names or the checkpoint's W_down / W_up."""
    down, up = names if t.has(f"{name}.{names[0]}.weight") else ("W_down", "W_up")
    return NormGate(t.float_weight(f"{name}.{down}.weight", (rank, D)),
                    t.float_weight(f"{name}.{up}.weight", (D, rank)))
