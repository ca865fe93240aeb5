"""A Mamba mixer as the decoder runs it (kernels/ssm.c: in_proj, the causal conv, the selective scan and out_proj
of one sequence's tokens in one call, its recurrent state updated in place). A family's builder makes one `Mamba`
per layer; the state lives in the model's StateCache (petit/cache.py), one conv state [d_inner, d_conv - 1] and one
ssm state [d_inner, d_state] a layer."""
from dataclasses import dataclass, field

import numpy as np

from petit.native import Weight, ffi, lib


@dataclass
class Mamba:
    """in_proj [2 di, D] (x rows, then the gate z's), conv_w [di, d_conv] and conv_b [di], x_proj [dt_rank + 2 ds,
    di], dt_proj [di, dt_rank] (float) and dt_bias [di], A = -exp(A_log) [di, ds], D [di], out_proj [D, di];
    inner_norm: Falcon-Mamba's weightless RMS norms of dt, B and C (eps)."""
    in_proj: Weight
    conv_w: np.ndarray
    conv_b: np.ndarray | None
    x_proj: Weight
    dt_proj: Weight
    dt_bias: np.ndarray | None
    A: np.ndarray
    D: np.ndarray
    out_proj: Weight
    d_state: int
    d_conv: int
    dt_rank: int
    inner_norm: bool = False
    eps: float = 1e-6
    _c: object = field(default=None, repr=False)
    _cap: int = field(default=0, repr=False)
    _keep: list = field(default_factory=list, repr=False)

    @property
    def d_inner(self) -> int:
        return self.A.shape[0]

    @property
    def state_shapes(self) -> tuple[tuple, tuple]:
        return (self.d_inner, self.d_conv - 1), (self.d_inner, self.d_state)

    def matrices(self) -> list:
        return [self.in_proj, self.x_proj, self.dt_proj, self.out_proj]

    def replace(self, new: dict) -> None:
        self.in_proj, self.x_proj = new.get(id(self.in_proj), self.in_proj), new.get(id(self.x_proj), self.x_proj)
        self.dt_proj, self.out_proj = new.get(id(self.dt_proj), self.dt_proj), new.get(id(self.out_proj),
                                                                                       self.out_proj)
        self._c, self._cap = None, 0

    def c(self, cap: int):
        """The pt_mamba record for steps of up to `cap` tokens (its scratch allocated here, kept with it)."""
        if self._c is not None and self._cap >= cap:
            return self._c
        m = ffi.new("pt_mamba *")
        keep = [m]

        def vec(a):
            a = np.ascontiguousarray(a, np.float32)
            keep.append(a)
            return ffi.cast("float *", ffi.from_buffer(a))

        def scratch(width):
            return vec(np.zeros((cap, width), np.float32))

        di, ds, R = self.d_inner, self.d_state, self.dt_rank
        m.hidden, m.d_inner, m.d_state, m.d_conv, m.dt_rank, m.cap = self.in_proj.shape[1], di, ds, self.d_conv, R, cap
        m.inner_norm, m.eps = int(self.inner_norm), self.eps
        m.in_proj, m.x_proj, m.dt_proj, m.out_proj = self.in_proj.c, self.x_proj.c, self.dt_proj.c, self.out_proj.c
        m.conv_w = vec(self.conv_w)
        m.conv_b = vec(self.conv_b) if self.conv_b is not None else ffi.NULL
        m.dt_bias = vec(self.dt_bias) if self.dt_bias is not None else ffi.NULL
        m.A, m.Dp = vec(self.A), vec(self.D)
        m.xz, m.u, m.dbc = scratch(2 * di), scratch(di), scratch(R + 2 * ds)
        m.dt, m.y, m.g = scratch(di), scratch(di), scratch(R)
        self._c, self._cap, self._keep = m, cap, keep
        return m

    def run(self, x, T: int, conv_state, ssm_state, y, accumulate: bool = False) -> int:
        """y = this mixer of x (T rows at the pointer x), the state pointers updated; one C call (the oracle's)."""
        return lib.pt_mamba_run(self.c(T), x, T, conv_state, ssm_state, y, int(accumulate))
