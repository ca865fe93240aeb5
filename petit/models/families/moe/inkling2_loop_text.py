"""Inkling 2 with looped layers (Thinking Machines, `inkling2_loop_text`; Inkling2LoopForCausalLM), as transformers
5.25's modeling_inkling2_loop.py computes it: Inkling 2's layers (petit/models/families/moe/inkling2_text.py, the
released layout), layers loop_layer_index_start .. loop_layer_index_end - 1 run loop_num_passes times, unrolled here
(each pass its own keys, values and convolution states, as transformers gives each pass its own cache layers).

- Each pass starts from the loop's input: the hidden state and the block states before its first layer.
- In the passes after the first, loop layer j takes four messages (q, k, v, mlp): its four learned queries'
  attention over depth (pt_block_res) over the previous pass's block states after its first, and that pass's output;
  each is mixed into the attention input of its role (after the attention residuals, before the input norms; a
  sliding layer's q, k and v inputs then differ) and into the MLP input (before post_attention_layernorm) by a gate:
  (1 - tanh(forget g)) x + tanh(gain g) m, g = down [RMS(x), RMS(m)] (unweighted RMS; the released checkpoints'
  controllers.{attn, k, v, mlp}.{down, forget, gain}_weight, forget and gain float32).
- The message queries are the checkpoints' middle_cycle_cross_pass_queries (q and mlp of each loop layer) and
  middle_cycle_cross_pass_kv_queries (k and v), transformers' message_input.query [loop layers, 4, hidden].
"""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.decoder import Norm, Vec
from petit.models.families.moe.inkling2_block import Inkling2Decoder
from petit.models.families.moe.inkling2_weights import M, build_decoder
from petit.models.families.moe.inkling2_text import hf_tensors
from petit.models.families.moe.inkling2_config import Inkling2LoopTextConfig
from petit.native import Weight

ROLES = {"q": "attn", "k": "k", "v": "v", "mlp": "mlp"}     # the message's role -> the checkpoint's controller


@dataclass
class Gate:
    down: Weight
    forget: Weight
    gain: Weight
    norm: Norm


