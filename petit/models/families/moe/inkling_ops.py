"""The Inkling families' ops (the family helpers: inkling_block.py's InklingDecoder describes its step with them):
the per-op path's calls (`_InkOracle`, on Gemma 3n's oracle) and the plan's emitters (`_plan_ops`) for the relative
attention, the short convolutions, the attention over depth and the rest kernels/fam36l.c adds."""
from petit.models.blocks.gemma3n_decoder import _Oracle, _plan_ops as _g3n_plan_ops
from petit.models.blocks.plan import Plan
from petit.native import ffi, lib


class _InkOracle(_Oracle):
    """The per-op path of the description: _Oracle's calls and Inkling's (one C call each)."""

    def store(self, layer, q, k, v, n_heads, n_kv, head_dim):
        at = 0
        for n, pos0, cache, _ in self.runs:
            rc = lib.pt_rope_store(q + at * n_heads * head_dim, k + at * n_kv * head_dim, v + at * n_kv * head_dim,
                                   n, n_heads, n_kv, head_dim, 0, pos0, ffi.NULL, ffi.NULL, 0, 0,
                                   cache.k_ptr[layer], cache.v_ptr[layer], cache.n_ctx)
            self._check(rc, layer)
            at += n

    def rel_attention(self, layer, rel, q, r, sinks, out):
        a, at = rel.c, 0
        H, hd = a.n_heads, a.head_dim
        for n, pos0, cache, _ in self.runs:
            rc = lib.pt_rel_attention(a, q + at * H * hd, r + at * H * a.d_rel if r is not None else ffi.NULL,
                                      sinks + at * H if sinks is not None else ffi.NULL, cache.k_ptr[layer],
                                      cache.v_ptr[layer], cache.n_ctx, n, pos0, out + at * H * hd)
            self._check(rc, layer)
            at += n

    def sconv(self, layer, conv, slot, x, dyn=None):
        c, at = conv.c, 0
        for n, pos0, cache, _ in self.runs:
            state = (cache.v_ptr if c.in_v else cache.k_ptr)[slot] + c.off
            rc = lib.pt_sconv_step(c, x + at * c.channels, dyn + at * c.heads * c.kernel if dyn is not None
                                   else ffi.NULL, n, pos0, state)
            self._check(rc, layer)
            at += n

    def block_res(self, layer, src, n_src, src_stride, cur, queries, n_q, width, eps, out, out_stride):
        self._check(lib.pt_block_res(src if n_src else ffi.NULL, n_src, src_stride, cur, queries.p, n_q, self.T,
                                     width, eps, out, out_stride), layer)

    def scale_cols(self, layer, y, w, width):
        self._check(lib.pt_scale_cols(y, w.p, self.T, width), layer)

    def param_act(self, layer, kind, y, width, params):
        p = ffi.new("float[4]", list(params) + [0.0] * (4 - len(params)))
        self._check(lib.pt_param_act(kind, y, self.T * width, p), layer)


def _plan_ops(plan: Plan) -> Plan:
    """The plan's emitters for Inkling's ops (the others are Plan's own and Gemma 3n's)."""
    plan = _g3n_plan_ops(plan)

    def store(layer, q, k, v, n_heads, n_kv, head_dim):
        plan.rope_store(layer, None, q, k, v, n_heads, n_kv, head_dim)

    def rel_attention(layer, rel, q, r, sinks, out):
        plan._keep.append(rel)
        plan._add(lib.PT_OP_REL_ATTN, layer, x=q, x2=r if r is not None else ffi.NULL,
                  w=sinks if sinks is not None else ffi.NULL, y=[out, ffi.NULL, ffi.NULL], rel=rel.c)

    def sconv(layer, conv, slot, x, dyn=None):
        plan._keep.append(conv)
        plan._add(lib.PT_OP_SCONV, layer, y=[x, ffi.NULL, ffi.NULL], x2=dyn if dyn is not None else ffi.NULL,
                  sconv=conv.c, cache_slot=slot)

    def block_res(layer, src, n_src, src_stride, cur, queries, n_q, width, eps, out, out_stride):
        plan._add(lib.PT_OP_BLOCK_RES, layer, x=src if n_src else ffi.NULL, streams=n_src, x_stride=src_stride,
                  x2=cur, w=queries.p, n_heads=n_q, width=width, eps=eps, y=[out, ffi.NULL, ffi.NULL],
                  y_stride=out_stride)

    plan.store, plan.rel_attention, plan.sconv, plan.block_res = store, rel_attention, sconv, block_res
    return plan
