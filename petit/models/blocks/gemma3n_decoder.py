"""Gemma 3n's decoder (the family and what it computes: petit/models/families/dense/gemma3n_text.py): AltUp's
streams, the per-layer inputs, LAuReL and KV sharing around Gemma 3's block, described once (`_describe`) for the plan
(its ALTUP_PREDICT, ALTUP_CORRECT, PLE and GEMMA_ROWS ops, kernels/altup.c) and for the per-op path (`_Oracle`).
Gemma 4's text decoder and the Inkling families' describe their steps on it, with ops of their own."""
import math
import statistics
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.decoder import Decoder, Layer, Norm, Vec, _Scratch
from petit.models.blocks.plan import Plan, fptr
from petit.native import ACTIVATIONS, Weight, attn_extra, ffi, lib


def sparsity_multiplier(p: float) -> float:
    """The gaussian top-k's std multiplier: the standard normal's quantile at p (torch's Normal(0, 1).icdf)."""
    return float(np.float32(statistics.NormalDist().inv_cdf(p)))


def shared_kv_sources(types: list, shared: int) -> list[int]:
    """Each layer's KV cache slot: its own, or for the last `shared` layers the last earlier layer of its type
    (transformers' kv_sharing_modes; Gemma 3n's and Gemma 4's)."""
    n = len(types)
    first = n - shared
    src = list(range(n))
    for i in range(first, n):
        own = [j for j in range(first) if types[j] == types[i]]
        if not own:
            raise ValueError(f"config: layer {i} ({types[i]}) shares the keys and values of an earlier "
                             f"{types[i]} layer, but layers 0..{first - 1} have none")
        src[i] = own[-1]
    return src


@dataclass
class AltUp:
    """One layer's AltUp: the float32 router and coefficient blocks and their pt_altup record (made per scratch)."""
    router_norm: Vec
    router: Vec
    pred: Vec
    corr: Vec
    out_scale: Vec | None
    eps: float
    active: int

    def record(self, stride: int):
        key = "_rec_%d" % stride
        if not hasattr(self, key):
            r = ffi.new("pt_altup *")
            r.n, r.hidden, r.stride, r.active = self.router.a.shape[0], self.router.a.shape[1], stride, self.active
            r.eps = self.eps
            r.router_norm, r.router, r.pred, r.corr = (self.router_norm.p, self.router.p, self.pred.p, self.corr.p)
            r.out_scale = self.out_scale.p if self.out_scale is not None else ffi.NULL
            setattr(self, key, r)
        return getattr(self, key)


@dataclass
class Gemma3nLayer(Layer):
    altup: AltUp | None = None
    laurel_left: Weight | None = None
    laurel_right: Weight | None = None
    laurel_norm: Norm | None = None
    v_norm: Norm | None = None
    ple_gate: Weight | None = None
    ple_proj: Weight | None = None
    ple_norm: Norm | None = None
    kv_source: int = 0                  # the cache slot it attends over (its own unless it shares)
    sparsity: float = 0.0               # the gaussian top-k's multiplier (0: none)


_LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down", "laurel_left", "laurel_right", "ple_gate", "ple_proj")


class _G3nScratch(_Scratch):
    """_Scratch plus the streams: alt / pred [n][cap][hidden] (AltUp's streams and predictions), ple [layers][cap][P]
    (the per-layer inputs, a slice a layer), ple_proj [cap][layers * P], ple_row [layers * P], laurel_a [cap][rank],
    laurel [cap][hidden], ple_gate [cap][P]."""

    def __init__(self, arch, cap, n, L, P, R):
        super().__init__(arch, cap)
        D = arch.hidden_size
        shapes = {"alt": (n * cap, D), "pred": (n * cap, D), "ple": (L * cap, P), "ple_proj": (cap, L * P),
                  "ple_row": (1, L * P), "laurel_a": (cap, R), "laurel": (cap, D), "ple_gate": (cap, P)}
        for name, shape in shapes.items():
            self.arrays[name] = np.zeros(shape, np.float32)
            self.p[name] = fptr(self.arrays[name])


