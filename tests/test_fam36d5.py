"""The fam36d group of issue 36 (tests/fixtures/hf5_fam36d, made by transformers 5.25): DiffLlama and SmallDoge,
what tests/test_hf_parity.py (35-token prompt, greedy), test_verify_families.py (`petit verify` at f32 / q8_0 /
q4_0) and the app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The greedy continuation equals transformers'.
- The forward plan equals the per-op path bit for bit (chunked prefill and decode, float32 and int8 caches); a batch
  gives each sequence its own logits bit for bit; decoding with the cache equals the whole sequence.
- Other head layouts than the fixtures' (one and three query heads a kv head, four kv heads; Doge with a sliding
  window, without biases) against the float64 reference (trainer/reference), on random weights.
- kernels/doge.c's two ops against float64 at odd sizes.
- What each family reads (DiffLlama's lambdas and doubled q / k / v rows; Doge's key bias slot, residual scales),
  reports and refuses by name; a converted `.petit` file reloads and runs the same numbers.
"""
import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert
from petit.models.families.dense import diffllama, doge
from trainer.reference import Reference

from models import assert_greedy_equals_transformers, assert_a_batch_gives_each_sequence_its_own_logits, load_strict as _load, rel_err
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import CHUNKS, FRESH, _run

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36d"
FOLDER, DOGE = DIR / "diffllama", DIR / "doge"
FOLDERS = pytest.mark.parametrize("folder", [FOLDER, DOGE], ids=["diffllama", "doge"])


@FOLDERS
def test_greedy_continuation_equals_transformers(folder):
    assert_greedy_equals_transformers(_load(folder), folder)


@FOLDERS
@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "f32"), ("f32", "int8")])
def test_the_plan_equals_the_per_op_path(folder, weights, kv):
    model = _load(folder, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, kv, oracle=False)
        want, c_oracle = _run(model, chunks, kv, oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)


@FOLDERS
def test_decoding_with_the_cache_equals_the_whole_sequence(folder):
    model = _load(folder)
    ids = np.load(folder / "reference_long.npz")["input_ids"]
    whole = model.logits(ids)
    cache = model.new_cache(len(ids))
    steps = [model.forward(ids[:90], cache)] + [model.forward(ids[i:i + 1], cache) for i in range(90, len(ids))]
    assert rel_err(np.stack(steps), whole[89:]).max() <= 1e-5


@FOLDERS
def test_a_batch_gives_each_sequence_its_own_logits_bit_for_bit(folder):
    """The pair copies, axpy and norm (DiffLlama), the key bias slots, residual scales and copies (Doge) run over
    the step's stacked rows: a prefill beside a decode step."""
    model = _load(folder)
    assert_a_batch_gives_each_sequence_its_own_logits(model, np.load(folder / "reference_chat.npz")["input_ids"])


def test_reads_each_layers_lambda_and_the_projections_rows():
    cfg = json.loads((FOLDER / "config.json").read_text())
    raw = _read_safetensors(FOLDER / "model.safetensors")
    net = _load(FOLDER).net
    H, K, d, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
    assert (net.arch.num_attention_heads, net.arch.num_key_value_heads, net.arch.head_dim) == (2 * H, 2 * K, d)
    for i, L in enumerate(net.layers):
        a = f"model.layers.{i}.self_attn."
        q1, k1, q2, k2 = (raw[a + n].astype(np.float64) for n in diffllama.LAMBDAS)
        init = 0.8 - 0.6 * math.exp(-0.3 * i)
        assert L.att_out.lam == pytest.approx(np.exp(q1 @ k1) - np.exp(q2 @ k2) + init, abs=1e-6)
        np.testing.assert_array_equal(L.att_out.norm.w.a, np.float32(1 - init))
        # Llama's products, rows reordered; the biases added by the expansion, not by the decoder
        assert L.q.shape == L.o.shape[::-1] == (H * d, D) and L.k.shape == L.v.shape == (K * d, D)
        assert L.q_b is None and L.k_b is None and L.v_b is None and L.o_b is not None
        for role, b in zip("qkv", L.pre_store.biases):
            r = L.file_rows[role][0]
            assert sorted(r) == list(range(len(r)))
            want = raw[a + f"{role}_proj.weight"][r]
            np.testing.assert_array_equal(L.__dict__[role].raw.view(np.float32).reshape(want.shape), want)
            np.testing.assert_array_equal(b.a, raw[a + f"{role}_proj.bias"][r])


