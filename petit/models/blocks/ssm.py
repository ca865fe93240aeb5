"""A Mamba mixer as the decoder runs it (kernels/ssm.c: in_proj, the causal conv, the selective scan and out_proj
of one sequence's tokens in one call, its recurrent state updated in place). A family's builder makes one `Mamba`
per layer; the state lives in the model's StateCache (petit/cache.py), one conv state [d_inner, d_conv - 1] and one
ssm state [d_inner, d_state] a layer."""
import os
from dataclasses import dataclass, field

import numpy as np

from petit.native import Weight, ffi, lib

# the mixers' scratch, shared by every layer (and model) of the same sizes: a step runs one mixer at a time under the
# kernels' lock, so one set of buffers serves them all ({(cap, d_inner, d_state, dt_rank): {name: array}})
_SCRATCH: dict = {}
# the scan's form for a prompt (pt_mamba.scan): chosen by the prompt's length, or forced (PETIT_SCAN, or Mamba.scan)
SCANS = {"auto": 0, "recurrent": 1, "chunked": 2}


def scan_mode(name: str | None) -> int:
    """pt_mamba.scan for `name`, else $PETIT_SCAN, else "auto" (the chunked form from 8 tokens: Gated DeltaNet,
    kernels/deltanet.c, and Mamba-2's SSD, kernels/ssd.c; from 2 tokens: Mamba-1's selective scan,
    kernels/selscan.c; LFM2's short convolution has no scan)."""
    name = name or os.environ.get("PETIT_SCAN") or "auto"
    if name not in SCANS:
        raise ValueError(f"unknown scan form {name!r} (PETIT_SCAN): choose one of {', '.join(SCANS)}")
    return SCANS[name]