class _Oracle:
    """Runs the description op by op from Python (the per-op reference of the plan): the same C functions the plan's
    ops call, one call each."""

    def __init__(self, net, runs, T, scratch):
        self.net, self.runs, self.T, self.scratch = net, runs, T, scratch
        self.tables = {}
        self.rc = 0
        self.where = None

    def _check(self, rc, layer):
        if rc and not self.rc:
            self.rc, self.where = rc, layer

    def _table(self, rope, s, n):
        key = (id(rope), s)
        if key not in self.tables:
            cos, sin = rope.tables(n)
            self.tables[key] = (fptr(cos), fptr(sin), cos.shape[0], (cos, sin))
        return self.tables[key][:3]

    def embed(self, W, out, width, scale, _pos=None):
        if lib.pt_get_rows(W.c, self.scratch.ids_p, self.T, out) != 0:
            raise self.net._bad_ids(self.net._seqs)
        if scale != 1.0:
            a = np.frombuffer(ffi.buffer(out, self.T * width * 4), np.float32)
            a *= np.float32(scale)

    def norm(self, layer, nrm, x, rows, width, y):
        self._check(nrm(x, self.T * rows, width, y), layer)

    def matmul(self, layer, Ws, x, ys, accumulate=False):
        if len(Ws) == 1:
            self._check(lib.pt_matmul(Ws[0].c, x, self.T, ys[0], int(accumulate)), layer)
        else:
            Ws, ys = Ws + [None] * (3 - len(Ws)), ys + [ffi.NULL] * (3 - len(ys))
            self._check(lib.pt_matmul3(*(w.c if w is not None else ffi.NULL for w in Ws), x, self.T, *ys), layer)

    def glu(self, layer, act, gate, up, width, out):
        self._check(lib.pt_glu(act, gate, up, self.T * width, out), layer)

    def axpy(self, layer, y, alpha, x, width):
        lib.pt_axpy(y, alpha, x, self.T * width)

    def copy(self, layer, x, x_stride, x_off, y, y_stride, y_off, rows, width):
        self._check(lib.pt_copy_rows(x, x_stride, x_off, y, y_stride, y_off, self.T * rows, width), layer)

    def rope(self, layer, rope, q, k, n_heads, n_kv, head_dim):
        at = 0
        for s, (n, pos0, _, _) in enumerate(self.runs):
            cos, sin, n_pos = self._table(rope, s, pos0 + n)
            self._check(lib.pt_rope(q + at * n_heads * head_dim, k + at * n_kv * head_dim, n, n_heads, n_kv,
                                    head_dim, rope.dim, pos0, cos, sin, n_pos, int(rope.interleaved)), layer)
            at += n

    def rope_store(self, layer, rope, q, k, v, n_heads, n_kv, head_dim):
        at = 0
        for s, (n, pos0, cache, _) in enumerate(self.runs):
            cos, sin, n_pos = self._table(rope, s, pos0 + n)
            args = (q + at * n_heads * head_dim, k + at * n_kv * head_dim, v + at * n_kv * head_dim, n, n_heads, n_kv,
                    head_dim, rope.dim, pos0, cos, sin, n_pos, int(rope.interleaved))
            if cache.kv_type == "int8":
                rc = lib.pt_rope_store_q8(*args, cache.k_ptr[layer], cache.ks_ptr[layer], cache.v_ptr[layer],
                                          cache.vs_ptr[layer], cache.n_ctx)
            else:
                rc = lib.pt_rope_store(*args, cache.k_ptr[layer], cache.v_ptr[layer], cache.n_ctx)
            self._check(rc, layer)
            at += n

    def attention(self, layer, q, n_heads, n_kv, head_dim, scale, softcap, window, out):
        at, w = 0, n_heads * head_dim
        for n, pos0, cache, _ in self.runs:
            if cache.kv_type == "int8":
                rc = lib.pt_attention_q8(q + at * w, cache.k_ptr[layer], cache.ks_ptr[layer], cache.v_ptr[layer],
                                         cache.vs_ptr[layer], cache.n_ctx, n, n_heads, n_kv, head_dim, pos0, scale,
                                         softcap, window, attn_extra(), out + at * w)
            else:
                rc = lib.pt_attention(q + at * w, cache.k_ptr[layer], cache.v_ptr[layer], cache.n_ctx, n, n_heads,
                                      n_kv, head_dim, pos0, scale, softcap, window, attn_extra(), out + at * w)
            self._check(rc, layer)
            at += n

    def altup_predict(self, layer, rec, x, out, active):
        self._check(lib.pt_altup_predict(rec, x, self.T, out, active), layer)

    def moe(self, layer, record, x, out):
        self._check(lib.pt_moe_run(record, x, self.T, out, 0), layer)

    def altup_correct(self, layer, rec, pred, act, x, scaled):
        self._check(lib.pt_altup_correct(rec, pred, act, self.T, x, scaled), layer)

    def ple(self, layer, table, proj, L, P, nrm, proj_scale, emb_scale, out_scale, row, y, y_stride):
        self._check(lib.pt_ple(table.c, self.scratch.ids_p, self.T, proj, L, P, nrm.w.p if nrm.w else ffi.NULL,
                               nrm.eps, proj_scale, emb_scale, out_scale, row, y, y_stride), layer)

    def rows(self, layer, mode, y, x, width, scale=1.0, streams=0, x_stride=0):
        self._check(lib.pt_gemma_rows(mode, y, x if x is not None else ffi.NULL, self.T, width, scale, streams,
                                      x_stride), layer)