class Inkling2LoopDecoder(Inkling2Decoder):
    """The runs of cfg.runs() (self.layers: a looped layer once a pass), messages and gates in the later passes."""

    def __init__(self, *a, gates, msg_q, **kw):
        super().__init__(*a, **kw)
        self.gates, self.msg_q = gates, msg_q          # {layer: {role: Gate}}, [loop layer] Vec [4, D]

    def matrices(self) -> list[Weight]:
        out = {id(W): W for W in super().matrices()}
        out.update((id(W), W) for g in self.gates.values() for G in g.values() for W in (G.down, G.forget, G.gain))
        return list(out.values())

    def replace_matrices(self, new: dict) -> None:
        super().replace_matrices(new)
        for g in self.gates.values():
            for G in g.values():
                G.down, G.forget, G.gain = (new.get(id(W), W) for W in (G.down, G.forget, G.gain))

    def named_matrices(self) -> list:
        out = super().named_matrices()
        for i, g in self.gates.items():
            for role, G in g.items():
                c = f"{M}layers.{i}.controllers.{ROLES[role]}."
                out += [(G.down, c + "down_weight"), (G.forget, c + "forget_weight"), (G.gain, c + "gain_weight")]
        return out

    def _describe(self, s, scratch) -> None:
        cfg, buf, cap, D = self.cfg, scratch.p, scratch.cap, self.arch.hidden_size
        start, n, N = cfg.loop_layer_index_start, cfg.num_hidden_layers, len(self.layers)
        first = cfg.blocks_before(start)                    # the block states before the loop
        appended = cfg.blocks_before(cfg.loop_layer_index_end) - first
        s.embed(self.embed, buf["resid"], D, 1.0, None)
        s.norm(-1, self.embed_norm, buf["resid"], 1, D, buf["resid"])
        for u, ((i, p), L) in enumerate(zip(cfg.runs(), self.layers)):
            gates = None
            if i == start and p == 0:                       # the loop's input, each pass's start
                s.copy(u, buf["resid"], D, 0, buf["pre"], D, 0, 1, D)
            elif i == start:                                # the previous pass's states; the loop's input again
                for j in range(appended - 1):
                    s.copy(u, buf["blocks"] + (first + 1 + j) * cap * D, D, 0, buf["prev"] + j * cap * D, D, 0, 1, D)
                s.copy(u, buf["resid"], D, 0, buf["prevh"], D, 0, 1, D)
                s.copy(u, buf["pre"], D, 0, buf["resid"], D, 0, 1, D)
            if p > 0:
                s.block_res(u, buf["prev"], appended - 1, cap * D, buf["prevh"], self.msg_q[i - start], 4, D, 1e-6,
                            buf["msg"], cap * D)
                gates = self._gates(i, u, buf, cap, D)
            self.describe_layer(s, scratch, i, L, slot=N + u, kv=u, gates=gates)
        s.block_res(N, buf["blocks"], cfg.blocks_before(n), cap * D, buf["resid"], self.final_q, 1, D, 1e-6,
                    buf["branch"], cap * D)
        s.copy(N, buf["branch"], D, 0, buf["resid"], D, 0, 1, D)

    def _gates(self, i, u, buf, cap, D):
        """describe_layer's hook: the role's input x gated with its message into a buffer of its own."""
        out = {"q": buf["gq"], "k": buf["gk"], "v": buf["gv"], "mlp": buf["gq"]}

        def gate(s, role, x):
            G, m, y = self.gates[i][role], buf["msg"] + "qkvm".index(role[0]) * cap * D, out[role]
            s.norm(u, G.norm, x, 1, D, buf["ga"])
            s.norm(u, G.norm, m, 1, D, buf["gb"])
            s.copy(u, buf["ga"], D, 0, buf["cat"], 2 * D, 0, 1, D)
            s.copy(u, buf["gb"], D, 0, buf["cat"], 2 * D, D, 1, D)
            s.matmul(u, [G.down], buf["cat"], [buf["gvec"]])
            s.matmul(u, [G.forget, G.gain], buf["gvec"], [buf["gf"], buf["gg"]])
            for g, v in ((buf["gf"], x), (buf["gg"], m)):
                s.param_act(u, 2, g, D, ())                 # tanh
                s.glu(u, 0, g, v, D, g)                     # times x, times m
            s.copy(u, x, D, 0, y, D, 0, 1, D)
            s.axpy(u, y, -1.0, buf["gf"], D)
            s.axpy(u, y, 1.0, buf["gg"], D)
            return y
        return gate


def build(cfg: Inkling2LoopTextConfig, t):
    s, e, D, R = cfg.loop_layer_index_start, cfg.loop_layer_index_end, cfg.hidden_size, cfg.loop_gate_rank
    runs = cfg.runs()
    N = len(runs)
    gates = {i: {role: Gate(t.weight(f"{M}layers.{i}.controllers.{c}.down_weight", (R, 2 * D)),
                            t.float_weight(f"{M}layers.{i}.controllers.{c}.forget_weight", (D, R)),
                            t.float_weight(f"{M}layers.{i}.controllers.{c}.gain_weight", (D, R)),
                            Norm("rms", cfg.rms_norm_eps)) for role, c in ROLES.items()} for i in range(s, e)}
    qm = t.array(M + "middle_cycle_cross_pass_queries", (2 * (e - s), D))
    kv = t.array(M + "middle_cycle_cross_pass_kv_queries", (2 * (e - s), D))
    msg_q = [Vec(np.stack([qm[2 * j], kv[2 * j], kv[2 * j + 1], qm[2 * j + 1]])) for j in range(e - s)]
    dec = build_decoder(cfg, t, Inkling2LoopDecoder, runs=runs, gates=gates, msg_q=msg_q,
                        arch={"state_layers": tuple(range(N, 2 * N)), "cache_slots": 2 * N})
    appended = cfg.blocks_before(e) - cfg.blocks_before(s)
    dec.extra.update({"pre": D, "prev": max(appended - 1, 1) * D, "prevh": D, "msg": 4 * D, "gq": D, "gk": D, "gv": D,
                      "ga": D, "gb": D, "cat": 2 * D, "gvec": R, "gf": D, "gg": D})
    return dec


Config = Inkling2LoopTextConfig
hf_tensors = hf_tensors
