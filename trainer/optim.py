"""AdamW, the learning-rate schedule and global-norm gradient clipping."""

from __future__ import annotations

import math

import numpy as np


def get_lr(step: int, *, lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate for a 0-based step: linear warmup, then cosine decay to min_lr.

    1) step < warmup_steps: lr * (step + 1) / warmup_steps, rising linearly to lr;
    2) warmup_steps <= step < total_steps: cosine from lr (at warmup_steps) down towards min_lr;
    3) step >= total_steps: min_lr (only reached if training is extended past the planned steps).
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * progress))  # 1 -> 0
    return min_lr + coeff * (lr - min_lr)


def clip_grad_norm(grads: dict, max_norm: float) -> float:
    """Scale all gradients in place so their global L2 norm is at most max_norm (<= 0 disables).

    Returns the norm before clipping (accumulated in float64, in the fixed order of the dict).
    """
    total = 0.0
    for g in grads.values():
        total += float(np.dot(g.reshape(-1).astype(np.float64, copy=False), g.reshape(-1)))
    norm = math.sqrt(total)
    if max_norm > 0 and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for g in grads.values():
            g *= g.dtype.type(scale)
    return norm


class AdamW:
    """AdamW with decoupled weight decay, applied only to tensors with 2 or more dimensions (weight
    matrices and the embedding); norm weights are never decayed (nanoGPT's ``configure_optimizers``).

    The moments live in the dtype of the parameters. ``state_dict``/``load_state_dict`` round-trip them
    exactly, so a resumed run continues bit for bit.

    Args:
        params: name -> array; updated in place by :meth:`step`.
        betas: (beta1, beta2) decay rates of the first and second moments.
        eps: Added to the root of the second moment.
        weight_decay: Decoupled decay coefficient (multiplied by the learning rate).
    """

    def __init__(self, params: dict, *, betas=(0.9, 0.95), eps: float = 1e-8, weight_decay: float = 0.1):
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.t = 0  # number of updates done
        self.m = {n: np.zeros_like(p) for n, p in params.items()}
        self.v = {n: np.zeros_like(p) for n, p in params.items()}

    def step(self, params: dict, grads: dict, lr: float) -> None:
        """One update of every parameter in place."""
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        bc1 = 1.0 - b1 ** self.t  # bias corrections
        bc2 = 1.0 - b2 ** self.t
        step_size = lr / bc1
        for name, p in params.items():
            g, m, v = grads[name], self.m[name], self.v[name]
            dt = p.dtype.type
            m *= dt(b1)
            m += dt(1.0 - b1) * g
            v *= dt(b2)
            v += dt(1.0 - b2) * (g * g)
            if p.ndim >= 2 and self.weight_decay:
                p *= dt(1.0 - lr * self.weight_decay)
            denom = np.sqrt(v)
            denom /= dt(math.sqrt(bc2))
            denom += dt(self.eps)
            p -= dt(step_size) * (m / denom)

    def state_dict(self) -> dict:
        """{"t": int, "m": {name: array}, "v": {name: array}} (the arrays themselves, not copies)."""
        return {"t": self.t, "m": self.m, "v": self.v}

    def load_state_dict(self, state: dict) -> None:
        """Restore moments and step count; raises ValueError if names or shapes differ."""
        for key in ("m", "v"):
            theirs = state[key]
            if set(theirs) != set(self.m):
                raise ValueError(f"optimizer state '{key}' has tensors {sorted(set(theirs) ^ set(self.m))} "
                                 f"that do not match the model")
            for name, arr in theirs.items():
                if arr.shape != self.m[name].shape:
                    raise ValueError(f"optimizer state '{key}/{name}' has shape {arr.shape}, "
                                     f"the parameter has {self.m[name].shape}")
        self.t = int(state["t"])
        self.m = {n: np.array(state["m"][n], dtype=self.m[n].dtype) for n in self.m}
        self.v = {n: np.array(state["v"][n], dtype=self.v[n].dtype) for n in self.v}
