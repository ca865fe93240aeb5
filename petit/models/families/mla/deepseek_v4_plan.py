"""DeepSeek-V4's step as plan ops (the family: petit/models/families/mla/deepseek_v4.py): the Decoder's caches, checks,
plan runner and head, with its own description of a step over its own scratch and cache regions (deepseek_v4_cache.py).
The per-op path (`oracle=True`) runs the same records one C call each from Python."""
from petit.models.blocks.decoder import Decoder
from petit.models.blocks.plan import Plan, PlanOracle
from petit.native import ffi, lib
from petit.models.families.mla.deepseek_v4_cache import _V4Scratch, regions


class DeepseekV4Decoder(PlanOracle, Decoder):
    int8_cache = False          # its cache slots hold raw compressor rows and entries besides the keys
    int8_refusal = "deepseek_v4 keeps its compressors' state and entries in the cache"

    def __init__(self, arch, embed, layers, final_norm, lm_head, *, cfg, hc_head):
        super().__init__(arch, embed, layers, final_norm, lm_head)
        self.cfg, self.hc_head = cfg, hc_head

    def _weights(self, names: bool = False):
        """(owner, attribute) of every matrix the step multiplies by, beside the experts' (names: and its tensor's
        name)."""
        for i, L in enumerate(self.layers):
            a, p = L.v4, f"model.layers.{i}.attn."
            out = [(a, n, p + n) for n in ("wq_a", "wq_b", "wkv", "wo_b")]
            for c, q in ((a.comp, p + "compressor."), (a.index.comp if a.index else None, p + "indexer.compressor.")):
                if c is not None:
                    out += [(c, "wkv", q + "wkv"), (c, "wgate", q + "wgate")]
            if a.index is not None:
                out += [(a.index, "wq_b", p + "indexer.wq_b"), (a.index, "w_proj", p + "indexer.weights_proj")]
            yield from ((o, n, w + ".weight") if names else (o, n) for o, n, w in out)

    def named_matrices(self) -> list:
        """(Weight, tensor name) of the attention's matrices: what `petit verify`'s matrix check multiplies beside
        the experts' (trainer/verify.py)."""
        out = [(getattr(o, n), name) for o, n, name in self._weights(names=True)]
        for i, L in enumerate(self.layers):
            out += [(W, f"model.layers.{i}.attn.wo_a.{g}.weight") for g, W in enumerate(L.v4.wo_a)]
        return out

    def matrices(self) -> list:
        out = {id(getattr(o, n)): getattr(o, n) for o, n in self._weights()}
        out.update((id(W), W) for L in self.layers for W in L.v4.wo_a + L.moe.matrices())
        out[id(self.lm_head)] = self.lm_head
        return list(out.values())

    def replace_matrices(self, new: dict) -> None:
        for o, n in self._weights():
            setattr(o, n, new.get(id(getattr(o, n)), getattr(o, n)))
        for L in self.layers:
            L.v4.wo_a = [new.get(id(W), W) for W in L.v4.wo_a]
            L.moe.replace(new)
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        self._plan = None

    def scratch(self, T: int):
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _V4Scratch(self.arch, max(T, 16), self.cfg)
        return self._scratch

    def _begin(self, seqs, logits_out):
        for _, cache, _ in seqs:
            if getattr(cache, "kv_type", "f32") != "f32":
                raise ValueError(f"{self.int8_refusal}: kv_type {cache.kv_type!r} is not supported (float32 caches "
                                 f"only)")
        return super()._begin(seqs, logits_out)

    def _build_plan(self, scratch) -> Plan:
        cfg, b, s = self.cfg, scratch.p, Plan(scratch)
        D, n = cfg.hidden_size, cfg.hc_mult
        s.embed(self.embed, b["emb"], D, 1.0, None)
        for j in range(n):
            s.copy(-1, b["emb"], D, 0, b["X0"], n * D, j * D, 1, D)
        cur = ["X0", "X1"]
        for i, L in enumerate(self.layers):
            for hc, block in ((L.hc_attn, self._attention), (L.hc_ffn, self._ffn)):
                _hc_pre(s, i, hc, b[cur[0]], n, D, cfg, b["hx"], b["post"], b["comb"])
                block(s, i, L, b, scratch)
                s._add(lib.PT_OP_HC_POST, i, x=b[cur[0]], x2=b["y"], y=[b[cur[1]], b["post"], b["comb"]],
                       streams=n, width=D)
                cur.reverse()
        _hc_pre(s, len(self.layers), self.hc_head, b[cur[0]], n, D, cfg, b["resid"], ffi.NULL, ffi.NULL)
        s.head(len(self.layers), self.final_norm, b["resid"], D, b["normed"], self.lm_head, None, 1.0, 0.0)
        return s.finish()

    def _ffn(self, s, i, L, b, scratch) -> None:
        s.norm(i, L.mlp_norm, b["hx"], 1, self.cfg.hidden_size, b["normed"])
        m = L.moe
        rec = m.c(scratch.cap)
        if m.tid2eid is not None:
            s._keep.append(m.tid2eid)
            s._add(lib.PT_OP_HASH_ROUTE, i, sel=ffi.cast("int32_t *", ffi.from_buffer(m.tid2eid)),
                   n_sel=ffi.cast("int32_t *", ffi.from_buffer(m._forced)), w_rows=len(m.tid2eid), width=m.top_k)
        s.moe(i, rec, b["normed"], b["y"])

    def _attention(self, s, i, L, b, scratch) -> None:
        cfg, a = self.cfg, L.v4
        D, H, hd, rd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.qk_rope_head_dim
        reg, slot = regions(cfg, a.kind), s._slot(L.rope)
        s.norm(i, L.attn_norm, b["hx"], 1, D, b["normed"])
        s.matmul(i, [a.wq_a], b["normed"], [b["qa"]])
        s.norm(i, L.q_norm, b["qa"], 1, cfg.q_lora_rank, b["qa"])
        s.matmul(i, [a.wq_b], b["qa"], [b["q4"]])
        s.norm(i, _Plain(cfg.rms_norm_eps), b["q4"], H, hd, b["q4"])
        s.matmul(i, [a.wkv], b["normed"], [b["kv"]])
        s.norm(i, L.k_norm, b["kv"], 1, hd, b["kv"])
        sel = n_sel = ffi.NULL
        if a.comp is not None:
            _pool(s, i, a.comp, b["normed"], b["ckv"], b["cgate"], reg["raw"], reg["entries"], slot, rd, cfg)
        if a.index is not None:
            x = a.index
            _pool(s, i, x.comp, b["normed"], b["ikv"], b["igate"], reg["i_raw"], reg["i_entries"], slot, rd, cfg)
            s.matmul(i, [x.wq_b], b["qa"], [b["iq"]])
            s.matmul(i, [x.w_proj], b["normed"], [b["iw"]])
            sel, n_sel = (ffi.cast("int32_t *", ffi.from_buffer(a)) for a in scratch.sel[i])
            x.last_choice = lambda T, i=i, scratch=scratch: scratch.last_choice(i, T)
            s._add(lib.PT_OP_DSV4_INDEX, i, x=b["iq"], x2=b["iw"], n_heads=x.n_heads, head_dim=x.dim, rot_dim=rd,
                   window=a.m, scale=x.dim ** -0.5, alpha=x.n_heads ** -0.5, n_kv=x.top_k, y_off=reg["i_entries"],
                   sel=sel, n_sel=n_sel)
            s._ops[-1]["slot"] = slot
        s._add(lib.PT_OP_DSV4_ATTN, i, x=b["q4"], x2=b["kv"], w=a.sinks.p, n_heads=H, head_dim=hd, rot_dim=rd,
               window=cfg.sliding_window, scale=hd ** -0.5, mode=a.m, n_kv=cfg.index_topk, y=[b["att4"], ffi.NULL,
               ffi.NULL], y_off=reg.get("entries", 0), sel=sel, n_sel=n_sel)
        s._ops[-1]["slot"] = slot
        G = cfg.o_groups
        heads = ffi.new("const pt_tensor *[]", [W.c for W in a.wo_a])
        s._keep.append(heads)
        s.heads(i, heads, G, b["att4"], H * hd // G, 0, b["oa"], cfg.o_lora_rank, 0, b["gin"], b["gout"])
        s.matmul(i, [a.wo_b], b["oa"], [b["y"]])


class _Plain:
    """An RMS norm without a weight (the query's, per head)."""
    kind, w, b = "rms", None, None

    def __init__(self, eps):
        self.eps = eps


def _hc_pre(s, i, hc, X, n, D, cfg, out, post, comb) -> None:
    s._add(lib.PT_OP_HC_PRE, i, x=X, w=hc.fn.p, b=hc.base.p, x2=hc.scale.p, streams=n, width=D,
           window=cfg.hc_sinkhorn_iters, eps=cfg.hc_eps, alpha=cfg.rms_norm_eps, mode=int(post == ffi.NULL),
           y=[out, post, comb])


def _pool(s, i, c, x, kv, gate, raw, entries, slot, rd, cfg) -> None:
    s.matmul(i, [c.wkv], x, [kv])
    s.matmul(i, [c.wgate], x, [gate])
    s._add(lib.PT_OP_DSV4_POOL, i, x=kv, x2=gate, b=c.ape.p, w=c.norm.p, eps=cfg.rms_norm_eps, window=c.m,
           head_dim=c.d, mode=int(c.overlap), rot_dim=rd, x_off=raw, y_off=entries)
    s._ops[-1]["slot"] = slot
