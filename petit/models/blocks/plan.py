"""The forward plan's Python side: packs the op records kernels/plan.c runs (the op table is at the top of that
file) and runs a step with one C call.

`Decoder` (petit/models/blocks/decoder.py) describes its blocks through the methods below once, when it first runs; the
records hold pointers into the weights, the norms and biases and the scratch buffers, so a `Plan` keeps those alive
and is rebuilt when the scratch grows. A step sets what changes per call in one `pt_step`: its sequences (one, or
several run together), each with its T, first position, RoPE tables, KV cache and number of logits, and the logits
buffer; then it calls `pt_plan_run`, which takes the kernels' lock once.
"""
import weakref

import numpy as np

from petit.native import ffi, lib

NORM_KINDS = {"rms": 0, "layer": 1, "affine": 2, "l2clip": 3}    # affine: (x + b) * w, no norm (fam36g); l2clip:
# x w scaled down to an L2 norm of at most eps (fam36l)
OP_NAMES = {lib.PT_OP_EMBED: "embed", lib.PT_OP_NORM: "norm", lib.PT_OP_MATMUL: "matmul",
            lib.PT_OP_BIAS_ACT: "bias_act", lib.PT_OP_GLU: "glu", lib.PT_OP_AXPY: "axpy",
            lib.PT_OP_ROPE_STORE: "rope_store", lib.PT_OP_ATTENTION: "attention", lib.PT_OP_LAST_NORM: "last_norm",
            lib.PT_OP_LOGITS: "logits", lib.PT_OP_MOE: "moe",
            lib.PT_OP_HEADS: "heads", lib.PT_OP_COPY: "copy", lib.PT_OP_MAMBA: "mamba",
            lib.PT_OP_PARAM_ACT: "param_act", lib.PT_OP_ROPE: "rope"}
OP_NAMES.update({lib.PT_OP_ALTUP_PREDICT: "altup_predict", lib.PT_OP_ALTUP_CORRECT: "altup_correct",  # issue 30:
                 lib.PT_OP_PLE: "ple", lib.PT_OP_GEMMA_ROWS: "gemma_rows"})                            # gemma group
OP_NAMES.update({lib.PT_OP_DSA_INDEX: "dsa_index", lib.PT_OP_DSA_ATTENTION: "dsa_attention"})   # issue 30, mla
OP_NAMES.update({lib.PT_OP_MOA_GATE: "moa_gate"})                                     # issue 30, the jetmoe group
OP_NAMES.update({lib.PT_OP_HC_PRE: "hc_pre", lib.PT_OP_HC_POST: "hc_post", lib.PT_OP_DSV4_POOL: "dsv4_pool",  # dsv4
                 lib.PT_OP_DSV4_ATTN: "dsv4_attention", lib.PT_OP_DSV4_INDEX: "dsv4_index",
                 lib.PT_OP_HASH_ROUTE: "hash_route"})
OP_NAMES.update({lib.PT_OP_DOGE_DT: "doge_dt", lib.PT_OP_SCALE_COLS: "scale_cols"})  # issue 36, fam36d
OP_NAMES.update({lib.PT_OP_MM3_INDEX: "mm3_index", lib.PT_OP_MM3_ATTENTION: "mm3_attention"})  # issue 36, fam36i
OP_NAMES.update({lib.PT_OP_HEAD_GATE: "head_gate", lib.PT_OP_CCA: "cca"})          # issue 36, fam36g
OP_NAMES.update({lib.PT_OP_REL_ATTN: "rel_attention", lib.PT_OP_SCONV: "sconv",       # issue 36, fam36l
                 lib.PT_OP_BLOCK_RES: "block_res"})
OP_NAMES.update({lib.PT_OP_Q4X_MIX: "q4x_mix", lib.PT_OP_QSA_INDEX: "qsa_index",       # issue 36, the q4exp group
                 lib.PT_OP_PLE_NGRAM: "ple_ngram", lib.PT_OP_PLE_MIX: "ple_mix"})