@pytest.mark.parametrize("H, K, d", [(2, 2, 3), (6, 2, 5), (8, 4, 3), (4, 4, 7)])
def test_the_expansion_copies_build_each_head_twice(H, K, d):
    """Expand's copies turn the products' rows (diff_attn.compact) into the doubled heads (diff_attn.layout): run on
    buffers holding each value's source row."""
    from petit.models.blocks.diff_attn import Expand, compact, layout
    from petit.native import ffi
    T = 3
    arrays = {n: np.full((T, 2 * H * d), np.nan, np.float32) for n in ("q", "k", "v", "att", "qgate")}
    for name, rows in zip("qkv", compact(H, K, d)):
        arrays[name].reshape(-1)[:T * len(rows)] = np.tile(rows, T) + 1000 * np.repeat(np.arange(T), len(rows))
    buf = {n: ffi.cast("float *", ffi.from_buffer(a)) for n, a in arrays.items()}
    assert Expand(H, K, d, [None] * 3).run(buf, T) == 0
    for name, want in zip("qkv", layout(H, K, d)):
        got = arrays[name].reshape(-1)[:T * len(want)].reshape(T, -1)
        np.testing.assert_array_equal(got, want[None, :] + 1000 * np.arange(T)[:, None])


def _random_folder(tmp_path, H, K, d, D=24, layers=2, bias=False) -> Path:
    """The fixture's tokenizer with random weights in another head layout."""
    folder = tmp_path / f"diffllama_{H}_{K}"
    shutil.copytree(FOLDER, folder)
    cfg = json.loads((FOLDER / "config.json").read_text())
    cfg.update(hidden_size=D, num_attention_heads=H, num_key_value_heads=K, head_dim=d, num_hidden_layers=layers,
               attention_bias=bias)
    (folder / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(H * 100 + K)
    F, V = cfg["intermediate_size"], cfg["vocab_size"]
    mat = lambda r, c: rng.standard_normal((r, c)) / math.sqrt(c)         # noqa: E731
    t = {"model.embed_tokens.weight": rng.standard_normal((V, D)), "lm_head.weight": rng.standard_normal((V, D)),
         "model.norm.weight": 1 + 0.2 * rng.standard_normal(D)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": 1 + 0.2 * rng.standard_normal(D),
                  p + "post_attention_layernorm.weight": 1 + 0.2 * rng.standard_normal(D),
                  p + "self_attn.q_proj.weight": mat(H * d, D), p + "self_attn.k_proj.weight": mat(K * d, D),
                  p + "self_attn.v_proj.weight": mat(K * d, D), p + "self_attn.o_proj.weight": mat(D, H * d),
                  p + "mlp.gate_proj.weight": mat(F, D), p + "mlp.up_proj.weight": mat(F, D),
                  p + "mlp.down_proj.weight": mat(D, F)})
        t.update({p + "self_attn." + n: 0.3 * rng.standard_normal(d) for n in diffllama.LAMBDAS})
        if bias:
            t.update({p + f"self_attn.{r}_proj.bias": 0.2 * rng.standard_normal(n)
                      for r, n in (("q", H * d), ("k", K * d), ("v", K * d), ("o", D))})
    _write_safetensors(folder / "model.safetensors", t)
    return folder


@pytest.mark.parametrize("H, K, d, bias", [(2, 2, 6, False), (6, 2, 10, True), (8, 4, 4, False),
                                           (4, 4, 14, True)])
def test_other_head_layouts_equal_the_float64_reference(tmp_path, H, K, d, bias):
    folder = _random_folder(tmp_path, H, K, d, bias=bias)
    path = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(folder, path, "f32").close()
    ids = np.load(FOLDER / "reference.npz")["input_ids"]
    ref = Reference(path)
    try:
        want = ref.logits(ids)
    finally:
        ref.close()
    assert rel_err(_load(folder).logits(ids), want).max() <= 1e-5


def _config(**changes):
    d = json.loads((FOLDER / "config.json").read_text())
    d.update(changes)
    return d


def test_the_lambdas_init_key_is_read_as_training_only():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diffllama.Config.from_dict(_config(lambda_std_dev=0.5))


def test_unknown_keys_are_reported():
    with pytest.warns(UserWarning, match="mlp_bias"):
        cfg = diffllama.Config.from_dict(_config(mlp_bias=True))
    assert cfg.unknown_keys == ["mlp_bias"]


@pytest.mark.parametrize("changes, message", [
    (dict(num_key_value_heads=1, num_attention_heads=4), "num_key_value_heads 1 must be even"),
    (dict(num_key_value_heads=3, num_attention_heads=6), "num_key_value_heads 3 must be even"),
    (dict(attention_dropout=0.1), "attention_dropout 0.1"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(attention_bias="yes"), "attention_bias"),
    (dict(num_attention_heads=3), "not divisible"),
])
def test_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        diffllama.Config.from_dict(_config(**changes))


