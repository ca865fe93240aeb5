"""HY-V4's step as plan ops (the family: petit/models/families/mla/hy_v4.py): the Decoder's latent attention with DSA,
MoE and MLP ops, inside the hyper-connections' residual streams.

The residual is `n` streams of `hidden` values a token (X0 / X1 in turn). Before each block HC_PRE mode 2 (kernels/
hc.c pt_hc_ind_pre) collapses them into the block's input by its pre weights and writes its post weights (and an
identity stream mix); the block (its norm first) writes y; HC_POST makes the streams X + post y. The hyper head
(HC_PRE mode 1) collapses them once more before the final norm and the LM head. The per-op path runs the same
records one C call each (PlanOracle)."""
import numpy as np

from petit.models.blocks.decoder import Decoder, _Scratch
from petit.models.blocks.plan import Plan, PlanOracle, fptr
from petit.native import ffi, lib


def plan_streams(dec, s: Plan, scratch, pre, blocks) -> str:
    """The embedding into each of dec.n streams, then per layer and per block of `blocks` (functions of s, i, L, b,
    scratch writing b["y"] from b["hx"]): pre(s, i, dec.hc[i][k], X) writes the block's input to hx and its post
    weights (and stream mix) to post / comb, then HC_POST. The streams alternate between X0 and X1: returns the last
    one's name (issue 36, the q4exp group: Qwen4-Exp's decoder runs the same frame)."""
    b, D, n = scratch.p, dec.arch.hidden_size, dec.n
    s.embed(dec.embed, b["resid"], D, 1.0, None)
    for j in range(n):                              # every stream starts as the embedding
        s.copy(-1, b["resid"], D, 0, b["X0"], n * D, j * D, 1, D)
    cur = ["X0", "X1"]
    for i, L in enumerate(dec.layers):
        for hc, block in zip(dec.hc[i], blocks):
            pre(s, i, hc, b[cur[0]])
            block(s, i, L, b, scratch)
            s._add(lib.PT_OP_HC_POST, i, x=b[cur[0]], x2=b["y"], y=[b[cur[1]], b["post"], b["comb"]], streams=n,
                   width=D)
            cur.reverse()
    return cur[0]


class _HcScratch(_Scratch):
    def __init__(self, arch, cap, n):
        super().__init__(arch, cap)
        D = arch.hidden_size
        for name, w in {"X0": n * D, "X1": n * D, "hx": D, "post": n, "comb": n * n, "y": D}.items():
            self.arrays[name] = np.zeros((cap, w), np.float32)
            self.p[name] = fptr(self.arrays[name])


class HyV4Decoder(PlanOracle, Decoder):
    """hc: per layer (attention's, the MLP's) hyper-connection, each with fn [2n, n D], base [2n], scale [2] (Vecs);
    hc_head: fn [n, n D], base [n], scale [1]; eps, norm_eps, magnitude: hc_eps, rms_norm_eps, hc_magnitude."""

    def __init__(self, arch, embed, layers, final_norm, lm_head, *, n, hc, hc_head, eps, norm_eps, magnitude):
        super().__init__(arch, embed, layers, final_norm, lm_head)
        self.n, self.hc, self.hc_head = n, hc, hc_head
        self.hc_eps, self.hc_norm_eps, self.magnitude = eps, norm_eps, magnitude

    def scratch(self, T: int):
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _HcScratch(self.arch, max(T, 16), self.n)
        return self._scratch

    def _hc_pre(self, s, i, hc, X, out, b, head: bool) -> None:
        s._add(lib.PT_OP_HC_PRE, i, x=X, w=hc.fn.p, b=hc.base.p, x2=hc.scale.p, streams=self.n,
               width=self.arch.hidden_size, window=1, eps=self.hc_eps, alpha=self.hc_norm_eps, mode=1 if head else 2,
               scale=self.magnitude, y=[out, ffi.NULL if head else b["post"], ffi.NULL if head else b["comb"]])

    def _build_plan(self, scratch) -> Plan:
        b, s, D = scratch.p, Plan(scratch), self.arch.hidden_size
        last = plan_streams(self, s, scratch, lambda s, i, hc, X: self._hc_pre(s, i, hc, X, b["hx"], b, False),
                            (self._attention, self._ffn))
        self._hc_pre(s, len(self.layers), self.hc_head, b[last], b["resid"], b, True)
        s.head(len(self.layers), self.final_norm, b["resid"], D, b["normed"], self.lm_head, None, 1.0, 0.0)
        return s.finish()

    def _attention(self, s, i, L, b, scratch) -> None:
        s.norm(i, L.attn_norm, b["hx"], 1, self.arch.hidden_size, b["normed"])
        s.matmul(i, [L.o], self._plan_mla(s, i, L, b["normed"], b, scratch), [b["y"]])

    def _ffn(self, s, i, L, b, scratch) -> None:
        s.norm(i, L.mlp_norm, b["hx"], 1, self.arch.hidden_size, b["normed"])
        if L.moe is not None:
            s.moe(i, L.moe.c(scratch.cap), b["normed"], b["y"])
            return
        self._plan_mlp(s, i, L, b["normed"], b)
        s.matmul(i, [L.down], b["mlp_hidden"], [b["y"]])
