"""MiniMax-M3's block-sparse attention (transformers' `minimax_m3_sparse` layers, MiniMaxM3VLIndexer) as the decoder
runs it: a lightning indexer beside the layer's grouped-query attention chooses, for each query and indexer head, the
blocks of `block` key positions that head's query heads attend to.

The indexer of a layer: iq = q_norm(q_proj x) [n_idx x dim], ik = k_norm(k_proj x) [dim] (Gemma-style RMSNorms, each
head's), both rotated as the layer's heads are (their first rotary values, by halves). Block b of the query at p
scores the largest iq_h . ik_s over its positions s <= p; the query's own block and the `local` - 1 before it score
+inf; the query's heads of indexer head h attend to the positions s <= p of the `top_k` best blocks (every visible
block while there are at most top_k: up to top_k x block positions the layer is full causal attention).

ik is kept in a cache slot of its own past the layers' (`slot`: one row of `dim` values a position, float or int8 as
the KV cache is), so a rewind to any position stays exact. The choice and the attention over it run in C
(kernels/mm3.c, ops MM3_INDEX and MM3_ATTENTION); the projections and norms run over the step's rows before them, as
the layer's `pre_store` (they read the layer's normed input, buf["normed"])."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.plan import scratch_arrays
from petit.native import Weight, ffi, lib


@dataclass
class BlockSparse:
    wq: Weight                          # [n_idx * dim, hidden]
    wk: Weight                          # [dim, hidden]
    q_norm: object                      # per-head norms of dim values
    k_norm: object
    n_idx: int
    dim: int
    block: int
    top_k: int
    local: int
    slot: int                           # the cache slot of the indexer's keys
    rope: object = None                 # the layer's Rope (None: a NoPE layer, nothing rotated)
    _bufs: dict = field(default_factory=dict, repr=False)
    _cap: int = field(default=0, repr=False)

    def matrices(self) -> list:
        return [self.wq, self.wk]

    def replace(self, new: dict) -> None:
        self.wq, self.wk = new.get(id(self.wq), self.wq), new.get(id(self.wk), self.wk)

    def buffers(self, cap: int) -> dict:
        """Scratch for steps of up to `cap` tokens: {name: (array, pointer)}."""
        if self._cap >= cap:
            return self._bufs
        self._bufs = scratch_arrays(cap, {"iq": self.n_idx * self.dim, "ik": self.dim},
                                    {"sel": self.n_idx * self.top_k, "n_sel": self.n_idx})
        self._cap = cap
        return self._bufs

    def last_choice(self, T: int) -> np.ndarray:
        """The blocks the last step's T queries chose, [T, n_idx * top_k], increasing per head, -1 after each head's
        count (a copy)."""
        if self._cap < T:
            raise ValueError(f"no choice of {T} tokens recorded")
        sel = self._bufs["sel"][0][:T].reshape(T, self.n_idx, self.top_k)
        n = self._bufs["n_sel"][0][:T]
        return np.where(np.arange(self.top_k) < n[:, :, None], sel, -1).reshape(T, -1)

    # ---- the projections over the step's rows: the layer's pre_store ----
    def run(self, buf, T: int) -> int:
        b = {k: p for k, (_, p) in self.buffers(T).items()}
        rc = lib.pt_matmul3(self.wq.c, self.wk.c, ffi.NULL, buf["normed"], T, b["iq"], b["ik"], ffi.NULL)
        rc |= self.q_norm(b["iq"], T * self.n_idx, self.dim, b["iq"])
        return rc | self.k_norm(b["ik"], T, self.dim, b["ik"])

    def plan(self, plan, i: int, buf) -> None:
        b = {k: p for k, (_, p) in self.buffers(plan.scratch.cap).items()}
        plan.matmul(i, [self.wq, self.wk], buf["normed"], [b["iq"], b["ik"]])
        plan.norm(i, self.q_norm, b["iq"], self.n_idx, self.dim, b["iq"])
        plan.norm(i, self.k_norm, b["ik"], 1, self.dim, b["ik"])

    # ---- per sequence, after the layer's rope_store: the choice and the attention over it ----
    def attend(self, i: int, T: int, pos0: int, cache, at: int, q, att, H: int, KV: int, hd: int, scale: float,
               table) -> int:
        """The oracle's calls for one sequence's T rows from row `at`: q / att its rows; table: the layer's RoPE
        table (cos, sin, n_pos, rot_dim, interleaved) or None."""
        b = {k: p for k, (_, p) in self._bufs.items()}
        iq, ik = b["iq"] + at * self.n_idx * self.dim, b["ik"] + at * self.dim
        sel, n_sel = b["sel"] + at * self.n_idx * self.top_k, b["n_sel"] + at * self.n_idx
        rc = 0
        if table is not None:
            cos, sin, n_pos, rot, inter = table
            rc |= lib.pt_rope(iq, ik, T, self.n_idx, 1, self.dim, rot, pos0, cos, sin, n_pos, inter)
        int8 = cache.kv_type == "int8"
        rc |= lib.pt_mm3_index(iq, ik, cache.k_ptr[self.slot], cache.ks_ptr[self.slot] if int8 else ffi.NULL,
                               int(int8), cache.n_ctx, T, pos0, self.n_idx, self.dim, self.block, self.top_k,
                               self.local, sel, n_sel)
        return rc | lib.pt_mm3_attention(q, cache.k_ptr[i], cache.ks_ptr[i] if int8 else ffi.NULL, cache.v_ptr[i],
                                         cache.vs_ptr[i] if int8 else ffi.NULL, int(int8), cache.n_ctx, T, pos0, H,
                                         KV, hd, scale, self.n_idx, self.block, self.top_k, sel, n_sel, att)

    def plan_attend(self, plan, i: int, q, att, H: int, KV: int, hd: int, scale: float) -> None:
        """The plan's ops of `attend`, after the layer's rope_store."""
        b = {k: p for k, (_, p) in self.buffers(plan.scratch.cap).items()}
        if self.rope is not None:
            plan.rope(i, self.rope, b["iq"], b["ik"], self.n_idx, 1, self.dim)
        plan.mm3_index(i, b["iq"], b["ik"], self.slot, self.n_idx, self.dim, self.block, self.top_k, self.local,
                       b["sel"], b["n_sel"])
        plan.mm3_attention(i, q, H, KV, hd, scale, self.n_idx, self.block, self.top_k, b["sel"], b["n_sel"], att)


def check_indexer(cfg) -> None:
    """The indexer settings of a MiniMax-M3 config (`index_*`, its heads, its rotated values `rot`) the kernels run:
    each indexer head chooses for as many query heads, rotates as the heads do, and its keys fit a cache slot."""
    H, KV, hd, dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.index_head_dim
    if H % cfg.index_n_heads:
        raise ValueError(f"config: num_attention_heads {H} is not a multiple of index_n_heads {cfg.index_n_heads} "
                         f"(each indexer head chooses for as many query heads)")
    if not cfg.rot <= dim <= KV * hd:
        raise ValueError(f"config: index_head_dim {dim} must be at least the {cfg.rot} rotated values (the indexer "
                         f"rotates as the heads do) and at most num_key_value_heads x head_dim {KV * hd} (its keys' "
                         f"cache rows)")
    if not 0 <= cfg.index_local_blocks <= cfg.index_topk_blocks:
        raise ValueError(f"config: index_local_blocks {cfg.index_local_blocks!r} must be between 0 and "
                         f"index_topk_blocks {cfg.index_topk_blocks}")
