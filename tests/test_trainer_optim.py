"""AdamW, the warmup + cosine schedule and gradient clipping."""

import math

import numpy as np
import pytest

from trainer.optim import AdamW, clip_grad_norm, get_lr


def test_lr_warmup_then_cosine_to_min():
    kw = dict(lr=1.0, min_lr=0.1, warmup_steps=10, total_steps=110)
    lrs = [get_lr(s, **kw) for s in range(120)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)  # linear warmup
    assert lrs[10] == pytest.approx(1.0)  # cosine starts at the peak
    assert lrs[60] == pytest.approx(0.55)  # halfway: (lr + min_lr) / 2
    assert all(a >= b for a, b in zip(lrs[10:110], lrs[11:110]))  # decays monotonically
    assert lrs[109] == pytest.approx(0.1, abs=1e-3) and lrs[115] == 0.1


def test_weight_decay_only_on_matrices():
    params = {"w": np.ones((3, 4), np.float32), "norm": np.ones(4, np.float32)}
    grads = {n: np.zeros_like(p) for n, p in params.items()}
    AdamW(params, weight_decay=0.5).step(params, grads, lr=0.1)
    assert np.allclose(params["w"], 1 - 0.1 * 0.5) and np.all(params["norm"] == 1.0)


def test_adamw_first_step_is_lr_times_sign():
    params = {"w": np.zeros((2, 2), np.float32)}
    grads = {"w": np.array([[3.0, -0.5], [1e-3, -7.0]], np.float32)}
    AdamW(params, weight_decay=0.0).step(params, grads, lr=0.01)
    np.testing.assert_allclose(params["w"], -0.01 * np.sign(grads["w"]), rtol=1e-4)


def test_adamw_state_round_trip_continues_identically():
    rng = np.random.default_rng(0)
    p1 = {"w": rng.normal(size=(3, 3)).astype(np.float32), "b": rng.normal(size=3).astype(np.float32)}
    p2 = {n: a.copy() for n, a in p1.items()}
    g = [{n: rng.normal(size=a.shape).astype(np.float32) for n, a in p1.items()} for _ in range(4)]
    o1 = AdamW(p1)
    for i in range(4):
        o1.step(p1, g[i], 0.01)
    o2 = AdamW(p2)
    for i in range(2):
        o2.step(p2, g[i], 0.01)
    o3 = AdamW(p2)
    o3.load_state_dict({k: (v if k == "t" else {n: a.copy() for n, a in v.items()})
                        for k, v in o2.state_dict().items()})
    for i in range(2, 4):
        o3.step(p2, g[i], 0.01)
    assert all(np.array_equal(p1[n], p2[n]) for n in p1)


def test_adamw_load_rejects_wrong_shapes():
    opt = AdamW({"w": np.zeros((2, 2), np.float32)})
    with pytest.raises(ValueError, match=r"m/w.*\(3,\)"):
        opt.load_state_dict({"t": 1, "m": {"w": np.zeros(3)}, "v": {"w": np.zeros((2, 2))}})


def test_clip_grad_norm():
    grads = {"a": np.array([3.0, 0.0], np.float32), "b": np.array([[4.0]], np.float32)}
    assert clip_grad_norm(grads, 1.0) == pytest.approx(5.0)
    total = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
    assert total == pytest.approx(1.0, rel=1e-5)
    small = {"a": np.array([0.1, 0.2], np.float32)}
    clip_grad_norm(small, 1.0)
    np.testing.assert_array_equal(small["a"], np.array([0.1, 0.2], np.float32))  # untouched below the bound
