"""Layer and model tests for the NumPy trainer: finite-difference checks of every backward, a naive
reference forward written straight from the architecture spec, and the whole-model gradient check."""

import numpy as np
import pytest

from trainer import gradcheck, layers
from trainer.gradcheck import REL_ERR_BOUND, check_gradients, numerical_grad, relative_error
from trainer.model import forward, init_params, make_config, param_shapes

RNG = np.random.default_rng(1234)


def _check(loss_fn, analytic, x):
    """Compare an analytic gradient with central differences of loss_fn() w.r.t. x."""
    numeric = numerical_grad(loss_fn, x)
    err = relative_error(analytic, numeric)
    assert err < REL_ERR_BOUND, f"rel_err {err:.2e} >= {REL_ERR_BOUND}"


def _weighted(out):
    """A fixed random projection of a layer output to a scalar, and its gradient."""
    w = np.random.default_rng(out.size).normal(size=out.shape)
    return float(np.sum(out * w)), w


def test_embedding_backward_accumulates_repeated_ids():
    ids = np.array([[1, 3, 1], [0, 1, 3]])
    weight = RNG.normal(size=(5, 4))
    out, cache = layers.embedding_forward(ids, weight)
    _, dout = _weighted(out)
    _check(lambda: _weighted(layers.embedding_forward(ids, weight)[0])[0], layers.embedding_backward(dout, cache),
           weight)


def test_rmsnorm_backward():
    x, w = RNG.normal(size=(2, 3, 6)), RNG.normal(size=6)
    out, cache = layers.rmsnorm_forward(x, w, 1e-5)
    _, dout = _weighted(out)
    dx, dw = layers.rmsnorm_backward(dout, cache)
    f = lambda: _weighted(layers.rmsnorm_forward(x, w, 1e-5)[0])[0]  # noqa: E731
    _check(f, dx, x)
    _check(f, dw, w)


def test_rmsnorm_matches_formula():
    x, w = RNG.normal(size=(3, 8)), RNG.normal(size=8)
    out, _ = layers.rmsnorm_forward(x, w, 1e-5)
    np.testing.assert_allclose(out, x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + 1e-5) * w, rtol=1e-14)


def test_linear_backward():
    x, w = RNG.normal(size=(2, 3, 5)), RNG.normal(size=(4, 5))
    out, cache = layers.linear_forward(x, w)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-13)
    _, dout = _weighted(out)
    dx, dw = layers.linear_backward(dout, cache)
    f = lambda: _weighted(layers.linear_forward(x, w)[0])[0]  # noqa: E731
    _check(f, dx, x)
    _check(f, dw, w)


def test_rope_backward_and_tables():
    x = RNG.normal(size=(2, 5, 3, 6))
    cos, sin = layers.rope_tables(5, 6, 10000.0, np.float64)
    inv = 10000.0 ** (-np.arange(3) * 2 / 6)
    np.testing.assert_allclose(cos[4], np.cos(np.r_[4 * inv, 4 * inv]), rtol=1e-14)
    out, cache = layers.rope_forward(x, cos, sin)
    _, dout = _weighted(out)
    _check(lambda: _weighted(layers.rope_forward(x, cos, sin)[0])[0], layers.rope_backward(dout, cache), x)


def test_attention_backward_gqa():
    q, k, v = RNG.normal(size=(2, 4, 4, 3)), RNG.normal(size=(2, 4, 2, 3)), RNG.normal(size=(2, 4, 2, 3))
    out, cache = layers.attention_forward(q, k, v)
    _, dout = _weighted(out)
    dq, dk, dv = layers.attention_backward(dout, cache)
    f = lambda: _weighted(layers.attention_forward(q, k, v)[0])[0]  # noqa: E731
    _check(f, dq, q)
    _check(f, dk, k)
    _check(f, dv, v)


def test_swiglu_backward():
    g, u = RNG.normal(size=(2, 3, 7)), RNG.normal(size=(2, 3, 7))
    out, cache = layers.swiglu_forward(g, u)
    np.testing.assert_allclose(out, g / (1 + np.exp(-g)) * u, rtol=1e-13)
    _, dout = _weighted(out)
    dg, du = layers.swiglu_backward(dout, cache)
    f = lambda: _weighted(layers.swiglu_forward(g, u)[0])[0]  # noqa: E731
    _check(f, dg, g)
    _check(f, du, u)


@pytest.mark.parametrize("with_mask", [False, True])
def test_cross_entropy_backward(with_mask):
    logits = RNG.normal(size=(2, 3, 7)) * 3
    targets = RNG.integers(0, 7, size=(2, 3))
    mask = np.array([[1, 0, 1], [1, 1, 0]], dtype=np.float64) if with_mask else None
    loss, cache = layers.cross_entropy_forward(logits, targets, mask)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
    expected = nll.mean() if mask is None else (nll * mask).sum() / mask.sum()
    assert loss == pytest.approx(expected, rel=1e-12)
    _check(lambda: layers.cross_entropy_forward(logits, targets, mask)[0], layers.cross_entropy_backward(cache),
           logits)


def test_cross_entropy_all_zero_mask_gives_zero():
    logits = RNG.normal(size=(1, 2, 5))
    loss, cache = layers.cross_entropy_forward(logits, np.zeros((1, 2), int), np.zeros((1, 2)))
    assert loss == 0.0 and not np.any(layers.cross_entropy_backward(cache))


