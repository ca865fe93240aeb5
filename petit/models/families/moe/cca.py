"""ZAYA's attention projection and router (transformers' `zaya`, issue 36 fam36g) on the decoder's hooks.

`Cca` (Layer.mix_qkv): transformers' ZayaCCAProjection. q / k / v are the checkpoint's q_proj, k_proj and
[v_proj_current ; v_proj_delayed] products of the layer's input (with their biases); kernels/fam36g.c's pt_cca_step
then runs, per sequence, the causal depthwise and grouped convolutions over [q | k] with their residual paths, and
moves the delayed half of v one position later. Its state (the last two raw q | k rows, the last delayed values) is
the sequence's: cache slot n_layers + i of a HybridCache beside the layer's KV rows, as Falcon-H1's mixers keep theirs.
At a sequence's first position the convolutions see zeros and the delayed values v_proj_delayed of a zero input
(its bias), as transformers pads them.

`Router` (Layer.pre_moe): ZAYA's router MLP, whose logits the layer's Moe (ext_logits) routes on: r = down_proj x +
b, plus (from layer 1 on) the previous layer's r times router_states_scale; r is kept for the next layer; logits =
out_proj gelu(fc2 gelu(fc1 RMSNorm(r) + b1) + b2), over the experts and the skip expert (Moe.zero_skip). Its
matrices stay float32, as every router's."""
import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.moe import Moe
from petit.models.blocks.plan import fptr
from petit.native import ACTIVATIONS, ffi, lib