NULL = ffi.NULL


def address(p) -> int:
    """A C pointer's address (what the offload matches a record's matrices by)."""
    return int(ffi.cast("uintptr_t", p))


def fptr(a: np.ndarray):
    return ffi.cast("float *", ffi.from_buffer(a))


def scratch_arrays(cap: int, floats: dict, ints: dict = None) -> dict:
    """{name: (array [cap, width], its C pointer)}: float32 arrays of `floats` {name: width}, int32 ones of `ints`
    (a block's own scratch beside the decoder's: DSA's and MiniMax-M3's indexers)."""
    out = {}
    for names, dtype, ctype in ((floats, np.float32, "float *"), (ints or {}, np.int32, "int32_t *")):
        for name, w in names.items():
            a = np.zeros((cap, w), dtype)
            out[name] = (a, ffi.cast(ctype, ffi.from_buffer(a)))
    return out


class _CachePointers:
    """A KV cache's per-layer pointers as the step reads them (made once per cache)."""

    def __init__(self, cache):
        self.int8 = int(cache.kv_type == "int8")
        self.k = ffi.new("void *[]", [ffi.cast("void *", p) for p in cache.k_ptr])
        self.v = ffi.new("void *[]", [ffi.cast("void *", p) for p in cache.v_ptr])
        self.ks = ffi.new("float *[]", list(cache.ks_ptr)) if self.int8 else NULL
        self.vs = ffi.new("float *[]", list(cache.vs_ptr)) if self.int8 else NULL


