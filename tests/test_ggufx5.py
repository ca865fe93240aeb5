"""Issue 30's ggufx group: llama.cpp's phimoe files read as the model (petit/loading/gguf_phimoe.py), checked on
llama.cpp's own conversion of a PhiMoE checkpoint (tests/fixtures/gguf5_ggufx/phimoe: ../hf5_moe_a/phimoe's weights
under a config holding the values the file cannot, router_jitter_noise 0.01 and both mscales = the file's
attn_factor) against transformers' logits; llama.cpp's rwkv6qwen2 (QRWKV6: RWKV-6's time mixing as gated linear
attention on Qwen2's blocks, petit/models/families/recurrent/rwkv6qwen2.py, kernels/rwkv.c pt_gla) against llama.cpp's logits on its own
conversion of a tiny checkpoint (tests/fixtures/gguf5_ggufx/rwkv6qwen2). arwkv7 stays refused
(petit/models/refusals.py says why)."""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.gguf_phimoe import JITTER, mscales
from petit.models.refusals import NOT_YET
from petit.native import ffi, lib
from test_plan import CHUNKS, FRESH, _run
from test_moe import routing_agrees

DIR = Path(__file__).parent / "fixtures" / "gguf5_ggufx" / "phimoe"
FILE = DIR / "phimoe.gguf"
PROMPTS = ["reference", "reference_long", "reference_chat"]
F32_TOL = 1e-4