@FOLDERS
def test_converted_file_runs_the_same_numbers(tmp_path, folder):
    from petit.cli import main
    out = tmp_path / "d.petit"
    assert main(["convert", str(folder), "-o", str(out), "--q8"]) == 0
    ids = np.load(folder / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_load(out, "q8_0").logits(ids), petit.load(folder, weights="q8_0").logits(ids))



# ---- SmallDoge ----

@pytest.mark.parametrize("T, H, K, hd, slot", [(1, 1, 1, 3, 2), (7, 6, 3, 11, 9), (13, 4, 2, 18, 16)])
def test_the_key_bias_slots_equal_a_float64_reference_at_odd_sizes(T, H, K, hd, slot):
    from petit.native import ffi, lib
    rng = np.random.default_rng(T + H + hd)
    z = (rng.standard_normal((T, K)) * 8).astype(np.float32)
    z[0, 0] = 25.0                                      # past torch's softplus threshold: z itself
    A = rng.standard_normal(K).astype(np.float32)
    q, k = rng.standard_normal((T, H, hd)).astype(np.float32), rng.standard_normal((T, K, hd)).astype(np.float32)
    q0, k0 = q.copy(), k.copy()
    p = lambda a: ffi.cast("float *", ffi.from_buffer(a))                       # noqa: E731
    assert lib.pt_doge_dt(p(z), p(A), T, H, K, hd, slot, 0.25, p(q), p(k)) == 0
    z64 = z.astype(np.float64)
    want = np.exp(A * np.where(z64 > 20, z64, np.log1p(np.exp(np.minimum(z64, 20)))))
    np.testing.assert_allclose(k[:, :, slot], want, rtol=5e-6)      # expf of |A z| up to ~40: a few ulp
    assert (q[:, :, slot] == np.float32(0.25)).all()
    others = np.arange(hd) != slot
    assert np.array_equal(q[:, :, others], q0[:, :, others]) and np.array_equal(k[:, :, others], k0[:, :, others])
    assert lib.pt_doge_dt(p(z), p(A), T, H, K, hd, hd, 0.25, p(q), p(k)) == -1        # a slot past the head
    y = rng.standard_normal((T, hd)).astype(np.float32)
    w = rng.standard_normal(hd).astype(np.float32)
    want = y * w
    assert lib.pt_scale_cols(p(y), p(w), T, hd) == 0
    assert np.array_equal(y, want)