class Cca:
    """One layer's CCA: dw [C, 2] / db [C] (the depthwise conv), gw [C, head_dim, 2] / gb [C] (the grouped one),
    v0 [n_kv head_dim / 2] or None, as float32 arrays; its state in cache slot `slot`."""

    def __init__(self, n_heads: int, n_kv: int, head_dim: int, dw, db, gw, gb, v0, slot: int):
        C, self.slot = (n_heads + n_kv) * head_dim, slot
        self.q_w, self.kv_w = n_heads * head_dim, n_kv * head_dim
        self._keep = [np.ascontiguousarray(a, np.float32) for a in (dw, db, gw, gb)]
        self._keep.append(np.zeros(5 * C + self.kv_w // 2, np.float32))
        r = self.rec = ffi.new("pt_cca *")
        r.n_heads, r.n_kv, r.head_dim = n_heads, n_kv, head_dim
        r.dw, r.db, r.gw, r.gb, r.tmp = (fptr(a) for a in self._keep)
        if v0 is not None:
            self._keep.append(np.ascontiguousarray(v0, np.float32))
            r.v0 = fptr(self._keep[-1])

    @classmethod
    def read(cls, t, c: str, n_heads: int, n_kv: int, head_dim: int, v0, slot: int) -> "Cca":
        """From the checkpoint's conv_qk_depthwise [C, 1, 2] and conv_qk_grouped [C, head_dim, 2] under `c`."""
        C = (n_heads + n_kv) * head_dim
        return cls(n_heads, n_kv, head_dim, t.array(c + "conv_qk_depthwise.weight", (C, 1, 2)).reshape(C, 2),
                   t.array(c + "conv_qk_depthwise.bias", (C,)), t.array(c + "conv_qk_grouped.weight", (C, head_dim, 2)),
                   t.array(c + "conv_qk_grouped.bias", (C,)), v0, slot)

    def run(self, i: int, buf, runs, T: int) -> int:
        rc, at = 0, 0
        for n, pos0, cache, _ in runs:
            rc |= lib.pt_cca_step(self.rec, buf["q"] + at * self.q_w, buf["k"] + at * self.kv_w,
                                  buf["v"] + at * self.kv_w, n, pos0, cache.k_ptr[self.slot], cache.v_ptr[self.slot])
            at += n
        return rc

    def plan(self, plan, i: int, buf) -> None:
        plan.cca(i, self.rec, buf["q"], buf["k"], buf["v"], self.slot)


class Router:
    """One layer's router MLP (Weights, Vecs, the norm; `scale` None in layer 0) writing `moe`'s logits; `state`
    holds the buffers every layer's router shares (RouterState)."""

    def __init__(self, down, down_b, scale, norm, fc1, b1, fc2, b2, out, moe, state):
        self.down, self.down_b, self.scale, self.norm = down, down_b, scale, norm
        self.fc1, self.b1, self.fc2, self.b2, self.out, self.moe, self.state = fc1, b1, fc2, b2, out, moe, state
        self.R = down.shape[0]

    def run(self, x, T: int, buf, cap: int) -> int:
        s, R, gelu = self.state.buffers(cap, self.R), self.R, ACTIVATIONS["gelu"]
        rc = lib.pt_matmul(self.down.c, x, T, s["h1"], 0) | lib.pt_bias_act(s["h1"], self.down_b.p, T, R, 0)
        if self.scale is None:                      # layer 0: r is down_proj x
            rc |= lib.pt_copy_rows(s["h1"], R, 0, s["r"], R, 0, T, R)
        else:                                       # the previous layer's r times its scale, plus down_proj x
            rc |= lib.pt_scale_cols(s["r"], self.scale.p, T, R)
            lib.pt_axpy(s["r"], 1.0, s["h1"], T * R)
        rc |= self.norm(s["r"], T, R, s["n"])
        rc |= lib.pt_matmul(self.fc1.c, s["n"], T, s["h1"], 0) | lib.pt_bias_act(s["h1"], self.b1.p, T, R, gelu)
        rc |= lib.pt_matmul(self.fc2.c, s["h1"], T, s["h2"], 0) | lib.pt_bias_act(s["h2"], self.b2.p, T, R, gelu)
        return rc | lib.pt_matmul(self.out.c, s["h2"], T, self.moe.c(cap).logits, 0)

    def plan(self, plan, i: int, x, buf) -> None:
        cap = plan.scratch.cap
        s, R, gelu = self.state.buffers(cap, self.R), self.R, ACTIVATIONS["gelu"]
        plan.matmul(i, [self.down], x, [s["h1"]])
        plan.bias_act(i, s["h1"], self.down_b, R, 0)
        if self.scale is None:
            plan.copy(i, s["h1"], R, 0, s["r"], R, 0, 1, R)
        else:
            plan.scale_cols(i, s["r"], self.scale, R)
            plan.axpy(i, s["r"], 1.0, s["h1"], R)
        plan.norm(i, self.norm, s["r"], 1, R, s["n"])
        plan.matmul(i, [self.fc1], s["n"], [s["h1"]])
        plan.bias_act(i, s["h1"], self.b1, R, gelu)
        plan.matmul(i, [self.fc2], s["h1"], [s["h2"]])
        plan.bias_act(i, s["h2"], self.b2, R, gelu)
        plan.matmul(i, [self.out], s["h2"], [self.moe.c(cap).logits])


def zaya_moe(t, p: str, i: int, E: int, F: int, D: int, R: int, eps: float, state: "RouterState"):
    """Layer i's (Moe, Router) from the checkpoint under `p`: E SwiGLU experts of F and the skip expert, chosen
    (top 1) on the softmax of the router MLP's logits + balancing_biases, the skip expert's at -1 whatever the file
    says (transformers 5.25 sets it so at every load), the chosen probability the weight."""
    g, x, m = p + "mlp.gate.", p + "mlp.experts.", p + "mlp.gate.router_mlp."
    moe = Moe(t.float_weight(m + "out_proj.weight", (E + 1, R)),
              [t.weight(f"{x}{e}.gate_proj.weight", (F, D)) for e in range(E)],
              [t.weight(f"{x}{e}.up_proj.weight", (F, D)) for e in range(E)],
              [t.weight(f"{x}{e}.down_proj.weight", (D, F)) for e in range(E)],
              1, False, sel_bias=t.vec(g + "balancing_biases", (E + 1,)), n_zero=1, zero_skip=True, ext_logits=True)
    moe.sel_bias.a[-1] = -1.0
    router = Router(t.float_weight(g + "down_proj.weight", (R, D)), t.vec(g + "down_proj.bias", (R,)),
                    t.vec(g + "router_states_scale", (R,)) if i else None, norm(t, m + "norm", R, "rms", eps),
                    t.float_weight(m + "fc1.weight", (R, R)), t.vec(m + "fc1.bias", (R,)),
                    t.float_weight(m + "fc2.weight", (R, R)), t.vec(m + "fc2.bias", (R,)), moe.router, moe, state)
    return moe, router


class RouterState:
    """The routers' buffers for steps of up to `cap` tokens: r (carried from layer to layer), n, h1, h2 [cap, R]
    (pointers; made again, larger, when a bigger scratch asks)."""

    def __init__(self):
        self._cap, self._bufs, self._arrays = 0, {}, []

    def buffers(self, cap: int, R: int) -> dict:
        if cap > self._cap:
            self._arrays = [np.zeros((cap, R), np.float32) for _ in range(4)]
            self._bufs = dict(zip(("r", "n", "h1", "h2"), (fptr(a) for a in self._arrays)))
            self._cap = cap
        return self._bufs
