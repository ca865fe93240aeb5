"""Zamba's shared transformer blocks (issue 30, the hybrid group): a block's weights are held once and each layer
that uses it holds a `SharedUse` pointing at it, with what is the use's own (Zamba2's LoRA-like adapters, the linear
that maps the block's output into the layer). The decoder runs a use before the layer's mixer (Decoder._shared and
_plan_shared): [resid | embeddings] -> RMSNorm -> attention (q, k, v += B A x per use) -> o_proj -> RMSNorm -> gated
MLP (gate | up += B A y per use) -> down -> linear; the result plus resid is the mixer's pre-norm input. The plan
points every use at the same weights: nothing is copied per use."""
from dataclasses import dataclass

from petit.native import Weight


@dataclass
class SharedBlock:
    """The shared weights: `attn` is a decoder Layer holding attn_norm (over 2 x hidden), q / k / v / o, rope,
    window, mlp_norm (pre_ff_layernorm) and gate / up / down."""
    attn: object

    def matrices(self) -> list:
        a = self.attn
        return [a.q, a.k, a.v, a.o, a.gate, a.up, a.down]

    def replace(self, new: dict) -> None:
        for n in ("q", "k", "v", "o", "gate", "up", "down"):
            W = getattr(self.attn, n)
            setattr(self.attn, n, new.get(id(W), W))


@dataclass
class SharedUse:
    """One layer's use of a SharedBlock: its output linear [D, D] and its adapters (None: none): A [r, 2D] and
    B [width, r] for q, k and v; A [r, D] for the MLP's input with B's gate rows and up rows."""
    block: SharedBlock
    linear: Weight
    q_a: Weight | None = None
    q_b: Weight | None = None
    k_a: Weight | None = None
    k_b: Weight | None = None
    v_a: Weight | None = None
    v_b: Weight | None = None
    mlp_a: Weight | None = None
    gate_b: Weight | None = None
    up_b: Weight | None = None

    _OWN = ("linear", "q_a", "q_b", "k_a", "k_b", "v_a", "v_b", "mlp_a", "gate_b", "up_b")

    def attn_adapters(self) -> list:
        """(A, B, buffer name) of each attention adapter."""
        return [(getattr(self, n + "_a"), getattr(self, n + "_b"), n) for n in ("q", "k", "v")
                if getattr(self, n + "_a") is not None]

    def matrices(self) -> list:
        return self.block.matrices() + [W for W in (getattr(self, n) for n in self._OWN) if W is not None]

    def replace(self, new: dict) -> None:
        self.block.replace(new)
        for n in self._OWN:
            W = getattr(self, n)
            if W is not None:
                setattr(self, n, new.get(id(W), W))
