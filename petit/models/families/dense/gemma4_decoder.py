"""Gemma 4's text decoder (the family and what it computes: gemma4_text.py), on Gemma 3n's: per-layer attention
shapes, K = V layers, routed experts beside the MLP, per-layer inputs and the layer scalar, described once for the plan
and the per-op path."""
from dataclasses import dataclass

from petit.models.blocks.decoder import Decoder, Layer, Norm
from petit.models.blocks.gemma3n_decoder import Gemma3nDecoder, _G3nScratch
from petit.native import ACTIVATIONS, Weight


@dataclass
class Gemma4Layer(Layer):
    v_norm: Norm | None = None
    k_eq_v: bool = False                # the values are the keys before their norm
    heads: tuple = (0, 0)               # (head_dim, key-value heads)
    ple_gate: Weight | None = None
    ple_proj: Weight | None = None
    ple_norm: Norm | None = None
    kv_source: int = 0
    scalar: float = 1.0
    mlp_out_norm: Norm | None = None    # post_feedforward_layernorm_1 (with experts)
    moe_in_norm: Norm | None = None     # pre_feedforward_layernorm_2
    moe_out_norm: Norm | None = None    # post_feedforward_layernorm_2


_LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down", "ple_gate", "ple_proj")


class Gemma4Decoder(Decoder):
    """The Gemma 4 forward (see the module docstring), described once for the plan and the per-op path."""

    def __init__(self, arch, embed, layers, final_norm, lm_head, *, ple_table, ple_model_proj, ple_norm, ple_width,
                 ple_scales):
        super().__init__(arch, embed, layers, final_norm, lm_head)
        self.ple_table, self.ple_model_proj, self.ple_norm = ple_table, ple_model_proj, ple_norm
        self.ple_width, self.ple_scales = ple_width, ple_scales

    def matrices(self) -> list[Weight]:
        out = {id(W): W for L in self.layers for W in (getattr(L, n) for n in _LAYER_MATRICES) if W is not None}
        out.update((id(W), W) for L in self.layers if L.moe for W in L.moe.matrices())
        for W in (self.ple_model_proj, self.lm_head):
            if W is not None:
                out[id(W)] = W
        return list(out.values())

    def named_matrices(self) -> list:
        """(Weight, tensor name) beyond a layer's q, k, v, o, gate, up, down (trainer/verify.py's matrix check)."""
        out = [] if self.ple_model_proj is None else [(self.ple_model_proj, "model.per_layer_model_projection.weight")]
        for i, L in enumerate(self.layers):
            if L.ple_gate is not None:
                p = f"model.layers.{i}."
                out += [(L.ple_gate, p + "per_layer_input_gate.weight"),
                        (L.ple_proj, p + "per_layer_projection.weight")]
        return out

    def replace_matrices(self, new: dict) -> None:
        for L in self.layers:
            for n in _LAYER_MATRICES:
                W = getattr(L, n)
                if W is not None and id(W) in new:
                    setattr(L, n, new[id(W)])
            if L.moe is not None:
                L.moe.replace(new)
        if self.ple_model_proj is not None:
            self.ple_model_proj = new.get(id(self.ple_model_proj), self.ple_model_proj)
        if id(self.embed) in new:
            self.embed = new[id(self.embed)]
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        self._plan = None

    def scratch(self, T: int):
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _G3nScratch(self.arch, max(T, 16), 1, len(self.layers), max(self.ple_width, 1), 1)
        return self._scratch

    # the step is described once (_describe) for both the plan and the per-op oracle, as Gemma 3n's is
    _build_plan = Gemma3nDecoder._build_plan
    _forward_oracle = Gemma3nDecoder._forward_oracle
    plan_ops, oracle = staticmethod(Gemma3nDecoder.plan_ops), Gemma3nDecoder.oracle

    def _describe(self, s, scratch) -> None:
        arch, buf, cap = self.arch, scratch.p, scratch.cap
        D, H = arch.hidden_size, arch.num_attention_heads
        L_n, P = len(self.layers), self.ple_width
        act = ACTIVATIONS[arch.act]
        s.embed(self.embed, buf["resid"], D, arch.embed_scale, None)
        if P:
            s.matmul(-1, [self.ple_model_proj], buf["resid"], [buf["ple_proj"]])
            s.ple(-1, self.ple_table, buf["ple_proj"], L_n, P, self.ple_norm, *self.ple_scales, buf["ple_row"],
                  buf["ple"], cap * P)
        for i, layer in enumerate(self.layers):
            hd, KV = layer.heads
            F = layer.up.shape[0]
            s.norm(i, layer.attn_norm, buf["resid"], 1, D, buf["normed"])
            if layer.kv_source == i:
                if layer.k_eq_v:
                    s.matmul(i, [layer.q, layer.k], buf["normed"], [buf["q"], buf["k"]])
                    s.copy(i, buf["k"], KV * hd, 0, buf["v"], KV * hd, 0, 1, KV * hd)
                else:
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
            s.norm(i, layer.mlp_norm, buf["resid"], 1, D, buf["normed"])
            s.matmul(i, [layer.gate, layer.up], buf["normed"], [buf["gate"], buf["up"]])
            s.glu(i, act, buf["gate"], buf["up"], F, buf["mlp_hidden"])
            s.matmul(i, [layer.down], buf["mlp_hidden"], [buf["branch"]])
            if layer.moe is not None:               # the experts beside the MLP, on the block's input
                s.norm(i, layer.mlp_out_norm, buf["branch"], 1, D, buf["branch"])
                s.norm(i, layer.moe_in_norm, buf["resid"], 1, D, buf["normed_mlp"])
                s.moe(i, layer.moe.c(cap), buf["normed_mlp"], buf["laurel"])
                s.norm(i, layer.moe_out_norm, buf["laurel"], 1, D, buf["laurel"])
                s.axpy(i, buf["branch"], 1.0, buf["laurel"], D)
            s.norm(i, layer.post_mlp_norm, buf["branch"], 1, D, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            if P:
                s.matmul(i, [layer.ple_gate], buf["resid"], [buf["ple_gate"]])
                s.glu(i, act, buf["ple_gate"], buf["ple"] + i * cap * P, P, buf["ple_gate"])
                s.matmul(i, [layer.ple_proj], buf["ple_gate"], [buf["branch"]])
                s.norm(i, layer.ple_norm, buf["branch"], 1, D, buf["branch"])
                s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            if layer.scalar != 1.0:
                s.rows(i, 4, buf["resid"], None, D, layer.scalar)
