"""The zamba group of issue 30 (tests/fixtures/hf5_zamba: Zamba v1, made by transformers 5.25): what
tests/test_hf_parity.py (35-token prompt, greedy, quantized bounds), test_verify_families.py (`petit verify` at f32 /
q8_0 / q4_0) and the app's chat test do not already hold for every hf5 fixture.

- Parity at every position of the 140-token and the chat prompts at f32, within 1e-4 of each position's range, with
  each form of the selective scan; the greedy continuation equal to transformers'.
- kernels/ssm.c's multi-head Mamba-1 (n_heads > 1) against a float64 recurrence per head at odd sizes, its state
  carried across calls, on the scalar path and the best one.
- The forward plan equals the per-op path bit for bit; decode token by token gives the prefill's logits.
- What the family reads (in_proj regrouped, x_proj / dt_proj block-diagonal) and refuses by name.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native as K
from petit.models.blocks.ssm import Mamba
from petit.native import Weight, dequantize, ffi, quantize

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

FOLDER = Path(__file__).parent / "fixtures" / "hf5_zamba" / "zamba"
F32_TOL = 1e-4


@pytest.mark.parametrize("scan", ["recurrent", "chunked"])
@pytest.mark.parametrize("prompt", ["", "_long", "_chat"])
def test_prompts_match_transformers_at_every_position(prompt, scan, monkeypatch):
    monkeypatch.setenv("PETIT_SCAN", scan)
    ref = np.load(FOLDER / f"reference{prompt}.npz")
    assert len(ref["input_ids"]) >= {"": 35, "_long": 100, "_chat": 60}[prompt]
    err = rel_err(_load(FOLDER).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


def test_greedy_continuation_equals_transformers():
    ref = np.load(FOLDER / "reference.npz")
    rng = float((ref["logits"].max(axis=1) - ref["logits"].min(axis=1)).mean())
    assert ref["greedy_gap"].min() >= 1e-3 * rng        # no near-tie: every step is compared
    steps = petit.generate_tokens(_load(FOLDER), ref["input_ids"].tolist(), max_tokens=len(ref["greedy"]),
                                  sampler=petit.Sampler(0.0), stop_ids=[])
    assert [s.token for s in steps] == ref["greedy"].tolist()


def _mixer_f64(p, H, x, conv, s):
    """Zamba's mixer in float64 from a state (conv [di, K-1], s [di, ds]), head by head as transformers runs it,
    each head with its own x_proj [H, R + 2 ds, hd] and dt_proj [H, hd, R]: (y, conv, s)."""
    T = len(x)
    xz = x @ p["in_proj"].T
    di = xz.shape[1] // 2
    xs, z = xz[:, :di], xz[:, di:]
    Kc, hd, R, ds = p["conv_w"].shape[1], di // H, p["dt_proj"].shape[2], p["A"].shape[1]
    hist = np.concatenate([conv.T, xs], axis=0)
    u = np.stack([(hist[t:t + Kc] * p["conv_w"].T).sum(0) + p["conv_b"] for t in range(T)])
    u = u / (1 + np.exp(-u))
    y, s = np.empty((T, di)), s.copy()
    for h in range(H):
        c = slice(h * hd, (h + 1) * hd)
        dbc = u[:, c] @ p["x_proj"][h].T
        dt, B, C = dbc[:, :R], dbc[:, R:R + ds], dbc[:, R + ds:]
        dt = np.logaddexp(0, dt @ p["dt_proj"][h].T + p["dt_bias"][c])
        for t in range(T):
            s[c] = np.exp(dt[t][:, None] * p["A"][c]) * s[c] + (dt[t] * u[t, c])[:, None] * B[t]
            y[t, c] = s[c] @ C[t] + p["D"][c] * u[t, c]
    out = (y * z / (1 + np.exp(-z))) @ p["out_proj"].T
    return out, hist[-(Kc - 1):].T, s


def _block_diag(w, rows, cols):
    H = len(w)
    m = np.zeros((H * rows, H * cols), np.float32)
    for h in range(H):
        m[h * rows:(h + 1) * rows, h * cols:(h + 1) * cols] = w[h]
    return m


@pytest.mark.parametrize("isa", ["scalar", None])
@pytest.mark.parametrize("scan", ["recurrent", "chunked", "auto"])
@pytest.mark.parametrize("D,H,hd,ds,Kc,R,dtype", [(32, 3, 5, 3, 3, 2, "f32"), (32, 2, 17, 7, 4, 3, "f32"),
                                                   (32, 5, 1, 1, 2, 1, "f32"), (32, 2, 32, 16, 4, 4, "q8_0")])
def test_the_multi_head_mixer_is_the_per_head_recurrence_and_carries_its_state(D, H, hd, ds, Kc, R, dtype, scan,
                                                                              isa):
    """Prompts of 7 and 41 tokens (the selective scan's chunks of 32 and a part), decode steps, 3 tokens."""
    K.configure(isa=isa)
    try:
        rng = np.random.default_rng(H * 100 + hd * 10 + ds)
        di, nb = H * hd, R + 2 * ds

        def mat(w, dt=dtype):
            r, c = w.shape
            if dt != "f32" and c % 32 == 0:
                W = Weight(quantize(w, dt), dt, (r, c))
                return dequantize(W.raw, dt, (r, c)), W
            return w, Weight(w.view(np.uint8).reshape(r, -1), "f32", (r, c))
        std = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)   # noqa: E731
        w_in, W_in = mat(std(2 * di, D))
        w_out, W_out = mat(std(D, di))
        xw, dw = std(H, nb, hd), std(H, hd, R)
        bx, W_x = mat(_block_diag(xw, nb, hd))
        _, W_dt = mat(_block_diag(dw, hd, R), "f32")
        xw = np.stack([bx[h * nb:(h + 1) * nb, h * hd:(h + 1) * hd] for h in range(H)])   # the values held
        assert (bx[np.where(_block_diag(np.ones((H, nb, hd)), nb, hd) == 0)] == 0).all()   # zeros stay zeros
        p = {"in_proj": w_in, "x_proj": xw, "dt_proj": dw, "out_proj": w_out,
             "conv_w": rng.standard_normal((di, Kc)).astype(np.float32) / np.sqrt(Kc),
             "conv_b": rng.standard_normal(di).astype(np.float32) * 0.2,
             "dt_bias": np.log(np.expm1(rng.uniform(1e-3, 1e-1, di))).astype(np.float32),
             "A": -rng.uniform(1, 16, (di, ds)).astype(np.float32), "D": rng.normal(1, 0.2, di).astype(np.float32)}
        m = Mamba(W_in, p["conv_w"], p["conv_b"], W_x, W_dt, p["dt_bias"], p["A"], p["D"], W_out, ds, Kc, R,
                  n_heads=H, scan=scan)
        conv, s = np.zeros((di, Kc - 1), np.float32), np.zeros((di, ds), np.float32)
        c64, s64 = conv.astype(np.float64), s.astype(np.float64)
        P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
        tol = 1e-4 if dtype == "f32" else 0.03                     # q8_0: the int8 activations
        for T in (7, 1, 1, 41, 3):           # a prompt, then decode steps, then more: the state carries
            x = rng.standard_normal((T, D)).astype(np.float32)
            y = np.empty((T, D), np.float32)
            assert m.run(P(x), T, P(conv), P(s), P(y)) == 0
            want, c64, s64 = _mixer_f64(p, H, x.astype(np.float64), c64, s64)
            np.testing.assert_allclose(y, want, rtol=0, atol=tol * np.abs(want).max())
            np.testing.assert_allclose(s, s64, rtol=0, atol=(1e-4 if dtype == "f32" else 0.1) * np.abs(s64).max())
        # one head's channels read only their own block: a mixer told it has one head computes something else
        one = Mamba(W_in, p["conv_w"], p["conv_b"], W_x, W_dt, p["dt_bias"], p["A"], p["D"], W_out, ds, Kc, R,
                    scan=scan)
        x = rng.standard_normal((5, D)).astype(np.float32)
        assert one.run(P(x), 5, P(np.zeros_like(conv)), P(np.zeros_like(s)), P(np.empty((5, D), np.float32))) == -1
    finally:
        K.configure()


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_the_plan_equals_the_per_op_path(weights):
    model = _load(FOLDER, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        for a, b in zip(c_plan.k + c_plan.v, c_oracle.k + c_oracle.v):     # keys, values, conv and scan states
            assert np.array_equal(a, b), chunks


def test_decode_token_by_token_gives_the_prefills_logits():
    ids = np.load(FOLDER / "reference.npz")["input_ids"].tolist()
    m = _load(FOLDER)
    full = m.logits(ids)
    cache = m.new_cache(64)
    m.forward(ids[:10], cache)
    steps = [m.forward([t], cache) for t in ids[10:]]
    err = rel_err(np.array(steps), full[10:])
    assert err.max() <= 1e-5, f"position {10 + err.argmax()} off by {err.max():.2e}"


def test_reads_the_mixers_regrouped_and_block_diagonal():
    from petit.formats.checkpoint import open_checkpoint
    cfg = json.loads((FOLDER / "config.json").read_text())
    ckpt = open_checkpoint(FOLDER)
    net = _load(FOLDER).net
    H, R = cfg["n_mamba_heads"], cfg["mamba_dt_rank"]
    L = net.layers[1]
    assert L.shared is not None and net.layers[0].shared is None and net.layers[3].shared.block is L.shared.block
    m, pre = L.mamba, "model.layers.1.mamba_decoder.mamba."
    assert m.n_heads == H
    w_in, src = dequantize(m.in_proj.raw, "f32", m.in_proj.shape), ckpt.f32(pre + "in_proj.weight")
    assert np.array_equal(w_in, np.concatenate([src[0::2], src[1::2]]))     # x at even rows, z at odd ones
    x, src = dequantize(m.x_proj.raw, "f32", m.x_proj.shape), ckpt.f32(pre + "x_proj_weight")
    assert np.array_equal(x, _block_diag(src, *src.shape[1:]))
    assert m.dt_proj.shape == (m.d_inner, H * R)


def _variant(tmp_path, **change) -> Path:
    d = tmp_path / "zamba"
    shutil.copytree(FOLDER, d)
    cfg = json.loads((FOLDER / "config.json").read_text())
    cfg.update(change)
    (d / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))
    return d