def _plan_ops(plan: Plan):
    """The plan's emitters for Gemma 3n's ops (its others are Plan's own)."""

    def altup_predict(layer, rec, x, out, active):
        plan._keep.append(rec)
        plan._add(lib.PT_OP_ALTUP_PREDICT, layer, x=x, y=[out, active, ffi.NULL], altup=rec)

    def altup_correct(layer, rec, pred, act, x, scaled):
        plan._keep.append(rec)
        plan._add(lib.PT_OP_ALTUP_CORRECT, layer, x=pred, x2=act, y=[x, scaled, ffi.NULL], altup=rec)

    def ple(layer, table, proj, L, P, nrm, proj_scale, emb_scale, out_scale, row, y, y_stride):
        plan._add(lib.PT_OP_PLE, layer, W=[table.c, ffi.NULL, ffi.NULL], x=proj, x2=row, y=[y, ffi.NULL, ffi.NULL],
                  rows=L, width=P, w=nrm.w.p if nrm.w else ffi.NULL, eps=nrm.eps, scale=proj_scale, alpha=emb_scale,
                  p=[out_scale, 0.0, 0.0, 0.0], y_stride=y_stride)

    def rows(layer, mode, y, x, width, scale=1.0, streams=0, x_stride=0):
        plan._add(lib.PT_OP_GEMMA_ROWS, layer, mode=mode, y=[y, ffi.NULL, ffi.NULL],
                  x=x if x is not None else ffi.NULL, width=width, scale=scale, streams=streams, x_stride=x_stride)

    plan.altup_predict, plan.altup_correct, plan.ple, plan.rows = altup_predict, altup_correct, ple, rows
    return plan


