"""Finite-difference check of the analytic gradients (float64, central differences).

Every element of every parameter tensor of a tiny model is perturbed by ±h and the loss difference is
compared with the gradient from :func:`trainer.model.loss_and_grads`. The error reported per tensor is

    rel_err = max_i |analytic_i - numeric_i| / max(max_i |analytic_i|, max_i |numeric_i|)

i.e. the worst elementwise difference relative to the tensor's gradient scale (an elementwise ratio
would blow up on entries whose true gradient is ~0). In float64 with h = 1e-5 a correct backward gives
rel_err ~1e-9; the bound asserted by the tests and by ``petit train --check`` is ``REL_ERR_BOUND = 1e-5``.
"""

from __future__ import annotations

import numpy as np

from trainer.model import init_params, loss_and_grads, loss_only, make_config

REL_ERR_BOUND = 1e-5  # pass/fail threshold on rel_err for every tensor
STEP = 1e-5  # finite-difference step h

# The tiny config of the check: every code path (GQA with 2 query heads per kv head, 2 layers, RoPE on
# head_dim 4, SwiGLU, loss mask) at a size where all ~1,300 elements can be perturbed in about a second.
TINY = dict(vocab_size=11, hidden_size=8, intermediate_size=12, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=4, max_position_embeddings=8)
TINY_B, TINY_T = 2, 5


def numerical_grad(f, x, h=STEP):
    """Central-difference gradient of the scalar function f() with respect to array x (changed in place,
    restored afterwards)."""
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        plus = f()
        flat[i] = old - h
        minus = f()
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * h)
    return grad


def relative_error(analytic, numeric) -> float:
    """max |a - n| / max(max |a|, max |n|); 0.0 when both are all zero."""
    scale = max(float(np.max(np.abs(analytic))), float(np.max(np.abs(numeric))))
    if scale == 0.0:
        return 0.0
    return float(np.max(np.abs(analytic - numeric))) / scale


def tiny_problem(tied: bool, seed: int = 0):
    """Return (params, config, ids, targets, mask) for the check, all float64.

    Weights are drawn larger than the training init (std 0.5) and norm weights are perturbed away from 1,
    so attention is far from uniform and every term of every gradient is exercised; a quarter of the
    loss mask is zero so the masked path is checked too.
    """
    config = make_config(tie_word_embeddings=tied, **TINY)
    rng = np.random.default_rng(seed)
    params = init_params(config, seed, dtype=np.float64)
    for name, p in params.items():
        if p.ndim == 1:
            p += rng.normal(0.0, 0.2, p.shape)
        else:
            p[...] = rng.normal(0.0, 0.5, p.shape)
    ids = rng.integers(0, config["vocab_size"], size=(TINY_B, TINY_T))
    targets = rng.integers(0, config["vocab_size"], size=(TINY_B, TINY_T))
    mask = (rng.random((TINY_B, TINY_T)) < 0.75).astype(np.float64)
    mask[0, 0] = 1.0
    return params, config, ids, targets, mask


def check_gradients(tied: bool = True, seed: int = 0, names=None) -> dict[str, float]:
    """Gradient-check every parameter tensor of the tiny model (or only ``names``);
    return {tensor name: rel_err}."""
    params, config, ids, targets, mask = tiny_problem(tied, seed)
    _, grads = loss_and_grads(params, config, ids, targets, mask)
    errors = {}
    for name, p in params.items():
        if names is not None and name not in names:
            continue
        numeric = numerical_grad(lambda: loss_only(params, config, ids, targets, mask), p)
        errors[name] = relative_error(grads[name], numeric)
    return errors


def run_check(out=None) -> bool:
    """Run the check on the tied and untied tiny models, print a table to ``out`` (default stdout),
    and return True if every tensor is within REL_ERR_BOUND."""
    import sys

    out = out or sys.stdout
    ok = True
    for tied in (True, False):
        errors = check_gradients(tied=tied)
        worst = max(errors.values())
        passed = worst < REL_ERR_BOUND
        ok &= passed
        print(f"gradient check ({'tied' if tied else 'untied'} embeddings, float64, central differences, "
              f"h={STEP:g}), bound {REL_ERR_BOUND:g}", file=out)
        width = max(map(len, errors))
        for name, err in errors.items():
            print(f"  {name:<{width}}  {err:.2e}  {'ok' if err < REL_ERR_BOUND else 'FAIL'}", file=out)
        print(f"  max rel_err {worst:.2e}: {'PASS' if passed else 'FAIL'}", file=out)
    print("PASS" if ok else "FAIL", file=out)
    return ok
