"""What the Inkling families (issue 36, fam36l: `inkling_text`, `inkling2_text`, `inkling2_loop_text`) share: their
attention with a relative bias made from each query's own states (`RelAttn`, kernels/fam36l.c's pt_rel_attention),
their short causal convolutions with a state per sequence (`SConv`, pt_sconv_step), Inkling 2's attention over depth
(pt_block_res), and `InklingDecoder`: the Decoder with the step described once (`_describe`, each family's own) for
both the plan and the per-op path, as Gemma 3n's is.

The cache is a HybridCache: slots 0..n-1 hold each layer's keys and values (sized for the widest layer: the layer
types have their own heads and head_dim), slot n + i layer i's four convolution states, k and v's in its k buffer
([K - 1][2 x the widest kv row]), the attention and MLP outputs' in its v buffer ([K - 1][2 hidden]).
"""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.decoder import Decoder, Layer, Vec
from petit.models.blocks.gemma3n_decoder import Gemma3nDecoder
from petit.models.blocks.plan import fptr
from petit.native import Weight, ffi
from petit.models.families.moe.inkling_ops import _InkOracle, _plan_ops

BIG = 1e30          # a selection bias no routed expert's score reaches: Inkling's shared experts, always chosen


class RelAttn:
    """A layer's pt_relattn: its heads, window, scale, the bank proj [d_rel, extent] and the log scaling (floor 0:
    none)."""

    def __init__(self, heads: tuple, proj: np.ndarray, window: int, scale: float, log_floor: int = 0,
                 log_alpha: float = 0.0):
        self.proj = Vec(proj)
        H, KV, hd = heads
        self.c = ffi.new("pt_relattn *", dict(n_heads=H, n_kv=KV, head_dim=hd, d_rel=proj.shape[0],
                                              extent=proj.shape[1], window=window, scale=scale, log_floor=log_floor,
                                              log_alpha=log_alpha, proj=self.proj.p))


class SConv:
    """A pt_sconv: taps w [C, K] (torch's Conv1d layout), out_scale, `heads` sets of per-token taps (0: none); its
    state in the cache slot's v buffer (in_v) or k buffer, at `off` floats."""

    def __init__(self, w: np.ndarray, in_v: bool, off: int, out_scale: float = 1.0, heads: int = 0):
        self.w = np.ascontiguousarray(w, np.float32)
        self.c = ffi.new("pt_sconv *", dict(channels=w.shape[0], kernel=w.shape[1], w=fptr(self.w),
                                            out_scale=out_scale, heads=heads, in_v=int(in_v), off=off))


def conv_taps(t, name: str, C: int, K: int) -> np.ndarray:
    """A depthwise Conv1d's weight [C, 1, K] as [C, K]."""
    return t.array(name, (C, 1, K)).reshape(C, K)


def part_f32(ckpt, name: str, *index) -> np.ndarray:
    """The part `index` of a checkpoint tensor (an expert's rows of a 3-D tensor) as float32, converting only that
    part: a released model's experts are tens of GB a layer."""
    raw = ckpt.raw(name)[index]
    if ckpt.info(name)[0] == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def expert_parts(ckpt, n: int, parts: dict) -> dict:
    """hf_tensors entries of n experts' matrices: parts {name with "{e}" for the expert: (shape, 3-D source, the
    source's rows of an expert (a slice) or None: all)}. A source not stored as float [n, rows, cols] (the released
    NVFP4 / MXFP8 experts with their scales) is refused by name."""
    for shape, src, _ in parts.values():
        if src not in ckpt:
            continue                         # the builder's own missing-tensor error names it
        dtype, got = ckpt.info(src)
        if dtype not in ("f32", "f16", "bf16") or len(got) != 3 or got[0] != n or got[2] != shape[1]:
            raise ValueError(f"tensor {src!r} is {dtype} {tuple(got)}, expected a float [{n}, rows, {shape[1]}] "
                             f"tensor: experts stored quantized (NVFP4 / MXFP8 with their scales) are not read; use "
                             f"a bf16 / f16 / f32 checkpoint")
    out = {}
    for e in range(n):
        for name, (shape, src, rows) in parts.items():
            index = (e,) if rows is None else (e, rows)
            out[name.format(e=e)] = (shape, lambda src=src, index=index: part_f32(ckpt, src, *index), [src])
    return out


@dataclass
class InkLayer(Layer):
    """A Layer with Inkling's pieces: heads (H, KV, head_dim) of its type, the relative states' matrix r, the
    attention, the four convolutions, the dense MLP's global scale (a Vec [D]: per column, exactly)."""
    ink_heads: tuple = (0, 0, 0)
    r: Weight | None = None
    rel: RelAttn | None = None
    k_conv: SConv | None = None
    v_conv: SConv | None = None
    attn_conv: SConv | None = None
    mlp_conv: SConv | None = None
    mlp_scale: Vec | None = None


class InklingDecoder(Decoder):
    """The Decoder's caches, checks, plan runner and head around a family's `_describe(s, scratch)`; `extra` the
    scratch's buffers beyond _Scratch's, `more` {attribute: tensor name} of matrices beyond a layer's q, k, v, o,
    gate, up, down (what `petit verify` pairs by name: `named`)."""

    MATRICES = ("q", "k", "v", "o", "gate", "up", "down", "attn_gate", "r")
    routing_reach = 0       # the positions after one whose experts flip that read its expert output directly (the
                            # MLP output convolution's kernel - 1: trainer/verify.py leaves them out with it)

    def __init__(self, *a, names: dict, **kw):
        super().__init__(*a, **kw)
        self.names = names              # {(layer, attribute): the file's tensor name} of the other matrices

    def _own(self, L):
        return [getattr(L, n) for n in self.MATRICES if getattr(L, n, None) is not None]

    def matrices(self) -> list[Weight]:
        out = {id(W): W for L in self.layers for W in self._own(L) + (L.moe.matrices() if L.moe else [])}
        out[id(self.lm_head)] = self.lm_head
        return list(out.values())

    def named_matrices(self) -> list:
        layers = getattr(self, "model_layers", self.layers)        # a looped family's: the model's, not its runs
        return [(getattr(layers[i], attr), name) for (i, attr), name in self.names.items()]

    def replace_matrices(self, new: dict) -> None:
        for L in self.layers:
            for n in self.MATRICES:
                W = getattr(L, n, None)
                if W is not None and id(W) in new:
                    setattr(L, n, new[id(W)])
            if L.moe is not None:
                L.moe.replace(new)
        self.embed = new.get(id(self.embed), self.embed)
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        self._plan = None

    # the step is described once (_describe) for both the plan and the per-op path, as Gemma 3n's is
    _build_plan = Gemma3nDecoder._build_plan
    _forward_oracle = Gemma3nDecoder._forward_oracle
    plan_ops, oracle = staticmethod(_plan_ops), _InkOracle
