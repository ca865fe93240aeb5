"""TEST-ONLY engine faults, so the tests can show that `petit verify` catches a wrong engine (and no user ever
meets one): `PETIT_TEST_FAULT=NAME` in the environment, read once when a model is built (Decoder.__init__), changes
the prepared model, never the per-token loop, so it costs nothing when unset.

    drop_bias          the value bias of every layer is not added (the first of v, o, up, down, q, k biases the
                       layers have): for families with biases only
    rope_wrong_half    RoPE rotates by -angle, as if rotate_half took the wrong half ([x2, -x1] for [-x2, x1])
    norm_eps_x100      every norm's epsilon x 100
    q_block_scale_x8   the fp16 scale of one q8_0 / q4_0 block x 8 (a tq2 row's float32 scale: BitNet): the first
                       block of the first row of layer 0's MLP output matrix (a Mamba layer's: its mixer's out_proj),
                       in a private copy (the file is not touched)

A fault that does not apply to the model (no bias, no RoPE) is an error, so a test cannot pass by accident; the block
scale fault only exists in a model that runs q8_0 / q4_0 matrices (a load converting them to float reads no scale
in the kernels).
"""
import os

import numpy as np

FAULTS = ("drop_bias", "rope_wrong_half", "norm_eps_x100", "q_block_scale_x8")
_BIASES = ("v_b", "o_b", "up_b", "down_b", "q_b", "k_b")


def active() -> str | None:
    """The fault named by PETIT_TEST_FAULT (None when unset)."""
    name = os.environ.get("PETIT_TEST_FAULT") or None
    if name is not None and name not in FAULTS:
        raise ValueError(f"PETIT_TEST_FAULT={name!r}: choose one of {', '.join(FAULTS)}")
    return name


class _MirroredRope:
    """A Rope whose tables rotate the other way (sin negated)."""

    def __init__(self, rope):
        self.rope, self.dim, self.interleaved = rope, rope.dim, rope.interleaved

    def tables(self, seq_len):
        cos, sin = self.rope.tables(seq_len)
        return cos, -sin


def apply(net) -> None:
    """Apply the active fault (if any) to a Decoder being built."""
    name = active()
    if name is None:
        return
    layers = net.layers
    if name == "drop_bias":
        # the first kind of bias a layer has (Lara's first layer is linear attention, without one)
        kind = next((b for L in layers for b in _BIASES if getattr(L, b) is not None), None)
        if kind is None:
            raise ValueError("PETIT_TEST_FAULT=drop_bias: this model has no bias to drop")
        for L in layers:
            setattr(L, kind, None)
    elif name == "rope_wrong_half":
        mirrored = {}
        # issue 30, the hybrid group: Zamba's shared blocks hold their attention in a Layer of their own
        for L in layers + [L.shared.block.attn for L in layers if getattr(L, "shared", None) is not None]:
            if L.rope is not None:
                L.rope = mirrored.setdefault(id(L.rope), _MirroredRope(L.rope))
        if not mirrored:
            raise ValueError("PETIT_TEST_FAULT=rope_wrong_half: this model has no RoPE")
    elif name == "norm_eps_x100":
        layers = layers + [L.shared.block.attn for L in layers if getattr(L, "shared", None) is not None]
        head = getattr(net, "head_dense", None)     # issue 36, fam36j: ModernBERT's prediction head norm
        norms = [net.final_norm, net.embed_norm, head and head.norm] + [
            n for L in layers for n in (L.attn_norm, L.mlp_norm, L.post_attn_norm, L.post_mlp_norm, L.q_norm,
                                        L.k_norm, L.o_norm, L.down_norm, L.resid_attn_norm, L.resid_mlp_norm)]
        norms += getattr(net, "own_norms", list)()      # issue 36, the q4exp group: a decoder's norms of its own
        for n in {id(n): n for n in norms if n is not None}.values():
            n.eps *= 100
    else:
        from petit.native import Weight
        moe, mixer = layers[0].moe, layers[0].mamba
        # an MoE layer: its first expert's down matrix; a Mamba layer: its mixer's out_proj
        W = mixer.out_proj if mixer is not None else layers[0].down if moe is None else moe.down[0]
        if W.dtype not in ("q8_0", "q4_0", "tq2"):   # a load that dequantizes the matrices reads no block scale
            return
        raw = np.array(W.raw, np.uint8).reshape(-1)
        if W.dtype == "tq2":                     # a ternary row's one float32 scale (BitNet)
            raw[:4].view("<f4")[0] *= np.float32(8)
        else:
            d = raw[:2].view("<f2")
            d[0] = np.float16(d[0] * np.float16(8))
        if mixer is not None:
            mixer.replace({id(W): Weight(raw, W.dtype, W.shape)})
        elif moe is None:
            layers[0].down = Weight(raw, W.dtype, W.shape)
        else:
            moe.replace({id(W): Weight(raw, W.dtype, W.shape)})