class Gemma3nDecoder(Decoder):
    """The Gemma 3n forward (see the module docstring): the Decoder's caches, checks, plan runner and head, with its
    own description of a step."""

    def __init__(self, arch, embed, layers, final_norm, lm_head, *, ple_table, ple_model_proj, ple_norm,
                 altup_proj, altup_unembed, n_streams, ple_width, laurel_rank, ple_scales):
        super().__init__(arch, embed, layers, final_norm, lm_head)
        self.ple_table, self.ple_model_proj, self.ple_norm = ple_table, ple_model_proj, ple_norm
        self.altup_proj, self.altup_unembed = altup_proj, altup_unembed
        self.n_streams, self.ple_width, self.laurel_rank = n_streams, ple_width, laurel_rank
        self.ple_scales = ple_scales            # (projection x, table x, sum x)

    def matrices(self) -> list[Weight]:
        out = {id(W): W for L in self.layers for W in (getattr(L, n) for n in _LAYER_MATRICES) if W is not None}
        for W in [self.ple_model_proj, *self.altup_proj, *self.altup_unembed, self.lm_head]:
            out[id(W)] = W
        return list(out.values())

    def named_matrices(self) -> list:
        """(Weight, tensor name) of the matrices beyond a layer's q, k, v, o, gate, up, down: what `petit verify`'s
        matrix check multiplies besides those (trainer/verify.py)."""
        out = [(self.ple_model_proj, "model.per_layer_model_projection.weight")]
        out += [(W, f"model.altup_projections.{j}.weight") for j, W in enumerate(self.altup_proj)]
        out += [(W, f"model.altup_unembed_projections.{j}.weight") for j, W in enumerate(self.altup_unembed)]
        for i, L in enumerate(self.layers):
            p = f"model.layers.{i}."
            out += [(L.laurel_left, p + "laurel.linear_left.weight"),
                    (L.laurel_right, p + "laurel.linear_right.weight"),
                    (L.ple_gate, p + "per_layer_input_gate.weight"), (L.ple_proj, p + "per_layer_projection.weight")]
        return out

    def replace_matrices(self, new: dict) -> None:
        for L in self.layers:
            for n in _LAYER_MATRICES:
                W = getattr(L, n)
                if W is not None and id(W) in new:
                    setattr(L, n, new[id(W)])
        self.ple_model_proj = new.get(id(self.ple_model_proj), self.ple_model_proj)
        self.altup_proj = [new.get(id(W), W) for W in self.altup_proj]
        self.altup_unembed = [new.get(id(W), W) for W in self.altup_unembed]
        if id(self.embed) in new:
            self.embed = new[id(self.embed)]
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        self._plan = None

    def scratch(self, T: int):
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _G3nScratch(self.arch, max(T, 16), self.n_streams, len(self.layers), self.ple_width,
                                        self.laurel_rank)
        return self._scratch

    # issue 36, fam36l: a decoder describing its step with more ops (Inkling's) names its own emitters and oracle
    plan_ops, oracle = staticmethod(_plan_ops), _Oracle

    def _build_plan(self, scratch) -> Plan:
        plan = self.plan_ops(Plan(scratch))
        self._describe(plan, scratch)
        D = self.arch.hidden_size
        plan.head(len(self.layers), self.final_norm, scratch.p["resid"], D, scratch.p["normed"], self.lm_head, None,
                  self.arch.logit_scale, self.arch.logit_softcap)
        return plan.finish()

    def _forward_oracle(self, seqs, logits_out) -> None:
        runs, T, scratch = self._begin(seqs, logits_out)
        self._seqs = seqs
        o = self.oracle(self, runs, T, scratch)
        self._describe(o, scratch)
        if o.rc:
            raise RuntimeError(f"kernel error {o.rc} in layer {o.where} ({self._positions(runs, -1)})")
        for n, pos0, cache, _ in runs:
            cache.pos = pos0 + n
        if logits_out is not None:
            self._head(scratch.p, runs, self.arch.hidden_size, logits_out)

    def _describe(self, s, scratch) -> None:
        """The step, for a Plan (records) or an _Oracle (calls): everything up to the final norm."""
        arch, buf, cap = self.arch, scratch.p, scratch.cap
        D, H, KV, hd = arch.hidden_size, arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        n, L, P = self.n_streams, len(self.layers), self.ple_width
        act = ACTIVATIONS[arch.act]
        stream = lambda j: buf["alt"] + j * cap * D          # noqa: E731
        pred = lambda j: buf["pred"] + j * cap * D            # noqa: E731
        s.embed(self.embed, stream(0), D, arch.embed_scale, None)
        s.matmul(-1, [self.ple_model_proj], stream(0), [buf["ple_proj"]])
        s.ple(-1, self.ple_table, buf["ple_proj"], L, P, self.ple_norm, *self.ple_scales, buf["ple_row"], buf["ple"],
              cap * P)
        for j in range(1, n):
            s.matmul(-1, [self.altup_proj[j - 1]], stream(0), [stream(j)])
            s.rows(-1, 1, stream(j), stream(0), D)
        for i, layer in enumerate(self.layers):
            F = layer.up.shape[0]
            rec = layer.altup.record(cap * D)
            s.altup_predict(i, rec, buf["alt"], buf["pred"], buf["resid"])
            s.norm(i, layer.attn_norm, buf["resid"], 1, D, buf["normed"])
            s.matmul(i, [layer.laurel_left], buf["normed"], [buf["laurel_a"]])
            s.matmul(i, [layer.laurel_right], buf["laurel_a"], [buf["laurel"]])
            s.norm(i, layer.laurel_norm, buf["laurel"], 1, D, buf["laurel"])
            s.axpy(i, buf["laurel"], 1.0, buf["normed"], D)
            if layer.kv_source == i:
                s.matmul(i, [layer.q, layer.k, layer.v], buf["normed"], [buf["q"], buf["k"], buf["v"]])
                s.norm(i, layer.q_norm, buf["q"], H, hd, buf["q"])
                s.norm(i, layer.k_norm, buf["k"], KV, hd, buf["k"])
                s.norm(i, layer.v_norm, buf["v"], KV, hd, buf["v"])
                s.rope_store(i, layer.rope, buf["q"], buf["k"], buf["v"], H, KV, hd)
            else:                                   # keys and values of layer kv_source, already in the cache
                s.matmul(i, [layer.q], buf["normed"], [buf["q"]])
                s.norm(i, layer.q_norm, buf["q"], H, hd, buf["q"])
                s.rope(i, layer.rope, buf["q"], buf["k"], H, 0, hd)
            s.attention(layer.kv_source, buf["q"], H, KV, hd, 1.0, 0.0, layer.window, buf["att"])
            s.matmul(i, [layer.o], buf["att"], [buf["branch"]])
            s.norm(i, layer.post_attn_norm, buf["branch"], 1, D, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            s.rows(i, 2, buf["resid"], buf["laurel"], D, math.sqrt(2.0))
            s.norm(i, layer.mlp_norm, buf["resid"], 1, D, buf["normed"])
            s.matmul(i, [layer.gate, layer.up], buf["normed"], [buf["gate"], buf["up"]])
            if layer.sparsity:
                s.rows(i, 0, buf["gate"], None, F, layer.sparsity)
            s.glu(i, act, buf["gate"], buf["up"], F, buf["mlp_hidden"])
            s.matmul(i, [layer.down], buf["mlp_hidden"], [buf["branch"]])
            s.norm(i, layer.post_mlp_norm, buf["branch"], 1, D, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            s.altup_correct(i, rec, buf["pred"], buf["resid"], buf["alt"], buf["normed"])
            s.matmul(i, [layer.ple_gate], buf["normed"], [buf["ple_gate"]])
            s.glu(i, act, buf["ple_gate"], buf["ple"] + i * cap * P, P, buf["ple_gate"])
            s.matmul(i, [layer.ple_proj], buf["ple_gate"], [buf["branch"]])
            s.norm(i, layer.ple_norm, buf["branch"], 1, D, buf["branch"])
            for j in range(1, n):
                s.axpy(i, stream(j), 1.0, buf["branch"], D)
        for j in range(1, n):
            s.matmul(L, [self.altup_unembed[j - 1]], stream(j), [pred(j)])
            s.rows(L, 1, pred(j), stream(0), D)
        s.copy(L, stream(0), D, 0, pred(0), D, 0, 1, D)
        s.rows(L, 3, buf["resid"], buf["pred"], D, 1.0, n, cap * D)
