"""The frozen base a LoRA trains on: a loaded petit Model's weights as they are held (f32, q8_0, q4_0 ...), read
through the engine's C kernels (`matmul` forward, `matmul_t` backward, both releasing the GIL), or, for the gradient
check, the same weights decoded to float64 (exactly the values the quantized matrices hold).

Only the dense Llama-like families whose blocks are pre-norm RMSNorm, grouped-query attention with RoPE (optional
q/k/v/o biases, optional per-head q/k norms, optional sliding window) and a SwiGLU MLP are taken; anything else is
refused with what it has that this trainer does not run."""
from __future__ import annotations

import numpy as np

from petit.native import Weight, get_rows, matmul, matmul_t
from trainer.lora import TARGETS

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
BASE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k")    # whose backward is tested
# target -> the Hugging Face module name inside a layer (PEFT's and the adapter file's)
MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
           "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


def check_supported(model) -> None:
    """Raise ValueError naming why `model` cannot be fine-tuned here (its family, or a feature of its blocks)."""
    mt = getattr(model.config, "model_type", None)
    if mt not in FAMILIES:
        raise ValueError(f"fine-tuning runs on {', '.join(FAMILIES)} models for now, not {mt!r}")
    net, a = model.net, model.net.arch
    problems = []
    if a.act != "silu" or a.parallel or a.attn_softcap or a.logit_softcap or a.residual_scale != 1.0:
        problems.append("a non-standard block (activation, parallel block, soft-cap or residual scale)")
    if net.lm_head_b is not None or net.pos_embed is not None or net.embed_norm is not None:
        problems.append("a head bias, learned positions or an embedding norm")
    if net.final_norm is None or net.final_norm.kind != "rms":
        problems.append("a final norm that is not RMSNorm")
    for i, L in enumerate(net.layers):
        if any(getattr(L, n) is None for n in TARGETS) or L.moe is not None or L.mla is not None \
                or L.mamba is not None or L.shared is not None:
            problems.append(f"layer {i} is not a dense attention + SwiGLU block")
        elif (L.post_attn_norm or L.post_mlp_norm or L.o_norm or L.down_norm or L.resid_attn_norm
              or L.resid_mlp_norm or L.mixer_norm or L.sinks or L.alibi or L.attn_gate or L.moa_router) is not None:
            problems.append(f"layer {i} has norms or attention features this trainer does not run")
        elif L.chunk or L.temperature or L.clip or L.norm_after_rope or L.rope is None or L.gate_b or L.up_b \
                or L.down_b or L.resid_alpha != (1.0, 1.0) or L.attn_norm is None or L.mlp_norm is None:
            problems.append(f"layer {i} has a feature this trainer does not run")
        elif L.attn_norm.kind != "rms" or L.mlp_norm.kind != "rms" or L.attn_norm.b or L.mlp_norm.b:
            problems.append(f"layer {i} has LayerNorms")
        if problems:
            break
    if problems:
        raise ValueError(f"this {mt} model cannot be fine-tuned: {problems[0]}")
    other = sorted({W.dtype for L in net.layers for W in (getattr(L, t) for t in TARGETS)} - set(BASE_TYPES))
    if other:
        raise ValueError(f"fine-tuning runs on {', '.join(BASE_TYPES)} bases for now, this one holds "
                         f"{', '.join(other)} matrices: load it with --weights q8_0 (or q4_0, f32)")


def _vec(v, dtype):
    return None if v is None else np.asarray(v.a, dtype).reshape(-1)


class FrozenBase:
    """The base's weights and the two products the LoRA forward / backward needs.

    dtype float32: the matrices as loaded, multiplied by the C kernels. dtype float64: each matrix decoded once to
    float64 (the gradient check's reference arithmetic, on exactly the values the quantized base holds).
    as_f32: the matrices re-stored as float32 matrices of the same values (the gradient check runs the C path so:
    the engine multiplies a q8_0 / q4_0 matrix by its input rounded to q8 blocks, which training keeps, and which
    a float64 reference cannot follow without its roundings flipping at their boundaries)."""

    def __init__(self, model, dtype=np.float32, as_f32: bool = False):
        check_supported(model)
        net, a = model.net, model.net.arch
        self.model, self.dtype = model, np.dtype(dtype)
        self.D, self.H, self.KV, self.hd = a.hidden_size, a.num_attention_heads, a.num_key_value_heads, a.head_dim
        self.vocab = a.vocab_size
        self.scale = a.attn_scale if a.attn_scale is not None else a.head_dim ** -0.5
        self.embed_scale, self.logit_scale = a.embed_scale, a.logit_scale
        self.per_head_qk = a.qk_norm_per_head
        self.embed, self.head = net.embed, net.lm_head
        self.final = (_vec(net.final_norm.w, dtype), net.final_norm.eps)
        self.layers = []
        for L in net.layers:
            norm = lambda n: None if n is None else (_vec(n.w, dtype), n.eps)     # noqa: E731
            self.layers.append({
                "W": {t: getattr(L, t) for t in TARGETS},
                "b": {t: _vec(getattr(L, t + "_b"), dtype) for t in ("q", "k", "v", "o")},
                "norm1": norm(L.attn_norm), "norm2": norm(L.mlp_norm), "q_norm": norm(L.q_norm),
                "k_norm": norm(L.k_norm), "rope": L.rope, "window": int(L.window)})
        if as_f32:
            copies: dict = {}
            f32 = lambda W: copies.setdefault(id(W), Weight.from_float(W.dequantize(), "f32"))   # noqa: E731
            self.head = f32(self.head)
            for layer in self.layers:
                layer["W"] = {t: f32(W) for t, W in layer["W"].items()}
        self._dense = {}
        if self.dtype == np.float64:
            for W in [self.head] + [W for layer in self.layers for W in layer["W"].values()]:
                self._dense.setdefault(id(W), W.dequantize().astype(np.float64))

    def in_out(self, layer: int, target: str) -> tuple[int, int]:
        """(in_features, out_features) of a target matrix."""
        rows, cols = self.layers[layer]["W"][target].shape
        return cols, rows

    def mm(self, W, x: np.ndarray) -> np.ndarray:
        """x [T, cols] -> x W^T [T, rows]."""
        if self.dtype == np.float64:
            return x @ self._dense[id(W)].T
        return matmul(W, np.ascontiguousarray(x, np.float32))

    def mmt(self, W, dy: np.ndarray) -> np.ndarray:
        """dy [T, rows] -> dy W [T, cols] (the backward of mm through the frozen W)."""
        if self.dtype == np.float64:
            return dy @ self._dense[id(W)]
        return matmul_t(W, np.ascontiguousarray(dy, np.float32))

    def embed_rows(self, ids) -> np.ndarray:
        x = get_rows(self.embed, ids).astype(self.dtype)
        if self.embed_scale != 1.0:
            x *= self.dtype.type(self.embed_scale)
        return x

    def rope_tables(self, layer: int, T: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
        """cos, sin [T, rot_dim/2] in this dtype, rot_dim, interleaved (pairs) or halves."""
        rope = self.layers[layer]["rope"]
        cos, sin = rope.tables(T)
        return cos[:T].astype(self.dtype), sin[:T].astype(self.dtype), rope.dim, bool(rope.interleaved)