def test_doge_reads_its_key_bias_and_residual_scales():
    cfg = json.loads((DOGE / "config.json").read_text())
    raw = _read_safetensors(DOGE / "model.safetensors")
    net = _load(DOGE).net
    H, K, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    d = D // H
    assert (net.arch.num_attention_heads, net.arch.num_key_value_heads, net.arch.head_dim) == (H, K, d + 2)
    assert net.arch.attn_scale == d ** -0.5 and net.arch.context_length == min(cfg["max_position_embeddings"],
                                                                                cfg.get("keep_window_size", 2048))
    for i, L in enumerate(net.layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        np.testing.assert_array_equal(L.resid_alpha[0].a, raw[p + "input_residual"])
        np.testing.assert_array_equal(L.resid_alpha[1].a, raw[p + "post_attention_residual"])
        m = L.pre_store
        np.testing.assert_array_equal(m.A.a, raw[a + "A"])
        np.testing.assert_array_equal(m.dt_b.a, raw[a + "dt_proj.bias"])
        dt = m.dt_proj.raw.view(np.float32).reshape(K, K, d + 2)
        np.testing.assert_array_equal(dt[:, :, :d].reshape(K, K * d), raw[a + "dt_proj.weight"])
        assert not dt[:, :, d:].any() and m.q_value == np.float32(np.sqrt(d))
        for role, heads in (("q", H), ("k", K), ("v", K)):     # the checkpoint's rows, two zero rows a head after
            W = L.__dict__[role].raw.view(np.float32).reshape(heads, d + 2, D)
            np.testing.assert_array_equal(W[:, :d].reshape(heads * d, D), raw[a + f"{role}_proj.weight"])
            assert not W[:, d:].any()
        for name in ("q_norm", "k_norm"):
            n = getattr(L, name)
            np.testing.assert_allclose(n.w.a[:d], raw[a + name + ".weight"] * np.sqrt(d / (d + 2)), rtol=1e-6)
            assert n.eps == pytest.approx(1e-6 * d / (d + 2)) and not n.w.a[d:].any()


def _random_doge(tmp_path, H, K, d, D=24, layers=2, bias=False, window=None, keep=None) -> Path:
    folder = tmp_path / f"doge_{H}_{K}"
    shutil.copytree(DOGE, folder)
    cfg = json.loads((DOGE / "config.json").read_text())
    cfg.update(hidden_size=D, num_attention_heads=H, num_key_value_heads=K, head_dim=d, num_hidden_layers=layers,
               attention_bias=bias, mlp_bias=bias, sliding_window=window)
    if keep:
        cfg["keep_window_size"] = keep
    (folder / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(H * 100 + K + (window or 0))
    F, V = cfg["intermediate_size"], cfg["vocab_size"]
    mat = lambda r, c: rng.standard_normal((r, c)) / math.sqrt(c)         # noqa: E731
    near1 = lambda n: 1 + 0.2 * rng.standard_normal(n)                     # noqa: E731
    t = {"model.embed_tokens.weight": rng.standard_normal((V, D)), "lm_head.weight": rng.standard_normal((V, D)),
         "model.norm.weight": near1(D)}
    for i in range(layers):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        t.update({p + "input_layernorm.weight": near1(D), p + "post_attention_layernorm.weight": near1(D),
                  p + "input_residual": near1(D), p + "post_attention_residual": near1(D),
                  a + "q_proj.weight": mat(H * d, D), a + "k_proj.weight": mat(K * d, D),
                  a + "v_proj.weight": mat(K * d, D), a + "o_proj.weight": mat(D, H * d),
                  a + "q_norm.weight": near1(d), a + "k_norm.weight": near1(d), a + "A": 0.5 * rng.standard_normal(K),
                  a + "dt_proj.weight": mat(K, K * d),
                  p + "mlp.gate_proj.weight": mat(F, D), p + "mlp.up_proj.weight": mat(F, D),
                  p + "mlp.down_proj.weight": mat(D, F)})
        if bias:
            t.update({a + f"{r}_proj.bias": 0.2 * rng.standard_normal(n)
                      for r, n in (("q", H * d), ("k", K * d), ("v", K * d), ("o", D), ("dt", K))})
            t.update({p + f"mlp.{r}_proj.bias": 0.2 * rng.standard_normal(n) for r, n in (("gate", F), ("up", F),
                                                                                        ("down", D))})
    _write_safetensors(folder / "model.safetensors", t)
    return folder


@pytest.mark.parametrize("H, K, d, bias, window", [(6, 2, 10, True, None), (3, 3, 8, False, 5),
                                                   (8, 4, 6, True, 9)])
def test_doge_layouts_equal_the_float64_reference(tmp_path, H, K, d, bias, window):
    folder = _random_doge(tmp_path, H, K, d, bias=bias, window=window)
    path = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(folder, path, "f32").close()
    ids = np.load(FOLDER / "reference.npz")["input_ids"]
    ref = Reference(path)
    try:
        want = ref.logits(ids)
    finally:
        ref.close()
    model = _load(folder)
    assert [L.window for L in model.net.layers] == [window or 0] * 2
    assert rel_err(model.logits(ids), want).max() <= 1e-5


def test_doge_context_stops_at_keep_window_size(tmp_path):
    """Past keep_window_size keys transformers keeps each query's top keys by their bias: not run, so no longer
    context is offered."""
    model = _load(_random_doge(tmp_path, 4, 2, 6, keep=40))
    assert model.context_length == 40
    with pytest.raises(ValueError, match="exceeds the model's context length 40"):
        model.new_cache(41)


def _doge(**changes):
    d = json.loads((DOGE / "config.json").read_text())
    d.update(changes)
    return d


def test_doge_reads_its_router_keys_as_training_only():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = doge.Config.from_dict(_doge(output_router_logits=True, router_aux_loss_coef=0.01))
    assert cfg.unknown_keys == []


def test_doge_unknown_keys_are_reported():
    with pytest.warns(UserWarning, match="lambda_std_dev"):
        cfg = doge.Config.from_dict(_doge(lambda_std_dev=0.1))
    assert cfg.unknown_keys == ["lambda_std_dev"]


@pytest.mark.parametrize("changes, message", [
    (dict(is_moe=True), r"is_moe: transformers' CDMoE views its router's output"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(keep_window_size=0), "keep_window_size must be a positive integer"),
    (dict(sliding_window=0), "sliding_window must be a positive integer"),
    (dict(mlp_bias="no"), "mlp_bias"),
])
def test_doge_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        doge.Config.from_dict(_doge(**changes))
