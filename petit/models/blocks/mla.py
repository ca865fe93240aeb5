"""Multi-head latent attention (DeepSeek-V2 / V3) as the decoder runs it, with the compressed latent in the KV cache.

Per head h, transformers computes keys k_h = [W_uk_h c ; k_pe] and values v_h = W_uv_h c from one latent row c =
RMSNorm(W_c x) (kv_lora_rank wide) and one rotated k_pe (qk_rope_head_dim wide) per position. Their products are
absorbed into the query and the output instead (as DeepSeek's own inference code does):

    q_h . k_h = (W_uk_h^T q_nope_h) . c + q_pe_h . k_pe,        o_h = W_uv_h (sum_p a_p c_p)

so attention is one key / value head of width rope + rank over the cached rows [k_pe ; c], and the values are those
same rows (the cache holds each position once: its keys and values are one buffer), of which the output keeps the
latent part. The ops (petit/models/blocks/plan.py, kernels/plan.c): q_nope, q_pe (and for V3 the low-rank q_a first),
the latent and k_pe products; the latent's norm; `copy` puts q_pe and k_pe in front of each head's row and the latent
behind k_pe; `heads` multiplies each head's q_nope by its absorbed W_uk_h^T into the rest of the query row; rope,
store and attention as for any layer (rotating the first rope values of each row); `heads` again multiplies each
head's attended latent by W_uv_h into o_proj's input."""
from dataclasses import dataclass, field

import numpy as np

from petit.native import Weight, ffi


@dataclass
class Mla:
    """The matrices of one layer's latent attention. q: [H * nope, D] and q_pe [H * rope, D] (V2-Lite), or their
    product with q_a [rank_q, D] behind q_a_norm (V3); c [rank, D], k_pe [rope, D], kv_norm over c; k_absorb: H
    matrices W_uk_h^T [rank, nope]; v_absorb: H matrices W_uv_h [v, rank]."""
    q: Weight
    q_pe: Weight
    c: Weight
    k_pe: Weight
    kv_norm: object
    k_absorb: list
    v_absorb: list
    nope: int
    rope: int
    rank: int
    v_dim: int
    q_a: Weight | None = None
    q_a_norm: object = None
    dsa: object = None                  # DeepSeek Sparse Attention's indexer (petit/models/blocks/dsa.py), or None
    # issue 36, fam36k (Dots 3, whose sliding layers' latent attention has other sizes than its indexed layers'):
    # this layer's softmax scale (None: the model's), a norm of k_pe before RoPE (k_rope_only_layernorm)
    scale: float | None = None
    k_pe_norm: object = None
    # issue 36, fam36m: q / q_pe (and a query-side gate) read [q_a_norm(q_a x) ; q_a x], 2 x rank_q wide (A.X-K2's
    # q_gate_proj); DSA's indexer still reads the normed half
    q_cat: bool = False
    # the heads' outputs times sigmoid(gate . in) before o_proj (issue 36: fam36k's Dots 3, fam36m's): in = x (gate_x,
    # the default: Dots 3's and Ling 3's g_proj, HY-V4's gate_proj) or the query's input (A.X-K2's q_gate_proj rows);
    # one gate a head's v_dim values (gate_width 0) or gate_width values (1: each value, A.X-K2, HY-V4)
    gate: Weight | None = None
    gate_width: int = 0
    gate_x: bool = True
    _bufs: dict = field(default_factory=dict, repr=False)
    _cap: int = field(default=0, repr=False)

    @property
    def heads(self) -> int:
        return len(self.k_absorb)

    @property
    def row(self) -> int:
        """The width of this layer's attention rows (q, the cache): [k_pe ; latent], and DSA's indexer key behind."""
        return self.rope + self.rank + (self.dsa.dim if self.dsa is not None else 0)

    def matrices(self) -> list:
        return [m for m in (self.q_a, self.q, self.q_pe, self.c, self.k_pe, self.gate) if m is not None] + \
            list(self.k_absorb) + list(self.v_absorb) + (self.dsa.matrices() if self.dsa is not None else [])

    def replace(self, new: dict) -> None:
        for name in ("q_a", "q", "q_pe", "c", "k_pe", "gate"):
            w = getattr(self, name)
            if w is not None:
                setattr(self, name, new.get(id(w), w))
        self.k_absorb = [new.get(id(w), w) for w in self.k_absorb]
        self.v_absorb = [new.get(id(w), w) for w in self.v_absorb]
        if self.dsa is not None:
            self.dsa.replace(new)
        self._tables = None

    def buffers(self, cap: int) -> dict:
        """Its scratch for steps of up to `cap` tokens: {name: (array, pointer)}."""
        if self._cap >= cap:
            return self._bufs
        H = self.heads
        rq = self.q_a.shape[0] if self.q_a is not None else 1
        widths = {"q_a": rq, "q_nope": H * self.nope,
                  "q_pe": H * self.rope, "c": self.rank, "k_pe": self.rope, "o_in": H * self.v_dim,
                  "gin": max(self.nope, self.rank), "gout": max(self.rank, self.v_dim)}
        if self.q_cat:
            widths.update(q_n=rq, q_cat=2 * rq)
        if self.gate is not None:       # the gates
            widths["gate"] = self.gate.shape[0]
        self._bufs = {}
        for name, w in widths.items():
            a = np.zeros((cap, w), np.float32)
            self._bufs[name] = (a, ffi.cast("float *", ffi.from_buffer(a)))
        self._cap = cap
        return self._bufs

    def tensors(self, which: str):
        """The cffi array of the per-head matrices ("k" or "v"), made once."""
        t = getattr(self, "_tables", None) or {}
        if which not in t:
            t[which] = ffi.new("const pt_tensor *[]", [w.c for w in (self.k_absorb if which == "k"
                                                                     else self.v_absorb)])
            self._tables = t
        return t[which]
