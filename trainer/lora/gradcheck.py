"""`petit finetune MODEL --check`: every LoRA gradient against float64 central finite differences.

On the model given (meant for a tiny one: tests/fixtures/hf/llama, qwen2, qwen3, or the bundled model), the base is
decoded to float64 (exactly the values its quantized matrices hold), adapters of rank 2 on every target get random
A and B (B away from zero, so A's gradient is not zero), and a random sequence with a partial loss mask is scored.
Every element of every adapter tensor (or, past MAX_ELEMENTS in a tensor, that many chosen at random) is moved by
+-h and the loss difference compared with the analytic gradient:

    rel_err = max_i |analytic_i - numeric_i| / max(max_i |analytic_i|, max_i |numeric_i|)

as trainer/gradcheck.py measures it; a correct backward gives ~1e-9, the bound is REL_ERR_BOUND.

Then the C path that trains is held to those float64 gradients: the forward through the engine's products and the
backward through pt_matmul_t, on the base's values stored as float32 matrices (the engine multiplies a q8_0 / q4_0
matrix by its input rounded to q8 blocks, and a reference cannot follow that rounding without flipping some of it at
its boundaries): the same rel_err, bound F32_BOUND (float32 rounding through the layers: ~1e-5 measured). And
pt_matmul_t on every base matrix as held (quantized: decoded panel by panel) against float64, bound KERNEL_BOUND."""
from __future__ import annotations

import sys

import numpy as np

from trainer.lora.base import TARGETS, FrozenBase
from trainer.lora.model import LoraModel, init_adapters
from trainer.parallel import single_threaded_blas

REL_ERR_BOUND = 1e-5
F32_BOUND = 5e-4
KERNEL_BOUND = 1e-5
STEP = 1e-5
MAX_ELEMENTS = 24
RANK, ALPHA, T = 2, 4.0, 9


def _relative_error(a, n) -> float:
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(n))))
    return 0.0 if scale == 0.0 else float(np.max(np.abs(a - n))) / scale


def problem(model, seed: int = 0):
    """(float64 params, ids, targets, weights) of the check."""
    rng = np.random.default_rng(seed)
    base64 = FrozenBase(model, np.float64)
    params = {n: p.astype(np.float64) for n, p in init_adapters(base64, TARGETS, RANK, seed).items()}
    for name, p in params.items():
        p[...] = rng.normal(0.0, 0.5 if name.endswith("lora_B.weight") else 0.2, p.shape)
    n = min(T, model.context_length - 1)
    ids = rng.integers(0, model.vocab_size, n)
    targets = rng.integers(0, model.vocab_size, n)
    weights = (rng.random(n) < 0.7).astype(np.float64)
    weights[-1] = 1.0
    return base64, params, ids, targets, weights


def check(model, seed: int = 0, max_elements: int = MAX_ELEMENTS) -> tuple[dict, dict, float]:
    """({tensor: rel_err of float64 analytic vs finite differences}, {tensor: rel_err of the float32 C path vs
    float64}, the worst rel_err of pt_matmul_t over the base's matrices as held)."""
    base64, params, ids, targets, weights = problem(model, seed)
    m64 = LoraModel(base64, params, ALPHA, RANK)
    grads = {n: np.zeros_like(p) for n, p in params.items()}
    m64.loss(ids, targets, weights, grads)
    rng = np.random.default_rng(seed + 1)
    fd = {}
    for name, p in params.items():
        flat = p.reshape(-1)
        picks = np.arange(flat.size) if flat.size <= max_elements else rng.choice(flat.size, max_elements, False)
        numeric = np.empty(len(picks))
        for j, i in enumerate(picks):
            old = flat[i]
            flat[i] = old + STEP
            plus = m64.loss(ids, targets, weights)
            flat[i] = old - STEP
            minus = m64.loss(ids, targets, weights)
            flat[i] = old
            numeric[j] = (plus - minus) / (2 * STEP)
        fd[name] = _relative_error(grads[name].reshape(-1)[picks], numeric)
    base32 = FrozenBase(model, np.float32, as_f32=True)
    p32 = {n: p.astype(np.float32) for n, p in params.items()}
    g32 = {n: np.zeros_like(p) for n, p in p32.items()}
    LoraModel(base32, p32, ALPHA, RANK).loss(ids, targets, weights.astype(np.float32), g32)
    f32 = {n: _relative_error(g32[n].astype(np.float64), grads[n]) for n in params}
    held = FrozenBase(model, np.float32)
    kernel = 0.0
    for W in [held.head] + [W for layer in held.layers for W in layer["W"].values()]:
        dy = rng.normal(0, 1, (len(ids), W.shape[0])).astype(np.float32)
        kernel = max(kernel, _relative_error(held.mmt(W, dy).astype(np.float64),
                                             dy.astype(np.float64) @ base64._dense[id(W)]))
    return fd, f32, kernel


def run_check(model, out=None) -> bool:
    """Print the table to `out` (stdout); True when every tensor is within both bounds."""
    out = out or sys.stdout
    with single_threaded_blas():
        fd, f32, kernel = check(model)
    width = max(map(len, fd))
    print(f"LoRA gradient check on {model.path} ({model.weight_type} base decoded to float64; rank {RANK}, every "
          f"target; central differences h={STEP:g}, up to {MAX_ELEMENTS} elements a tensor)", file=out)
    print(f"  {'tensor':<{width}}  {'fd rel_err':>10}  {'f32 rel_err':>11}", file=out)
    for name in fd:
        flag = "ok" if fd[name] < REL_ERR_BOUND and f32[name] < F32_BOUND else "FAIL"
        print(f"  {name:<{width}}  {fd[name]:10.2e}  {f32[name]:11.2e}  {flag}", file=out)
    worst_fd, worst_32 = max(fd.values()), max(f32.values())
    ok = worst_fd < REL_ERR_BOUND and worst_32 < F32_BOUND and kernel < KERNEL_BOUND
    print(f"  max rel_err {worst_fd:.2e} (bound {REL_ERR_BOUND:g}); float32 C path vs float64 {worst_32:.2e} "
          f"(bound {F32_BOUND:g}); pt_matmul_t on the {model.weight_type} matrices vs float64 {kernel:.2e} "
          f"(bound {KERNEL_BOUND:g}): {'PASS' if ok else 'FAIL'}", file=out)
    return ok