class Plan:
    """The ops of one forward step over a scratch (`_Scratch` of decoder.py: `p[name]` its buffers' pointers).

    Each method appends one op; `layer` is the block it belongs to (-1 the embedding, len(layers) the head), the KV
    cache slot rope_store and attention use and what an error names."""

    def __init__(self, scratch):
        self.scratch = scratch
        self._ops: list[dict] = []
        self._keep: list = []                # what the records point into beyond the scratch and the weights
        self.weights: dict = {}              # the Weights of the MATMUL / LOGITS records by their pt_tensor's address
        self.ropes: list = []                # the distinct Rope objects, in slot order
        self.ops = None
        self.n_ops = 0

    # ---- building ----
    def _add(self, kind: int, layer: int, **fields) -> None:
        self._ops.append(dict(kind=kind, layer=layer, slot=-1, **fields))

    def embed(self, W, out, width: int, scale: float, pos_embed: np.ndarray | None) -> None:
        fields = dict(W=[W.c, NULL, NULL], y=[out, NULL, NULL], width=width, scale=scale, rows=1)
        if pos_embed is not None:
            pos = np.ascontiguousarray(pos_embed, np.float32)
            self._keep.append(pos)
            fields.update(b=fptr(pos), w_rows=pos.shape[0])
        self._add(lib.PT_OP_EMBED, -1, **fields)

    def _norm_fields(self, norm) -> dict:
        return dict(mode=NORM_KINDS[norm.kind], eps=norm.eps, w=norm.w.p if norm.w else NULL,
                    b=norm.b.p if norm.b else NULL, w_rows=norm.w.rows if norm.w else 1)

    def norm(self, layer: int, norm, x, rows: int, width: int, y) -> None:
        """`norm` (a decoder Norm) over T * rows rows of `width` values."""
        self._add(lib.PT_OP_NORM, layer, x=x, y=[y, NULL, NULL], rows=rows, width=width, **self._norm_fields(norm))
        if getattr(norm, "gate", None) is not None:         # issue 36, fam36m: A.X-K2's gated norm
            norm.gate.plan(self, layer, y, width)

    def matmul(self, layer: int, Ws: list, x, ys: list, accumulate: bool = False) -> None:
        """ys[m] = Ws[m] x (+= with accumulate, one matrix only) for up to three matrices sharing x."""
        pad = 3 - len(Ws)
        self.weights.update((address(w.c), w) for w in Ws)
        self._add(lib.PT_OP_MATMUL, layer, W=[w.c for w in Ws] + [NULL] * pad, x=x, y=list(ys) + [NULL] * pad,
                  mode=int(accumulate))

    def bias_act(self, layer: int, y, b, width: int, act: int) -> None:
        self._add(lib.PT_OP_BIAS_ACT, layer, y=[y, NULL, NULL], b=b.p if b is not None else NULL, rows=1,
                  width=width, mode=act)

    def glu(self, layer: int, act: int, gate, up, width: int, out) -> None:
        self._add(lib.PT_OP_GLU, layer, x=gate, x2=up, y=[out, NULL, NULL], rows=1, width=width, mode=act)

    def param_act(self, layer: int, kind: int, y, width: int, params) -> None:
        """y = act(y) in place, an activation with up to four parameters (pt_param_act)."""
        self._add(lib.PT_OP_PARAM_ACT, layer, y=[y, NULL, NULL], rows=1, width=width, mode=kind,
                  p=list(params) + [0.0] * (4 - len(params)))

    def axpy(self, layer: int, y, alpha: float, x, width: int) -> None:
        self._add(lib.PT_OP_AXPY, layer, y=[y, NULL, NULL], x=x, alpha=alpha, width=width)

    def _slot(self, rope) -> int:
        slot = next((s for s, r in enumerate(self.ropes) if r is rope), None)
        if slot is None:
            slot = len(self.ropes)
            self.ropes.append(rope)
        return slot

    def rope(self, layer: int, rope, q, k, n_heads: int, n_kv: int, head_dim: int) -> None:
        """Rotate q and k in place by `rope` (then rope_store with None stores them)."""
        self._add(lib.PT_OP_ROPE, layer, y=[q, k, NULL], n_heads=n_heads, n_kv=n_kv, head_dim=head_dim,
                  rot_dim=rope.dim, mode=int(rope.interleaved))
        self._ops[-1]["slot"] = self._slot(rope)

    def rope_store(self, layer: int, rope, q, k, v, n_heads: int, n_kv: int, head_dim: int) -> None:
        """Rotate q and k by `rope` (None: no rotation) and store k, v into the cache of `layer`."""
        fields = dict(y=[q, k, v], n_heads=n_heads, n_kv=n_kv, head_dim=head_dim)
        if rope is not None:
            slot = self._slot(rope)
            fields.update(rot_dim=rope.dim, mode=int(rope.interleaved))
        self._add(lib.PT_OP_ROPE_STORE, layer, **fields)
        if rope is not None:
            self._ops[-1]["slot"] = slot

    def attention(self, layer: int, q, n_heads: int, n_kv: int, head_dim: int, scale: float, softcap: float,
                  window: int, out, sinks=None, chunk: int = 0, temperature=None, alibi=None,
                  bidirectional: bool = False) -> None:
        """sinks: a Vec of one attention-sink logit per query head (gpt-oss), or None; chunk, temperature: as
        petit.native.attention (Llama 4); alibi: a Vec of one ALiBi slope per query head, or None; bidirectional:
        an encoder's attention (issue 35)."""
        floor, a, at_p = (tuple(temperature) + (0,))[:3] if temperature else (0.0, 0.0, 0)
        self._add(lib.PT_OP_ATTENTION, layer, x=q, y=[out, NULL, NULL], n_heads=n_heads, n_kv=n_kv,
                  head_dim=head_dim, scale=scale, softcap=softcap, window=window,
                  extra={"sinks": sinks.p if sinks is not None else NULL, "chunk": chunk, "temp_floor": floor,
                         "temp_scale": a, "alibi": alibi.p if alibi is not None else NULL,
                         "temp_at_p": at_p, "bidirectional": int(bidirectional)})

    def heads(self, layer: int, Ws, n_heads: int, x, x_stride: int, x_off: int, y, y_stride: int, y_off: int,
              gin, gout) -> None:
        """Per head h: y[t][h] = Ws[h] x[t][h] (kernels/mla.c); Ws a cffi array of n_heads tensors, kept alive by
        its owner."""
        self._add(lib.PT_OP_HEADS, layer, Wh=Ws, n_heads=n_heads, x=x, x2=gin, y=[y, gout, NULL], x_stride=x_stride,
                  x_off=x_off, y_stride=y_stride, y_off=y_off)

    def copy(self, layer: int, x, x_stride: int, x_off: int, y, y_stride: int, y_off: int, rows: int,
             width: int) -> None:
        """`width` values of each of T * rows rows from x (at x_off of x_stride) into y (at y_off of y_stride)."""
        self._add(lib.PT_OP_COPY, layer, x=x, y=[y, NULL, NULL], x_stride=x_stride, x_off=x_off, y_stride=y_stride,
                  y_off=y_off, rows=rows, width=width)

    def mamba(self, layer: int, record, x, out, accumulate: bool = False, slot: int | None = None) -> None:
        """A Mamba mixer (a pt_mamba record, petit/models/blocks/ssm.py) of x into out, per sequence over its state in
        cache slot `slot` (default: the layer's)."""
        self._add(lib.PT_OP_MAMBA, layer, x=x, y=[out, NULL, NULL], mamba=record, mode=int(accumulate),
                  cache_slot=layer if slot is None else slot)

    def dsa_index(self, layer: int, q, w, n_heads: int, dim: int, stride: int, k_off: int, scale: float,
                  w_scale: float, top_k: int, sel, n_sel) -> None:
        """DeepSeek Sparse Attention's indexer (kernels/dsa.c) per sequence over the cache of `layer`, whose rows
        (`stride` values) hold its keys at k_off: each token's top_k positions into sel, their count into n_sel."""
        self._add(lib.PT_OP_DSA_INDEX, layer, x=q, x2=w, n_heads=n_heads, head_dim=dim, x_stride=stride, x_off=k_off,
                  scale=scale, alpha=w_scale, window=top_k, sel=sel, n_sel=n_sel)

    def dsa_attention(self, layer: int, q, n_heads: int, stride: int, width: int, scale: float, top_k: int, sel,
                      n_sel, out, sinks=None) -> None:
        """Latent attention over each token's chosen positions (sel, n_sel) of the cache of `layer`: the first
        `width` values of each row (`stride` values) as keys and values; sinks: a Vec of one attention-sink logit a
        head (HY-V4, issue 36 fam36m), or None."""
        self._add(lib.PT_OP_DSA_ATTENTION, layer, x=q, y=[out, NULL, NULL], n_heads=n_heads, head_dim=width,
                  x_stride=stride, scale=scale, window=top_k, sel=sel, n_sel=n_sel,
                  w=sinks.p if sinks is not None else NULL)

    def moa_gate(self, layer: int, logits, experts: int, top_k: int, n_kv: int, hd: int, att) -> None:
        """JetMoE's attention experts weighed in place (kernels/moa.c): att [T][n_kv][experts][hd] by the softmax of
        each token's top_k router logits [T][experts], 0 for the experts not chosen (issue 30, the jetmoe group)."""
        self._add(lib.PT_OP_MOA_GATE, layer, x=logits, y=[att, NULL, NULL], n_heads=experts, mode=top_k, n_kv=n_kv,
                  head_dim=hd)

    def doge_dt(self, layer: int, z, A, q, k, n_heads: int, n_kv: int, head_dim: int, slot: int,
                q_value: float) -> None:
        """SmallDoge's key bias (kernels/doge.c): k's slot = exp(A softplus(z)) per kv head, q's slot = q_value."""
        self._add(lib.PT_OP_DOGE_DT, layer, x=z, w=A.p, y=[q, k, NULL], n_heads=n_heads, n_kv=n_kv,
                  head_dim=head_dim, x_off=slot, alpha=q_value)

    def scale_cols(self, layer: int, y, w, width: int) -> None:
        """y [T][width] *= w [width] (a Vec), in place."""
        self._add(lib.PT_OP_SCALE_COLS, layer, y=[y, NULL, NULL], w=w.p, width=width)

    def mm3_index(self, layer: int, iq, ik, slot: int, n_idx: int, dim: int, block: int, top_k: int, local: int, sel,
                  n_sel) -> None:
        """MiniMax-M3's indexer (kernels/mm3.c) per sequence: its keys ik stored in cache slot `slot`, each token's
        top_k blocks per indexer head into sel [T][n_idx][top_k], their count into n_sel [T][n_idx] (issue 36,
        fam36i)."""
        self._add(lib.PT_OP_MM3_INDEX, layer, x=iq, x2=ik, cache_slot=slot, n_heads=n_idx, head_dim=dim,
                  x_stride=block, x_off=local, window=top_k, sel=sel, n_sel=n_sel)

    def mm3_attention(self, layer: int, q, n_heads: int, n_kv: int, head_dim: int, scale: float, n_idx: int,
                      block: int, top_k: int, sel, n_sel, out) -> None:
        """Grouped-query attention over the positions of each token's chosen blocks (sel, n_sel) of the cache of
        `layer` (kernels/mm3.c)."""
        self._add(lib.PT_OP_MM3_ATTENTION, layer, x=q, y=[out, NULL, NULL], n_heads=n_heads, n_kv=n_kv,
                  head_dim=head_dim, scale=scale, mode=n_idx, x_stride=block, window=top_k, sel=sel, n_sel=n_sel)
    def head_gate(self, layer: int, act: int, g, y, n: int, width: int) -> None:
        """y [T][n][width] *= act(g [T][n]) (kernels/fam36g.c: 0 sigmoid, 1 softplus), in place."""
        self._add(lib.PT_OP_HEAD_GATE, layer, x=g, y=[y, NULL, NULL], mode=act, n_heads=n, width=width)

    def cca(self, layer: int, record, q, k, v, slot: int) -> None:
        """ZAYA's CCA projection of the raw q, k, v in place, per sequence, its state in cache slot `slot` (a pt_cca
        record, petit/models/families/moe/cca.py)."""
        self._add(lib.PT_OP_CCA, layer, y=[q, k, v], cca=record, cache_slot=slot)

    def moe(self, layer: int, record, x, out) -> None:
        """Routed experts (a pt_moe record, petit/models/blocks/moe.py) of x into out."""
        self._add(lib.PT_OP_MOE, layer, x=x, y=[out, NULL, NULL], moe=record)

    def head(self, layer: int, norm, resid, width: int, normed, W, b, scale: float, softcap: float) -> None:
        """The final norm of the step's last n_logits positions, then the LM head (+ bias, x scale, soft-cap)."""
        fields = self._norm_fields(norm) if norm is not None else {"mode": -1}      # None: no final norm
        self._add(lib.PT_OP_LAST_NORM, layer, x=resid, y=[normed, NULL, NULL], rows=1, width=width, **fields)
        if b is not None:
            self._keep.append(b)
        self.weights[address(W.c)] = W
        self._add(lib.PT_OP_LOGITS, layer, W=[W.c, NULL, NULL], x=normed, b=b.p if b is not None else NULL,
                  scale=scale, softcap=softcap)

    def finish(self) -> "Plan":
        """Pack the records into the C array; the step buffers the calls reuse."""
        self.n_ops = len(self._ops)
        self.ops = ffi.new("pt_plan_op[]", self.n_ops)
        for rec, fields in zip(self.ops, self._ops):
            for name, value in fields.items():
                if name in ("W", "y"):
                    for m, p in enumerate(value):
                        getattr(rec, name)[m] = p
                else:
                    setattr(rec, name, value)
        self.step = ffi.new("pt_step *")
        self.step.ids = self.scratch.ids_p
        self._seq_cap = 0
        self._caches = weakref.WeakKeyDictionary()
        return self

    def _grow(self, n: int) -> None:
        """Room for n sequences: their pt_seq records and, per sequence, a RoPE table per slot."""
        self.seqs = ffi.new("pt_seq[]", n)
        self.tables = [ffi.new("pt_rope_table[]", max(len(self.ropes), 1)) for _ in range(n)]
        self._held = [[None] * len(self.ropes) for _ in range(n)]   # the (cos, sin) arrays the tables point into
        for rec, tables in zip(self.seqs, self.tables):
            rec.rope = tables
        self.step.seqs = self.seqs
        self._seq_cap = n

    # ---- running ----
    def run(self, seqs: list, logits_out: np.ndarray | None, offload=None, one_by_one: bool = False) -> int:
        """One step over the ids already in scratch.ids (the sequences' one after another). `seqs` holds each
        sequence's (T, pos0, cache, n_logits); logits_out [sum of n_logits, vocab] (None when that is 0). 0, or the
        failing op's error (see `failed`). offload: None, or what runs the step instead of one pt_plan_run call
        (petit.gpu's Offload: the plan in slices, its matmuls on a device). one_by_one: each op its own C call from
        Python (a per-op path)."""
        if len(seqs) > self._seq_cap:
            self._grow(len(seqs))
        st = self.step
        st.n_seqs = len(seqs)
        for i, (T, pos0, cache, n_logits) in enumerate(seqs):
            rec, held = self.seqs[i], self._held[i]
            rec.T, rec.pos0, rec.n_logits = T, pos0, n_logits
            for slot, rope in enumerate(self.ropes):   # each sequence its own: dynamic NTK picks a table per length
                cos, sin = rope.tables(pos0 + T)
                h = held[slot]
                if h is None or h[0] is not cos or h[1] is not sin:
                    held[slot] = (cos, sin)
                    t = self.tables[i][slot]
                    t.cos, t.sin, t.n_pos = fptr(cos), fptr(sin), cos.shape[0]
            kv = self._caches.get(cache)
            if kv is None:
                kv = self._caches[cache] = _CachePointers(cache)
            rec.kv_int8, rec.k, rec.v, rec.k_scale, rec.v_scale, rec.n_ctx = (kv.int8, kv.k, kv.v, kv.ks, kv.vs,
                                                                              cache.n_ctx)
        st.logits = NULL if logits_out is None else fptr(logits_out)
        if offload is not None:
            return offload.run(self, st)
        if not one_by_one:
            return lib.pt_plan_run(self.ops, self.n_ops, st)
        for i in range(self.n_ops):
            rc = lib.pt_plan_run(self.ops + i, 1, st)
            if rc:
                st.failed_op = i
                return rc
        return 0

    def failed(self) -> tuple[str, int, int]:
        """The kind and layer of the op the last failing run stopped at (("step", -1, ...) for a bad step), and the
        sequence it failed on (-1: the op ran over all of them at once)."""
        i, seq = self.step.failed_op, self.step.failed_seq
        if i < 0:
            return "step", -1, seq
        return OP_NAMES[self.ops[i].kind], self.ops[i].layer, seq


class PlanOracle:
    """For a Decoder whose step is only described as plan ops (DeepSeek-V4, HY-V4: no op-by-op Python of its own):
    the per-op path (`oracle=True`) runs the plan's records one C call each from Python."""

    def _forward_oracle(self, seqs, logits_out) -> None:
        runs, _, scratch = self._begin(seqs, logits_out)
        plan = self._build_plan(scratch)
        rc = plan.run(runs, logits_out, one_by_one=True)
        if rc:
            kind, layer, seq = plan.failed()
            raise RuntimeError(f"kernel error {rc} in layer {layer} ({kind}, {self._positions(runs, seq)})")
        for T, pos0, cache, _ in runs:
            cache.pos = pos0 + T
