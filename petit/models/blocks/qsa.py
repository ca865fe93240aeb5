"""Qwen4-Exp's QSA indexer (issue 36, the q4exp group; the family: petit/models/families/hybrid/qwen4_exp_text.py)
on MiniMax-M3's block-sparse frame (block_sparse.py): kernels/qsa.c's QSA_INDEX chooses the blocks, kernels/mm3.c's
MM3_ATTENTION attends over them."""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.block_sparse import BlockSparse
from petit.models.blocks.plan import scratch_arrays
from petit.native import ffi, lib


@dataclass
class Qsa(BlockSparse):
    """An attention layer's QSA indexer, on MiniMax-M3's frame (its weights, norms, slot and the attention over the
    chosen blocks): iq = q_norm(wq x) [n_idx][dim] rotated as the layer's heads (their first rotary values, by
    halves), raw keys ik = wk x [dim] kept in cache slot `slot`; kernels/qsa.c chooses each query's top_k complete
    blocks (their mean key normed by k_norm, (1 + w) - 1 as the kernel adds the 1, and rotated at the block's start)
    and the incomplete last one, then MM3_ATTENTION attends over them. The layer's pre_store (the projections) and
    sparse (the rest); `local` unused (0)."""
    eps: float = 1e-6

    def buffers(self, cap: int) -> dict:
        if self._cap < cap:             # the arrays kept with their pointers
            self._bufs = scratch_arrays(cap, {"iq": self.n_idx * self.dim, "ik": self.dim},
                                        {"sel": self.top_k + 1, "n_sel": 1})
            self._cap = cap
        return {k: p for k, (_, p) in self._bufs.items()}

    def last_choice(self, T: int) -> np.ndarray:
        """The blocks the last step's T queries read, [T, top_k + 1], increasing, -1 after each one's count (a
        copy)."""
        if self._cap < T:
            raise ValueError(f"no choice of {T} tokens recorded")
        sel, n = self._bufs["sel"][0][:T], self._bufs["n_sel"][0][:T]
        return np.where(np.arange(self.top_k + 1) < n, sel, -1)

    def plan(self, plan, i: int, buf) -> None:
        b = self.buffers(plan.scratch.cap)
        plan.matmul(i, [self.wq, self.wk], buf["hx"], [b["iq"], b["ik"]])
        plan.norm(i, self.q_norm, b["iq"], self.n_idx, self.dim, b["iq"])

    def plan_attend(self, plan, i: int, q, att, H: int, KV: int, hd: int, scale: float) -> None:
        b = self.buffers(plan.scratch.cap)
        plan.rope(i, self.rope, b["iq"], ffi.NULL, self.n_idx, 0, self.dim)
        plan._add(lib.PT_OP_QSA_INDEX, i, x=b["iq"], x2=b["ik"], w=self.k_norm.p, eps=self.eps, cache_slot=self.slot,
                  n_heads=self.n_idx, head_dim=self.dim, x_stride=self.block, window=self.top_k,
                  rot_dim=self.rope.dim, sel=b["sel"], n_sel=b["n_sel"])
        plan._ops[-1]["slot"] = plan._slot(self.rope)
        plan.mm3_attention(i, q, H, KV, hd, scale, 1, self.block, self.top_k + 1, b["sel"], b["n_sel"], att)