@dataclass
class Mamba:
    """in_proj [2 di, D] (x rows, then the gate z's), conv_w [di, d_conv] and conv_b [di], x_proj [dt_rank + 2 ds,
    di], dt_proj [di, dt_rank] (float) and dt_bias [di], A = -exp(A_log) [di, ds], D [di], out_proj [D, di];
    inner_norm: Falcon-Mamba's weightless RMS norms of dt, B and C (eps). Zamba's multi-head Mamba-1 (version 1 with
    n_heads H > 1): x_proj [H (dt_rank + 2 ds), di] and dt_proj [di, H dt_rank] block-diagonal, one block a head."""
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
    inner_w: tuple | None = None        # Jamba: the weights of the dt, B and C norms (Falcon-Mamba's have none)
    # Mamba-2 (version 2): one A, D and dt_bias per head, x_proj / dt_proj None, the gated norm's weight; LFM2's
    # short conv (version 3): in_proj [3 D, D] (B, C, x), conv_w [D, K], out_proj, nothing else; Qwen3-Next's Gated
    # DeltaNet (version 4): d_state the key head size, n_groups the key heads, n_heads the value heads
    version: int = 1
    n_heads: int = 0
    n_groups: int = 1
    norm_w: np.ndarray | None = None
    dt_min: float = 0.0
    dt_max: float = float("inf")
    norm_groups: int = 1                # Falcon-H1: the gated norm per group of channels
    norm_mode: int = 0                  # 0 gate then norm, 1 norm then gate, 2 the gate alone (pt_mamba)
    scan: str | None = None             # "auto", "recurrent" or "chunked" (None: $PETIT_SCAN, else "auto")
    # issue 30, the recur group: Griffin's recurrent block (version 5, kernels/rglru.c): in_proj [2 W, D] the x then y
    # branches, in_b [2 W] and out_b [D] their biases, rglru (input gate [H, bw, bw], its bias [W], recurrence gate
    # [H, bw, bw], its bias [W], recurrent_param [W]) with n_heads H; conv_w [W, K], conv_b [W]
    in_b: np.ndarray | None = None
    out_b: np.ndarray | None = None
    rglru: tuple | None = None
    beta_scale: float = 0.0             # issue 30, the hybrid group: Gated DeltaNet's beta x this (OLMo Hybrid: 2)
    # an RWKV-6 block (version 6, kernels/rwkv.c): rwkv holds "w" (the 8 matrices: time mix r, k, v, g, o, channel
    # mix k, v, r), the vectors and LoRAs by pt_mamba's names, "e", "de", "f", "halve", "scale", "gn_eps"; n_heads H,
    # d_state the head size N; in_proj / out_proj are w[0] / w[4]
    rwkv: dict | None = None
    kda: int = 0                        # issue 30, the hybrid group: Kimi Delta Attention (a decay per key channel)
    kda_lower_bound: float = 0.0        # issue 36, fam36m: < 0: KDA's bounded forget gate (Ling 3's kda_safe_gate)
    # issue 36, fam36n: xLSTM's mLSTM (version 9, kernels/mlstm.c): in_proj [2 H dk + 2 Dv + 2 H, D] (q, k, v, o, i,
    # f) and in_b, d_state dk, norm_w the heads' LayerNorm weight (eps), dt_max the gates' soft cap, this its eps
    mlstm_eps: float = 0.0
    _c: object = field(default=None, repr=False)
    _cap: int = field(default=0, repr=False)
    _keep: list = field(default_factory=list, repr=False)

    @property
    def d_inner(self) -> int:
        return self.out_proj.shape[1]

    @property
    def state_shapes(self) -> tuple[tuple, tuple]:
        if self.version == 9:                # xLSTM's mLSTM: no conv; C [dk, dv], n [dk] and m a head
            return (1, 1), (self.n_heads, self.d_state * (self.d_inner // self.n_heads) + self.d_state + 1)
        if self.version == 8:                # RWKV-4: the two token shifts, num / den / max a channel
            return (2, self.in_proj.shape[1]), (3, self.in_proj.shape[1])
        if self.version in (6, 7):           # RWKV-6 / 7: the two token shifts, a [N, N] state a head
            return (2, self.in_proj.shape[1]), (self.n_heads, self.d_state, self.d_state)
        if self.version == 5:                # Griffin's RG-LRU: h [W] and a started flag (position 0 resets)
            return (self.d_inner, self.d_conv - 1), (self.d_inner + 1,)
        if self.version == 4:                # Gated DeltaNet: conv over q | k | v, a [dk, dv] state per value head
            conv = 2 * self.n_groups * self.d_state + self.d_inner
            return (conv, self.d_conv - 1), (self.n_heads, self.d_state, self.d_inner // self.n_heads)
        if self.version == 3:                # LFM2's short conv: a conv state only
            return (self.d_inner, self.d_conv - 1), (1,)
        if self.version == 2:
            conv = self.d_inner + 2 * self.n_groups * self.d_state
            return (conv, self.d_conv - 1), (self.n_heads, self.d_inner // self.n_heads, self.d_state)
        return (self.d_inner, self.d_conv - 1), (self.d_inner, self.d_state)

    def matrices(self) -> list:
        if self.rwkv is not None:
            return list(self.rwkv["w"])
        return [w for w in (self.in_proj, self.x_proj, self.dt_proj, self.out_proj) if w is not None]

    def replace(self, new: dict) -> None:
        if self.rwkv is not None:
            self.rwkv["w"] = [new.get(id(w), w) for w in self.rwkv["w"]]
            self.in_proj, self.out_proj = self.rwkv["w"][0], self.rwkv["w"][self.rwkv.get("o", 4)]
        for name in ("in_proj", "x_proj", "dt_proj", "out_proj"):
            w = getattr(self, name)
            if w is not None:
                setattr(self, name, new.get(id(w), w))
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

        shared = _SCRATCH.setdefault((cap, self.version, self.d_inner, self.d_state, self.dt_rank, self.n_heads,
                                      self.n_groups, self.in_proj.shape[0]), {})

        def scratch(width, name):
            name = (name, width)                # two models of one shape key may need other widths (rwkv6qwen2's
            if name not in shared:              # time mixing alone beside an rwkv6 block: issue 30, ggufx)
                shared[name] = np.zeros((cap, width), np.float32)
            keep.append(shared[name])
            return ffi.cast("float *", ffi.from_buffer(shared[name]))

        di, ds, R = self.d_inner, self.d_state, self.dt_rank
        m.hidden, m.d_inner, m.d_state, m.d_conv, m.dt_rank, m.cap = self.in_proj.shape[1], di, ds, self.d_conv, R, cap
        m.inner_norm, m.eps = int(self.inner_norm), self.eps
        if self.inner_w is not None:
            m.dt_norm_w, m.b_norm_w, m.c_norm_w = (vec(w) for w in self.inner_w)
        m.in_proj, m.out_proj = self.in_proj.c, self.out_proj.c
        m.x_proj = self.x_proj.c if self.x_proj is not None else ffi.NULL
        m.dt_proj = self.dt_proj.c if self.dt_proj is not None else ffi.NULL
        m.version, m.n_heads, m.head_dim, m.n_groups = self.version, self.n_heads, di // max(self.n_heads, 1), \
            self.n_groups
        m.dt_min, m.dt_max = self.dt_min, min(self.dt_max, 3.0e38)
        m.norm_w = vec(self.norm_w) if self.norm_w is not None else ffi.NULL
        m.norm_groups, m.norm_mode = self.norm_groups, self.norm_mode
        m.scan = scan_mode(self.scan)
        m.beta_scale = self.beta_scale
        m.kda, m.kda_lower_bound = self.kda, self.kda_lower_bound
        m.conv_w = vec(self.conv_w)
        m.conv_b = vec(self.conv_b) if self.conv_b is not None else ffi.NULL
        m.dt_bias = vec(self.dt_bias) if self.dt_bias is not None else ffi.NULL
        m.A, m.Dp = vec(self.A), vec(self.D)
        if self.version == 5:
            m.xz, m.u, m.dbc = scratch(2 * di, "xz5"), scratch(di, "u"), scratch(di, "gx5")
            m.dt, m.y, m.g = scratch(di, "ga5"), scratch(di, "y"), scratch(1, "g")
            m.in_b = vec(self.in_b) if self.in_b is not None else ffi.NULL
            m.out_b = vec(self.out_b) if self.out_b is not None else ffi.NULL
            m.lru_wx, m.lru_bx, m.lru_wa, m.lru_ba, m.lru_c = (vec(a) for a in self.rglru)
        elif self.version == 6:
            r = self.rwkv
            D, F = self.in_proj.shape[1], r["f"]
            m.ws = scratch(14 * D + max(5 * r["e"], r["de"]) + F, "ws6")
            m.xz = m.u = m.dbc = m.dt = m.y = m.g = ffi.NULL
            for i, w in enumerate(r["w"]):
                m.rwkv_w[i] = w.c
            for name in ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnx_w", "lnx_b", "maa_x", "maa", "cm_k", "cm_r",
                         "maa_w1", "maa_w2", "dec_w1", "dec_w2", "decay", "bonus"):
                setattr(m, name, vec(r[name]) if r.get(name) is not None else ffi.NULL)   # QRWKV: no channel mix
            self._ggufx(m, r, vec)
            m.gn_eps, m.rwkv_e, m.rwkv_de, m.rwkv_f = r["gn_eps"], r["e"], r["de"], F
            m.rwkv_halve, m.rwkv_scale, m.head_dim = int(r["halve"]), r["scale"], self.d_state
        elif self.version == 8:
            r = self.rwkv
            D, F = self.in_proj.shape[1], r["f"]
            m.ws = scratch(10 * D + F, "ws8")
            m.xz = m.u = m.dbc = m.dt = m.y = m.g = ffi.NULL
            for i, w in enumerate(r["w"]):
                m.rwkv_w[i] = w.c
            for name in ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "maa", "cm_k", "cm_r", "decay", "bonus"):
                setattr(m, name, vec(r[name]))
            m.rwkv_f, m.rwkv_halve, m.rwkv_scale = F, int(r["halve"]), r["scale"]
        elif self.version == 7:
            r = self.rwkv
            D, F = self.in_proj.shape[1], r["f"]
            Rw, Ra, Rv, Rg = r["ranks"]
            m.ws = scratch(17 * D + 16 + max(Rw, Ra) + max(Rv, Rg) + F, "ws7")
            if "vf7" not in shared:             # v_first: a header (the step's base row), then [cap][D]
                shared["vf7"] = np.zeros(16 + cap * D, np.float32)
            keep.append(shared["vf7"])
            m.vfirst = ffi.cast("float *", ffi.from_buffer(shared["vf7"]))
            m.xz = m.u = m.dbc = m.dt = m.y = m.g = ffi.NULL
            for i, w in enumerate(r["w"]):
                m.rwkv_w[i] = w.c
            for name in ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnx_w", "lnx_b", "maa", "cm_k"):
                setattr(m, name, vec(r[name]))
            for name in ("w1", "w2", "w0", "a1", "a2", "a0", "v1", "v2", "v0", "g1", "g2", "kk", "ka", "rk"):
                setattr(m, "r7_" + name, vec(r[name]) if r.get(name) is not None else ffi.NULL)
            m.r7_rank = list(r["ranks"])
            m.gn_eps, m.rwkv_f, m.rwkv_first, m.head_dim = r["gn_eps"], F, int(r["first"]), self.d_state
        elif self.version == 9:
            m.xz, m.y = scratch(self.in_proj.shape[0], "xz9"), scratch(di, "y")
            m.u = m.dbc = m.dt = m.g = ffi.NULL
            m.in_b, m.gn_eps = vec(self.in_b), self.mlstm_eps
        elif self.version == 4:
            conv = self.state_shapes[0][0]
            m.xz, m.u, m.dbc = scratch(self.in_proj.shape[0], "xz4"), scratch(conv, "u4"), scratch(1, "dbc")
            m.dt, m.y, m.g = scratch(1, "dt4"), scratch(di, "y"), scratch(1, "g")
        elif self.version == 3:
            m.xz, m.u, m.dbc = scratch(3 * di, "xz3"), scratch(1, "u3"), scratch(1, "dbc")
            m.dt, m.y, m.g = scratch(1, "dt3"), scratch(di, "y"), scratch(1, "g")
        elif self.version == 2:
            conv = self.state_shapes[0][0]
            m.xz, m.u, m.dbc = scratch(self.in_proj.shape[0], "xz2"), scratch(conv, "u2"), scratch(1, "dbc")
            m.dt, m.y, m.g = scratch(self.n_heads, "dt2"), scratch(di, "y"), scratch(1, "g")
        else:
            H = max(self.n_heads, 1)         # Zamba's multi-head Mamba-1: a dt, B and C block per head
            m.xz, m.u, m.dbc = scratch(2 * di, "xz"), scratch(di, "u"), scratch(H * (R + 2 * ds), "dbc")
            m.dt, m.y, m.g = scratch(di, "dt"), scratch(di, "y"), scratch(H * R, "g")
        self._c, self._cap, self._keep = m, cap, keep
        return m

    @staticmethod
    def _ggufx(m, r: dict, vec) -> None:
        """issue 30, the ggufx group: RWKV-6's time mixing alone in Qwen2's blocks (rwkv6qwen2's gated linear
        attention with grouped k / v and biases)."""
        m.rwkv_mix_only, m.rwkv_gla, m.rwkv_kv_heads = int(r.get("mix_only", False)), int(r.get("gla", False)), \
            r.get("kv_heads", 0)
        for name in ("rb", "kb", "vb"):
            setattr(m, "rwkv_" + name, vec(r[name]) if r.get(name) is not None else ffi.NULL)

    def run(self, x, T: int, conv_state, ssm_state, y, accumulate: bool = False) -> int:
        """y = this mixer of x (T rows at the pointer x), the state pointers updated; one C call (the oracle's)."""
        return lib.pt_mamba_run(self.c(T), x, T, conv_state, ssm_state, y, int(accumulate))
