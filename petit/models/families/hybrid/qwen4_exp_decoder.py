"""Qwen4-Exp's decoder (the family and what it computes: qwen4_exp_text.py): the gated residuals of the
hyper-connections' streams around the Decoder's attention, DeltaNet and MoE ops, on HY-V4's frame
(blocks/hy_v4_plan.py)."""
import numpy as np

from petit.models.blocks.decoder import Decoder, Vec
from petit.models.blocks.hy_v4_plan import plan_streams
from petit.models.blocks.plan import Plan, PlanOracle
from petit.models.families.hybrid import qwen4_exp_ple as ple
from petit.native import ACTIVATIONS, GLU_ACTIVATIONS, ffi, lib


class GatedResidual:
    """One gated residual's weights: the per-stream norm (1 + w, [n, D]), down [r, n D], up [n D, r], inject
    [n, n D] (None: the model's last mix), and the 1 / n scales of the low-rank and injection logits."""

    def __init__(self, t, p: str, cfg, inject: bool):
        n, D, r = cfg.hc_count, cfg.hidden_size, cfg.hc_lowrank
        self.norm = ple.grouped(t, p + "hc_norm", n, D, cfg.rms_norm_eps)
        self.ple = None                 # the layer's PLE, added to the streams before this mix (attention side)
        self.down = t.weight(p + "input_mix_weight_down.weight", (r, n * D))
        self.up = t.weight(p + "input_mix_weight_up.weight", (n * D, r))
        self.inject = t.weight(p + "block_inject_weight.weight", (n, n * D)) if inject else None
        self.inv_r, self.inv_n = Vec(np.full(r, 1.0 / n)), Vec(np.full(n, 1.0 / n))

    def matrices(self) -> list:
        return [w for w in (self.down, self.up, self.inject) if w is not None]

    def replace(self, new: dict) -> None:
        self.down, self.up = new.get(id(self.down), self.down), new.get(id(self.up), self.up)
        if self.inject is not None:
            self.inject = new.get(id(self.inject), self.inject)



class Qwen4ExpDecoder(PlanOracle, Decoder):
    """The Decoder's attention, DeltaNet and MoE ops inside the streams (HY-V4's frame: hy_v4_plan.plan_streams):
    X0 / X1 [T][n D] in turn, hn the normed streams, lo / g / post the gates' low rank, gates and injection logits
    (then weights), comb the identity, hx the block's input, y its output."""

    def __init__(self, arch, embed, layers, lm_head, *, n, hc, mixer):
        self.n, self.hc, self.mixer = n, hc, mixer      # before the Decoder's init (a test fault reads own_norms)
        super().__init__(arch, embed, layers, None, lm_head)
        D, r = arch.hidden_size, mixer.down.shape[0]
        self.extra = {"X0": n * D, "X1": n * D, "hn": n * D, "g": n * D, "lo": r, "post": n, "comb": n * n, "hx": D,
                      "y": D}
        if self._ples():                        # PLE's embedding, keys, value and normed streams
            self.extra.update(ple_e=self._ples()[0].width, ple_k=n * D, ple_v=D, ple_q=n * D)

    def _residuals(self) -> list:
        return [g for pair in self.hc for g in pair] + [self.mixer]

    def _ples(self) -> list:
        return [g.ple for g in self._residuals() if g.ple is not None]

    def matrices(self) -> list:
        return super().matrices() + [w for g in self._residuals() + self._ples() for w in g.matrices()]

    def own_norms(self) -> list:
        """The norms the Decoder's layers do not hold: the streams', the QSA indexers' query norms, PLE's."""
        return [g.norm for g in self._residuals()] + [L.sparse.q_norm for L in self.layers if L.sparse is not None] + \
            [m for p in self._ples() for m in p.norms()]

    def replace_matrices(self, new: dict) -> None:
        super().replace_matrices(new)
        for g in self._residuals() + self._ples():
            g.replace(new)

    def scratch(self, T: int):
        fresh = self._scratch is None or self._scratch.cap < T
        s = super().scratch(T)
        if fresh:                               # the stream mix is the identity at every token
            s.arrays["comb"][:] = np.eye(self.n, dtype=np.float32).ravel()
        return s

    def _mix(self, s: Plan, i, g: GatedResidual, X, out, b) -> None:
        n, D = self.n, self.arch.hidden_size
        if g.ple is not None:                   # PLE into the streams first
            g.ple.plan(s, i, X, b)
        s.norm(i, g.norm, X, n, D, b["hn"])
        s.matmul(i, [g.down] + ([g.inject] if g.inject is not None else []), b["hn"],
                 [b["lo"]] + ([b["post"]] if g.inject is not None else []))
        s.scale_cols(i, b["lo"], g.inv_r, g.down.shape[0])
        s.bias_act(i, b["lo"], None, g.down.shape[0], ACTIVATIONS["silu"])
        s.matmul(i, [g.up], b["lo"], [b["g"]])
        if g.inject is not None:
            s.scale_cols(i, b["post"], g.inv_n, n)
        s._add(lib.PT_OP_Q4X_MIX, i, x=b["hn"], x2=b["g"], y=[out, b["post"] if g.inject is not None else ffi.NULL,
                                                                  ffi.NULL], streams=n, width=D)

    def _build_plan(self, scratch) -> Plan:
        b, s, L = scratch.p, Plan(scratch), len(self.layers)
        last = plan_streams(self, s, scratch, lambda s, i, g, X: self._mix(s, i, g, X, b["hx"], b),
                            (self._mixer_block, self._moe_block))
        self._mix(s, L, self.mixer, b[last], b["resid"], b)
        s.head(L, None, b["resid"], self.arch.hidden_size, b["normed"], self.lm_head, None, 1.0, 0.0)
        return s.finish()

    def _mixer_block(self, s, i, L, b, scratch) -> None:
        if L.mamba is not None:
            s.mamba(i, L.mamba.c(scratch.cap), b["hx"], b["y"], slot=L.state_slot)
            return
        self._plan_attention(s, i, L, b["hx"], b)
        s.glu(i, GLU_ACTIVATIONS["sigmoid"], b["qgate"], b["att"], L.o.shape[1], b["att"])
        s.matmul(i, [L.o], b["att"], [b["y"]])

    def _moe_block(self, s, i, L, b, scratch) -> None:
        s.moe(i, L.moe.c(scratch.cap), b["hx"], b["y"])