def _reference_logits(params, cfg, ids):
    """The architecture spec, literally: one sequence, loops over heads and positions, float64."""
    H, KV, hd, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    T = len(ids)

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

    def rope(x):  # x (T, n, hd)
        out = np.empty_like(x)
        for p in range(T):
            angle = np.array([p * cfg["rope_theta"] ** (-2 * j / hd) for j in range(hd // 2)])
            cos, sin = np.cos(np.r_[angle, angle]), np.sin(np.r_[angle, angle])
            for h in range(x.shape[1]):
                v = x[p, h]
                rot = np.concatenate([-v[hd // 2:], v[:hd // 2]])
                out[p, h] = v * cos + rot * sin
        return out

    x = params["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, params[p + "input_layernorm.weight"])
        q = rope((h @ params[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd))
        k = rope((h @ params[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd))
        v = (h @ params[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
        heads = []
        for qh in range(H):
            kvh = qh // (H // KV)
            scores = q[:, qh] @ k[:, kvh].T / np.sqrt(hd)
            scores[np.triu_indices(T, 1)] = -np.inf
            prob = np.exp(scores - scores.max(-1, keepdims=True))
            prob /= prob.sum(-1, keepdims=True)
            heads.append(prob @ v[:, kvh])
        x = x + np.concatenate(heads, axis=-1) @ params[p + "self_attn.o_proj.weight"].T
        h2 = rms(x, params[p + "post_attention_layernorm.weight"])
        gate = h2 @ params[p + "mlp.gate_proj.weight"].T
        up = h2 @ params[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ params[p + "mlp.down_proj.weight"].T
    head = params["model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"]
    return rms(x, params["model.norm.weight"]) @ head.T


@pytest.mark.parametrize("tied", [True, False])
def test_forward_matches_naive_reference(tied):
    cfg = make_config(vocab_size=13, hidden_size=24, intermediate_size=20, num_hidden_layers=2,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=16,
                      tie_word_embeddings=tied, rope_theta=500.0)
    params = init_params(cfg, 3, np.float64)
    rng = np.random.default_rng(3)
    for p in params.values():
        p[...] = rng.normal(0, 0.3, p.shape) + (1.0 if p.ndim == 1 else 0.0)
    ids = rng.integers(0, 13, size=(2, 9))
    logits, _ = forward(params, cfg, ids)
    for b in range(2):
        np.testing.assert_allclose(logits[b], _reference_logits(params, cfg, ids[b]), rtol=1e-10, atol=1e-10)
    # float32 training precision stays close to the float64 result
    logits32, _ = forward({n: p.astype(np.float32) for n, p in params.items()}, cfg, ids)
    assert logits32.dtype == np.float32
    np.testing.assert_allclose(logits32, logits, rtol=1e-4, atol=1e-4)


def test_init_follows_gpt2():
    cfg = make_config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                      num_attention_heads=4, num_key_value_heads=4)
    params = init_params(cfg, 0)
    assert list(params) == list(param_shapes(cfg)) and "lm_head.weight" not in params
    assert all(p.dtype == np.float32 for p in params.values())
    assert np.all(params["model.norm.weight"] == 1)
    assert params["model.layers.0.mlp.gate_proj.weight"].std() == pytest.approx(0.02, rel=0.05)
    assert params["model.layers.0.mlp.down_proj.weight"].std() == pytest.approx(0.02 / 4, rel=0.05)
    assert np.array_equal(params["model.embed_tokens.weight"], init_params(cfg, 0)["model.embed_tokens.weight"])


@pytest.mark.parametrize("tied", [True, False])
def test_gradient_check_every_tensor(tied):
    errors = check_gradients(tied=tied)
    cfg = make_config(tie_word_embeddings=tied, **gradcheck.TINY)
    assert set(errors) == set(param_shapes(cfg))
    bad = {n: e for n, e in errors.items() if not e < REL_ERR_BOUND}
    assert not bad, f"tensors over the {REL_ERR_BOUND} bound: {bad}"


def test_gradient_check_catches_a_wrong_backward(monkeypatch):
    # drop the sigmoid-derivative term of SiLU: the check must flag the MLP weights
    def wrong(dout, cache):
        gate, up, sig, act = cache
        return dout * up * sig, dout * act

    monkeypatch.setattr("trainer.model.swiglu_backward", wrong)
    name = "model.layers.0.mlp.gate_proj.weight"
    assert check_gradients(tied=True, names=[name])[name] > 1e-2


def test_bad_config_raises_with_values():
    with pytest.raises(ValueError, match=r"num_attention_heads \(6\).*num_key_value_heads \(4\)"):
        make_config(vocab_size=10, hidden_size=24, num_attention_heads=6, num_key_value_heads=4)
    with pytest.raises(ValueError, match="vocab_size must be a positive integer, got 0"):
        make_config(vocab_size=0)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
        cfg = make_config(vocab_size=10, hidden_size=8, num_attention_heads=2, num_key_value_heads=1,
                          max_position_embeddings=4)
        forward(init_params(cfg, 0), cfg, np.zeros((1, 5), int))
