"""The fam36n group of issue 36 (tests/fixtures/hf5_fam36n: xLSTM, made by transformers 5.25): what
tests/test_hf_parity.py (every position of the three prompts, the quantized bounds) and test_verify_families.py
(`petit verify` at f32 / q8_0 / q4_0) do not already hold.

- The mLSTM kernel (kernels/mlstm.c, Mamba version 9) against a float64 reference of transformers' recurrent step,
  over odd sizes, across calls (its state carried), with and without the gate cap.
- The greedy continuation equals transformers'; the plan equals the per-op path bit for bit, and token-by-token
  decode the prefill.
- What the family reads, its defaults (transformers'), the keys it accepts without reading, its refusals by name.
- A converted `.petit` file reloads and runs the same numbers.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from petit.models.families.recurrent import xlstm
from petit.models.blocks.ssm import Mamba
from petit.native import Weight, ffi
from models import converted_runs_the_same, load_strict as _load
from test_ssm import decode_and_plan

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36n"
XLSTM = DIR / "xlstm"


def mlstm_f64(x, w_in, b_in, w_out, norm_w, H, dk, dv, cap, eps, norm_eps, state):
    """transformers' mlstm_recurrent_step_native token by token in float64, then the per-head LayerNorm, sigmoid(o)
    and out_proj; state [H][dk dv + dk + 1] (C, n, m) carried."""
    Dk, Dv = H * dk, H * dv
    z = x @ w_in.T + b_in
    S = state.copy()
    ys = np.zeros((len(x), Dv))
    for t in range(len(x)):
        q, k = z[t, :Dk].reshape(H, dk), z[t, Dk:2 * Dk].reshape(H, dk)
        v, o = z[t, 2 * Dk:2 * Dk + Dv].reshape(H, dv), z[t, 2 * Dk + Dv:2 * Dk + 2 * Dv].reshape(H, dv)
        ig, fg = z[t, 2 * Dk + 2 * Dv:2 * Dk + 2 * Dv + H], z[t, 2 * Dk + 2 * Dv + H:]
        if cap:
            ig, fg = cap * np.tanh(ig / cap), cap * np.tanh(fg / cap)
        for h in range(H):
            C, n, m = S[h, :dk * dv].reshape(dk, dv), S[h, dk * dv:dk * dv + dk], S[h, -1]
            lf = -np.logaddexp(0.0, -fg[h])
            mn = max(lf + m, ig[h])
            a, b = np.exp(lf + m - mn), np.exp(ig[h] - mn)
            C, n = a * C + b * np.outer(k[h], v[h]), a * n + b * k[h]
            qs = q[h] / np.sqrt(dk)
            hh = qs @ C / (max(abs(qs @ n), np.exp(-mn)) + eps)
            hh = (hh - hh.mean()) / np.sqrt(hh.var() + norm_eps)
            ys[t, h * dv:(h + 1) * dv] = hh * norm_w[h * dv:(h + 1) * dv] / (1.0 + np.exp(-o[h]))
            S[h, :dk * dv], S[h, dk * dv:dk * dv + dk], S[h, -1] = C.reshape(-1), n, mn
    return ys @ w_out.T, S


@pytest.mark.parametrize("D,H,dk,dv,cap", [(24, 3, 5, 7, 4.0), (17, 1, 9, 3, 0.0), (40, 2, 16, 8, 15.0)])
def test_the_mlstm_kernel_is_transformers_recurrence_and_carries_its_state(D, H, dk, dv, cap):
    """prompts of 11 and 70 tokens, a token, 3 tokens, the state carried from call to call"""
    rng = np.random.default_rng(D + H + dk)
    rows = 2 * H * dk + 2 * H * dv + 2 * H
    w_in = (rng.standard_normal((rows, D)) * 1.5 / np.sqrt(D)).astype(np.float32)
    w_out = (rng.standard_normal((D, H * dv)) / np.sqrt(H * dv)).astype(np.float32)
    b_in = np.concatenate([np.zeros(rows - 2 * H), rng.normal(0, 1, H), rng.uniform(1, 4, H)]).astype(np.float32)
    norm_w = rng.normal(1, 0.2, H * dv).astype(np.float32)
    f32 = lambda w: Weight(w.view(np.uint8).reshape(w.shape[0], -1), "f32", w.shape)     # noqa: E731
    zero = np.zeros(1, np.float32)
    m = Mamba(f32(w_in), np.zeros((1, 1), np.float32), None, None, None, None, zero, zero, f32(w_out), dk, 1, 1,
              eps=1e-6, version=9, n_heads=H, norm_w=norm_w, in_b=b_in, dt_max=cap, mlstm_eps=1e-6)
    cs, ss = m.state_shapes
    assert ss == (H, dk * dv + dk + 1)
    conv, S = np.zeros(cs, np.float32), np.zeros(ss, np.float32)
    S64 = S.astype(np.float64)
    P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
    for T in (11, 70, 1, 3):
        x = rng.standard_normal((T, D)).astype(np.float32)
        y = np.empty((T, D), np.float32)
        assert m.run(P(x), T, P(conv), P(S), P(y)) == 0
        want, S64 = mlstm_f64(x.astype(np.float64), w_in, b_in, w_out, norm_w, H, dk, dv, cap, 1e-6, 1e-6, S64)
        np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())
        np.testing.assert_allclose(S, S64, rtol=2e-5, atol=2e-5 * np.abs(S64).max())


def test_greedy_continuation_equals_transformers():
    ref = np.load(XLSTM / "reference.npz")
    model = _load(XLSTM)
    ids = list(ref["input_ids"])
    for want in ref["greedy"]:
        got = int(np.argmax(model.logits(np.array(ids))[-1]))
        assert got == want
        ids.append(got)


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_the_plan_gives_the_oracles_bits_and_decode_the_prefills(weights):
    decode_and_plan(XLSTM, weights)


def test_converted_file_runs_the_same_numbers(tmp_path):
    converted_runs_the_same(XLSTM, tmp_path, np.load(XLSTM / "reference.npz")["input_ids"])


def test_the_head_is_never_tied(tmp_path):
    """transformers 5.25's xLSTMForCausalLM declares no tied weights: lm_head.weight is saved and read even with
    tie_word_embeddings true, and so Petit reads it."""
    import shutil
    d = tmp_path / "x"
    shutil.copytree(XLSTM, d)
    (d / "config.json").write_text(json.dumps(_cfg(tie_word_embeddings=True)))
    ids = np.load(XLSTM / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(d).logits(ids), _load(XLSTM).logits(ids))


def _cfg(**changes):
    d = json.loads((XLSTM / "config.json").read_text())
    d.update(changes)
    return d


def test_what_the_family_reads():
    model = _load(XLSTM)
    layers = model.net.layers
    assert len(layers) == 2
    for L in layers:
        mx = L.mamba
        assert mx.version == 9 and mx.n_heads == 4 and mx.d_state == 16 and mx.d_inner == 128
        assert mx.dt_max == 4.0 and mx.mlstm_eps == 1e-6 and mx.in_proj.shape == (2 * 64 + 2 * 128 + 8, 128)
        assert np.all(mx.in_b[:-8] == 0) and np.any(mx.in_b[-8:] != 0)
        assert L.gate is not None and L.up.shape == (192, 128) and L.attn_norm.kind == "rms"
    assert model.net.arch.logit_softcap == 30.0


def test_defaults_are_transformers():
    bare = xlstm.Config.from_dict({"model_type": "xlstm"})
    assert (bare.vocab_size, bare.hidden_size, bare.num_hidden_layers, bare.num_heads) == (50304, 4096, 32, 8)
    assert (bare.qk_dim, bare.v_dim, bare.intermediate_size) == (2048, 4096, 10944)
    assert (bare.gate_soft_cap, bare.output_logit_soft_cap, bare.norm_eps, bare.eps) == (15.0, 30.0, 1e-6, 1e-6)
    assert not bare.tie_word_embeddings and bare.weight_mode == "single"


@pytest.mark.parametrize("key, value", [("chunk_size", 16), ("mode", "train"), ("autocast_kernel_dtype", "float32"),
                                        ("max_inference_chunksize", 8), ("return_last_states", False)])
def test_kernel_choices_are_accepted_and_not_read(key, value):
    cfg = xlstm.Config.from_dict(_cfg(**{key: value}))
    assert cfg.unknown_keys == []


@pytest.mark.parametrize("changes, message", [
    (dict(weight_mode="fused"), "weight_mode 'fused' is not supported by the xlstm family (only single: "
                                "transformers 5.25 cannot build a fused model"),
    (dict(use_bias=True), "use_bias true is not supported by the xlstm family"),
    (dict(embedding_dim=64), "embedding_dim 64 != hidden_size 128"),
    (dict(num_blocks=3), "num_blocks 3 != num_hidden_layers 2"),
    (dict(num_heads=3), "must be positive multiples of num_heads 3"),
    (dict(gate_soft_cap=-1.0), "gate_soft_cap must be a positive number or null"),
])
def test_refusals_name_what_is_not_supported(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        xlstm.Config.from_dict(_cfg(**changes))