def _load(weights="f32"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = petit.load(FILE, weights=weights)
    return m, [str(w.message) for w in caught]


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / np.ptp(ref, axis=1)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_phimoe_file_gives_transformers_logits_at_every_position_and_its_greedy_tokens(prompt):
    z = np.load(DIR / f"{prompt}.npz")
    assert len(z["input_ids"]) >= (35 if prompt == "reference" else 100)
    m, _ = _load()
    got = m.logits(z["input_ids"])
    err = rel_err(got, z["logits"])
    assert err.max() <= F32_TOL, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"
    cache, out = m.new_cache(), []
    last = m.forward(z["input_ids"].tolist(), cache)
    for _ in range(len(z["greedy"])):
        out.append(int(np.argmax(last)))
        last = m.forward([out[-1]], cache)
    assert out == z["greedy"].tolist()


def test_phimoe_file_runs_the_sparsemixer_and_longrope_and_says_what_it_assumes():
    m, notes = _load()
    cfg, src = m.config, json.loads((DIR / "config.json").read_text())
    assert cfg.model_type == "phimoe" and cfg.router_jitter_noise == JITTER == src["router_jitter_noise"]
    s = cfg.rope_scaling
    assert s["rope_type"] == "longrope" and s["original_max_position_embeddings"] == 160
    assert s["short_mscale"] == s["long_mscale"] == pytest.approx(src["rope_parameters"]["long_mscale"], rel=1e-7)
    np.testing.assert_allclose(s["long_factor"], src["rope_parameters"]["long_factor"], rtol=1e-7)
    np.testing.assert_allclose(s["short_factor"], src["rope_parameters"]["short_factor"], rtol=1e-7)
    assert cfg.attention_bias and cfg.lm_head_bias and cfg.sliding_window is None
    moes = [layer.moe for layer in m.net.layers]
    assert all(x.scoring == "sparsemixer" and x.jitter_eps == JITTER and x.top_k == 2 for x in moes)
    assert any("router_jitter_noise" in n and "short_mscale / long_mscale" in n for n in notes), notes


def test_what_the_file_lacks_matters_so_the_checkpoint_it_came_from_decides():
    """The same weights under hf5_moe_a/phimoe's own config (jitter 0.1, mscales 1.1 / 1.243): the file, which keeps
    neither, runs another model, far beyond the f32 bound. Petit says so at load rather than guessing silently."""
    old = Path(__file__).parent / "fixtures" / "hf5_moe_a" / "phimoe"
    z = np.load(old / "reference_long.npz")
    m, _ = _load()
    assert rel_err(m.logits(z["input_ids"]), z["logits"]).max() > 0.1
    assert rel_err(petit.load(old, weights="f32").logits(z["input_ids"]), z["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("weights,where_same,worst", [("q8_0", 0.30, 0.50), ("q4_0", 0.40, 0.95)])
def test_quantized_loads_stay_within_the_measured_bounds_where_the_routing_agrees(weights, where_same, worst):
    """Measured: q8_0 0.21 / 0.29 / 0.26 of the range where every layer chose float32's experts (31/35, 134/140,
    122/126 positions), 0.47 at worst; q4_0 0.32 / 0.29 / 0.38 (23/35, 85/140, 69/126), 0.92 at worst. Above the
    dense 0.08 / 0.60 bounds: at jitter 0.01 the sparsemixer's weights jump when an expert crosses the 2 x jitter
    threshold even where the chosen pair stays (hf5_moe_a/phimoe's jitter 0.1: 0.068 at q8_0)."""
    m, _ = _load(weights)
    assert all(layer.moe.router.dtype == "f32" for layer in m.net.layers)
    for prompt in PROMPTS:
        z = np.load(DIR / f"{prompt}.npz")
        got, same = routing_agrees(FILE, z["input_ids"], weights)
        err = rel_err(got, z["logits"])
        assert same.mean() >= (0.85 if weights == "q8_0" else 0.5), prompt
        assert err[same].max() <= where_same and err.max() <= worst, (prompt, err[same].max(), err.max())


@pytest.mark.parametrize("prompt", PROMPTS)
def test_llama_cpp_runs_the_same_file_as_another_model(prompt):
    """llama.cpp's logits on the fixture (n_ctx 256: the long factors, chosen by the context size, and Mixtral's
    routing) measured 0.62 / 1.00 / 0.78 of the range off transformers, argmax equal at 31% / 24% / 22%: why Petit
    reads the file as the model instead."""
    z, theirs = np.load(DIR / f"{prompt}.npz"), np.load(DIR / f"llamacpp{prompt[len('reference'):]}.npz")
    assert np.array_equal(z["input_ids"], theirs["input_ids"])
    assert rel_err(theirs["logits"], z["logits"]).max() > 0.5
    assert (theirs["logits"].argmax(1) == z["logits"].argmax(1)).mean() < 0.5


def test_phimoe_file_converts_to_a_petit_file_with_the_same_logits(tmp_path):
    from petit.cli import main
    z = np.load(DIR / "reference_long.npz")
    assert main(["convert", str(FILE), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(z["input_ids"])
    assert rel_err(got, z["logits"]).max() <= F32_TOL


def test_a_longrope_phimoe_file_without_its_original_length_is_refused():
    with pytest.raises(ValueError, match="original_context_length' is missing"):
        mscales({}, {"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0], "attention_factor": 1.1})
    s = mscales({"phimoe.rope.scaling.original_context_length": 32}, {"rope_type": "longrope", "long_factor": [2.0],
                                                                       "short_factor": [1.0]})
    assert s["short_mscale"] == s["long_mscale"] == 1.0 and s["original_max_position_embeddings"] == 32


def test_arwkv7_stays_refused_and_phimoe_and_rwkv6qwen2_are_not():
    assert "gguf:phimoe" not in NOT_YET and "gguf:rwkv6qwen2" not in NOT_YET
    assert "batch" in NOT_YET["gguf:arwkv7"]
    from petit.loading.gguf_archs import unsupported
    assert unsupported("arwkv7").startswith("architecture 'arwkv7' is not read by Petit yet: RWKV-7's time mixing")


# ---- rwkv6qwen2 (QRWKV6) ----

QDIR = Path(__file__).parent / "fixtures" / "gguf5_ggufx" / "rwkv6qwen2"
QFILE = QDIR / "rwkv6qwen2.gguf"


def _qload(weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the file loads without any report
        return petit.load(QFILE, weights=weights)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_rwkv6qwen2_gives_llama_cpps_logits_at_every_position_and_its_greedy_tokens(prompt):
    """Measured 2.7e-7 / 4.0e-7 / 3.3e-7 of the range (35 / 140 / chat)."""
    z = np.load(QDIR / f"{prompt}.npz")
    m = _qload()
    got = m.logits(z["input_ids"])
    err = rel_err(got, z["logits"])
    assert err.max() <= 1e-5, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"
    cache, out = m.new_cache(), []
    last = m.forward(z["input_ids"].tolist(), cache)
    for _ in range(len(z["greedy"])):
        out.append(int(np.argmax(last)))
        last = m.forward([out[-1]], cache)
    assert out == z["greedy"].tolist()


def test_rwkv6qwen2_reads_the_grouped_heads_biases_and_loras_the_file_says():
    m = _qload()
    c = m.config
    assert (c.model_type, c.hidden_size, c.head_size, c.num_key_value_heads) == ("rwkv6qwen2", 64, 16, 2)
    assert (c.lora_rank_tokenshift, c.lora_rank_decay, c.intermediate_size) == (8, 16, 96)
    for layer in m.net.layers:
        r = layer.mamba.rwkv
        assert r["gla"] and r["mix_only"] and r["kv_heads"] == 2 and r["w"][1].shape == (32, 64)
        assert all(r[b] is not None for b in ("rb", "kb", "vb"))
        assert layer.attn_norm.kind == "rms" and layer.gate is not None and layer.moe is None


def test_rwkv6qwen2_decode_token_by_token_gives_the_prefills_logits():
    z = np.load(QDIR / "reference.npz")
    ids = z["input_ids"]
    m = _qload()
    whole = m.logits(ids)
    cache = m.new_cache(64)
    steps = np.stack([m.forward([int(t)], cache) for t in ids])
    np.testing.assert_allclose(steps, whole, rtol=0, atol=1e-5 * float(np.ptp(whole)))


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_rwkv6qwen2_plan_equals_the_per_op_path(weights):
    model = _qload(weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        for a, b in ((c_plan.k, c_oracle.k), (c_plan.v, c_oracle.v)):
            for x, y in zip(a, b, strict=True):
                assert np.array_equal(x, y)


@pytest.mark.parametrize("weights,bound", [("q8_0", 0.08), ("q4_0", 0.60)])
def test_rwkv6qwen2_quantized_loads_stay_within_the_dense_bounds(weights, bound):
    for prompt in PROMPTS:
        z = np.load(QDIR / f"{prompt}.npz")
        assert rel_err(_qload(weights).logits(z["input_ids"]), z["logits"]).max() <= bound, prompt


def test_rwkv6qwen2_converts_to_a_petit_file_with_the_same_logits(tmp_path):
    from petit.cli import main
    z = np.load(QDIR / "reference_long.npz")
    assert main(["convert", str(QFILE), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    got = petit.load(tmp_path / "m.petit").logits(z["input_ids"])
    assert rel_err(got, z["logits"]).max() <= 1e-5


def test_an_rwkv6qwen2_file_with_the_bonus_is_refused_by_name():
    from petit.loading.gguf_ggufx5 import _rwkv6qwen2
    meta = {"rwkv6qwen2.wkv.head_size": 16, "rwkv6qwen2.time_mix_extra_dim": 8, "rwkv6qwen2.time_decay_extra_dim": 16}
    with pytest.raises(ValueError, match="time_mix_first holds RWKV-6's own time mixing"):
        _rwkv6qwen2(meta, lambda k: "rwkv6qwen2." + k, {"max_position_embeddings": 8}, lambda n: True)
    with pytest.raises(ValueError, match="token_shift_count 2"):
        _rwkv6qwen2(dict(meta, **{"rwkv6qwen2.token_shift_count": 2}), lambda k: "rwkv6qwen2." + k,
                    {"max_position_embeddings": 8}, lambda n: False)


def _f(a):
    a = np.ascontiguousarray(a, np.float32)
    return a, ffi.cast("float *", ffi.from_buffer(a))


def _gla_f64(r, k, v, w, scale, H, N, S):
    y = np.empty((len(r), H * N))
    for t in range(len(r)):
        rt, kt, vt, wt = (a[t].reshape(H, N) for a in (r, k, v, w))
        S = S * wt[:, :, None] + kt[:, :, None] * vt[:, None, :]
        y[t] = scale * np.einsum("hi,hij->hj", rt, S).reshape(-1)
    return y, S


@pytest.mark.parametrize("H,N,splits", [(1, 1, (3,)), (3, 5, (13,)), (2, 7, (1, 1, 9, 2)), (5, 3, (6, 1, 6)),
                                        (1, 33, (4, 17))])
def test_the_gla_kernel_its_scalar_reference_and_float64_agree_at_odd_sizes(H, N, splits):
    rng = np.random.default_rng(H * 10 + N)
    T, D = sum(splits), H * N
    r, k, v = (rng.standard_normal((T, D)) for _ in range(3))
    w = np.exp(-np.exp(rng.uniform(-6, 1, (T, D))))
    scale = N ** -0.5
    want, S_want = _gla_f64(r, k, v, w, scale, H, N, np.zeros((H, N, N)))
    outs = {}
    for name, fn in (("kernel", lib.pt_gla), ("reference", lib.pt_gla_ref)):
        S, sp = _f(np.zeros((H, N, N)))
        got, at = [], 0
        for n in splits:                        # the state carried from call to call
            ins = [_f(a[at:at + n]) for a in (r, k, v, w)]
            y, yp = _f(np.zeros((n, D)))
            assert fn(*(p for _, p in ins), scale, n, H, N, sp, yp) == 0
            got.append(y)
            at += n
        outs[name] = np.concatenate(got)
        tol = 2e-5 * max(1.0, np.abs(want).max())
        np.testing.assert_allclose(outs[name], want, rtol=0, atol=tol)
        np.testing.assert_allclose(S, S_want, rtol=0, atol=tol)
    np.testing.assert_allclose(outs["kernel"], outs["reference"], rtol=0, atol=1e-6 * max(1.0, np.abs(want).max()))
    x, p = _f(np.zeros(4))
    assert lib.pt_gla(p, p, p, p, 1.0, 0, 1, 1, p, p) == -1 and lib.pt_gla_ref(p, p, p, p, 1.0, 1, 0, 1, p, p) == -1
