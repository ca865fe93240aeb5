"""Inkling 2's layer and decoder (issue 36, fam36l), shared by `inkling2_text` and `inkling2_loop_text`: the weights of
a layer under the released names (`read_layer`), its description for the plan and the per-op path
(`Inkling2Decoder.describe_layer`: the attention residuals over depth, the clipped attention with its sinks and
output gate, the dynamic convolutions of the full layers, the soft-capped experts), and the decoder (`build_decoder`).
petit/models/families/moe/inkling2_text.py says what each piece computes."""
from dataclasses import dataclass

from petit.models.blocks.decoder import Norm, Vec
from petit.models.families.moe.inkling_block import InklingDecoder, InkLayer
from petit.native import GLU_ACTIVATIONS, Weight


@dataclass
class Ink2Layer(InkLayer):
    sink: Weight | None = None
    k_dyn: Weight | None = None
    v_dyn: Weight | None = None
    in_norms: tuple = ()                # a full layer's q / k / v input norms
    attn_q: Vec | None = None           # the attention residuals' queries (None: layer 0), the MLP's
    mlp_q: Vec | None = None
    rel_clip: Norm | None = None
    v_norm: Norm | None = None


class Inkling2Decoder(InklingDecoder):
    MATRICES = InklingDecoder.MATRICES + ("sink", "k_dyn", "v_dyn")

    def __init__(self, *a, cfg, final_q, **kw):
        super().__init__(*a, **kw)
        self.cfg, self.final_q = cfg, final_q

    def _describe(self, s, scratch) -> None:
        buf, cap, D = scratch.p, scratch.cap, self.arch.hidden_size
        s.embed(self.embed, buf["resid"], D, 1.0, None)
        s.norm(-1, self.embed_norm, buf["resid"], 1, D, buf["resid"])
        for i, L in enumerate(self.layers):
            self.describe_layer(s, scratch, i, L)
        n = len(self.layers)
        s.block_res(n, buf["blocks"], self.cfg.blocks_before(n), cap * D, buf["resid"], self.final_q, 1, D, 1e-6,
                    buf["branch"], cap * D)
        s.copy(n, buf["branch"], D, 0, buf["resid"], D, 0, 1, D)

    def describe_layer(self, s, scratch, i, L, slot=None, kv=None, gates=None) -> None:
        """Layer i (its KV cache slot `kv`, its states' `slot`; `gates(s, role, x)`: the loop's message gates)."""
        buf, cap, D, cfg, n = scratch.p, scratch.cap, self.arch.hidden_size, self.cfg, len(self.layers)
        kv, slot = i if kv is None else kv, n + i if slot is None else slot
        H, KV, hd = L.ink_heads
        nb, full = cfg.blocks_before(i), L.in_norms != ()
        xin = [buf["resid"]] * 3
        if L.attn_q is not None:
            s.block_res(kv, buf["blocks"], nb, cap * D, buf["resid"], L.attn_q, L.attn_q.rows, D, 1e-6, buf["xin"],
                        cap * D)
            xin = [buf["xin"] + j * cap * D if full else buf["xin"] for j in range(3)]
        if gates is not None:
            xin = [gates(s, role, x) for role, x in zip("qkv", xin)]
        apart = full or gates is not None           # q, k, v from inputs of their own (a gated sliding layer too)
        ins = [buf["normed"], buf["nk"], buf["nv"]] if apart else [buf["normed"]] * 3
        for norm, x, y in zip(L.in_norms or (L.attn_norm,) * (3 if apart else 1), xin, ins):
            s.norm(kv, norm, x, 1, D, y)
        s.matmul(kv, [L.q, L.r, L.sink], ins[0], [buf["q"], buf["rel"], buf["sink"]])
        s.matmul(kv, [L.attn_gate], ins[0], [buf["qgate"]])
        for W, dyn, conv, x, y in ((L.k, L.k_dyn, L.k_conv, ins[1], buf["k"]), (L.v, L.v_dyn, L.v_conv, ins[2],
                                                                               buf["v"])):
            s.matmul(kv, [W] + ([dyn] if full else []), x, [y] + ([buf["dyn"]] if full else []))
            s.sconv(kv, conv, slot, y, buf["dyn"] if full else None)
        s.norm(kv, L.q_norm, buf["q"], H, hd, buf["q"])
        s.norm(kv, L.k_norm, buf["k"], KV, hd, buf["k"])
        s.norm(kv, L.v_norm, buf["v"], KV, hd, buf["v"])
        s.norm(kv, L.rel_clip, buf["rel"], H, cfg.d_rel, buf["rel"])
        s.store(kv, buf["q"], buf["k"], buf["v"], H, KV, hd)
        s.rel_attention(kv, L.rel, buf["q"], buf["rel"], buf["sink"], buf["att"])
        s.glu(kv, GLU_ACTIVATIONS["sigmoid"], buf["qgate"], buf["att"], H * hd, buf["att"])
        s.matmul(kv, [L.o], buf["att"], [buf["branch"]])
        s.sconv(kv, L.attn_conv, slot, buf["branch"])
        if cfg.boundary(i):                  # the block's input kept, the sum restarted
            s.copy(kv, buf["resid"], D, 0, buf["blocks"] + nb * cap * D, D, 0, 1, D)
            s.copy(kv, buf["branch"], D, 0, buf["resid"], D, 0, 1, D)
            nb += 1
        else:
            s.axpy(kv, buf["resid"], 1.0, buf["branch"], D)
        s.block_res(kv, buf["blocks"], nb, cap * D, buf["resid"], L.mlp_q, 1, D, 1e-6, buf["xin"], cap * D)
        x = gates(s, "mlp", buf["xin"]) if gates is not None else buf["xin"]
        s.norm(kv, L.mlp_norm, x, 1, D, buf["normed"])
        s.moe(kv, L.moe.c(cap), buf["normed"], buf["branch"])
        s.sconv(kv, L.mlp_conv, slot, buf["branch"])
        s.axpy(kv, buf["resid"], 1.0, buf["branch"], D)