def test_both_spellings_of_the_layer_types_load(tmp_path):
    """transformers 5's layer_types (its attribute_map's other name) and the legacy "mamba" kind."""
    ref = np.load(FOLDER / "reference.npz")
    types = ["mamba" if t != "hybrid" else t for t in json.loads((FOLDER / "config.json").read_text())
             ["layers_block_type"]]
    got = _load(_variant(tmp_path, layers_block_type=None, layer_types=types)).logits(ref["input_ids"])
    assert rel_err(got, ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("change, message", [
    (dict(hidden_mamba_act="gelu"), "hidden_mamba_act 'gelu' is not supported by the zamba family"),
    (dict(mamba_proj_bias=True), "mamba_proj_bias true is not supported"),
    (dict(n_mamba_heads=3), "n_mamba_heads 3 must divide"),
    (dict(layer_types=["hybrid"] * 5), "layers_block_type and layer_types disagree"),
    (dict(attention_head_dim=8), "attention_head_dim 8 is not what Zamba derives"),
])
def test_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, **change))


@pytest.mark.parametrize("given, hybrid, dt_rank", [
    ({}, [2, 7, 13, 19, 25, 31, 37, 43, 49, 55, 61, 67, 73], 232),        # Zamba-7B-v1's (ZambaConfig's defaults)
    (dict(num_hidden_layers=13, attn_layer_period=4, attn_layer_offset=1), [2, 4, 8, 12], 232),
])
def test_the_default_layer_pattern_is_transformers(given, hybrid, dt_rank):
    """Without layers_block_type: layers 0, 1 mamba, 2 hybrid, then hybrid where (i - 3) % period == offset; the
    figures are transformers 5.25's ZambaConfig's for the same keys."""
    from petit.models.families.hybrid.zamba import ZambaConfig
    cfg = ZambaConfig.from_dict(given)
    assert cfg.hybrid_layers == hybrid and cfg.mamba_dt_rank == dt_rank
