"""The fam36d group of issue 36 (tests/fixtures/hf5_fam36d, made by transformers 5.25): DiffLlama, what
tests/test_hf_parity.py (35-token prompt, greedy), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0)
and the app's chat test do not already hold for every hf5 fixture.

- Parity at every position of the 140-token and the chat prompts at f32, within 1e-4 of each position's range, and
  the greedy continuation equal to transformers'.
- The forward plan equals the per-op path bit for bit (chunked prefill and decode, float32 and int8 caches).
- Other head layouts than the fixture's (one and three query heads a kv head, four kv heads) against the float64
  reference (trainer/reference), on random weights: the row layout and the pair copies of diff_attn.py.
- What the family reads (each layer's lambda, the doubled q / k / v rows), reports and refuses by name; a converted
  `.petit` file reloads and runs the same numbers.
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
from petit.models import diffllama
from trainer.reference import Reference

from models import load_strict as _load, rel_err
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import CHUNKS, FRESH, _run

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36d"
FOLDER = DIR / "diffllama"
F32_TOL = 1e-4


@pytest.mark.parametrize("prompt", ["long", "chat"])
def test_long_and_chat_prompts_match_transformers_at_every_position(prompt):
    ref = np.load(FOLDER / f"reference_{prompt}.npz")
    assert len(ref["input_ids"]) >= (100 if prompt == "long" else 60)
    err = rel_err(_load(FOLDER).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


def test_greedy_continuation_equals_transformers():
    ref = np.load(FOLDER / "reference.npz")
    model = _load(FOLDER)
    ids = list(ref["input_ids"])
    for want in ref["greedy"]:
        got = int(np.argmax(model.logits(np.array(ids))[-1]))
        assert got == want
        ids.append(got)


@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "f32"), ("f32", "int8")])
def test_the_plan_equals_the_per_op_path(weights, kv):
    model = _load(FOLDER, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, kv, oracle=False)
        want, c_oracle = _run(model, chunks, kv, oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)


def test_decoding_with_the_cache_equals_the_whole_sequence():
    model = _load(FOLDER)
    ids = np.load(FOLDER / "reference_long.npz")["input_ids"]
    whole = model.logits(ids)
    cache = model.new_cache(len(ids))
    steps = [model.forward(ids[:90], cache)] + [model.forward(ids[i:i + 1], cache) for i in range(90, len(ids))]
    assert rel_err(np.stack(steps), whole[89:]).max() <= 1e-5


def test_a_batch_gives_each_sequence_its_own_logits_bit_for_bit():
    """The pair copies, axpy and norm run over the step's stacked rows: a prefill beside a decode step."""
    model = _load(FOLDER)
    ids = np.load(FOLDER / "reference_chat.npz")["input_ids"]
    alone = []
    for part in (ids[:40], ids[40:41]):
        cache = model.new_cache(64)
        if len(part) == 1:
            model.forward(ids[:30], cache)
        alone.append(model.forward(part, cache, all_logits=True))
    a, b = model.new_cache(64), model.new_cache(64)
    model.forward(ids[:30], b)
    got = model.forward_batch([(ids[:40], a), (ids[40:41], b)], all_logits=True)
    for g, w in zip(got, alone):
        np.testing.assert_array_equal(g, w)


def test_reads_each_layers_lambda_and_doubles_the_heads():
    cfg = json.loads((FOLDER / "config.json").read_text())
    raw = _read_safetensors(FOLDER / "model.safetensors")
    net = _load(FOLDER).net
    H, K, d, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
    assert (net.arch.num_attention_heads, net.arch.num_key_value_heads, net.arch.head_dim) == (2 * H, 2 * K, d)
    for i, L in enumerate(net.layers):
        a = f"model.layers.{i}.self_attn."
        q1, k1, q2, k2 = (raw[a + n].astype(np.float64) for n in diffllama.LAMBDAS)
        init = 0.8 - 0.6 * math.exp(-0.3 * i)
        assert L.diff.lam == pytest.approx(np.exp(q1 @ k1) - np.exp(q2 @ k2) + init, abs=1e-6)
        np.testing.assert_array_equal(L.diff.norm.w.a, np.float32(1 - init))
        assert L.q.shape == (2 * H * d, D) and L.k.shape == L.v.shape == (2 * K * d, D) and L.o.shape == (D, H * d)
        for role in "qkv":        # every head twice, the values' halves each in two kv heads
            want = raw[a + f"{role}_proj.weight"][L.diff.rows[role]]
            np.testing.assert_array_equal(L.__dict__[role].raw.view(np.float32).reshape(want.shape), want)
            np.testing.assert_array_equal(L.__dict__[role + "_b"].a, raw[a + f"{role}_proj.bias"][L.diff.rows[role]])
            assert sorted(set(L.diff.rows[role])) == list(range(len(raw[a + f"{role}_proj.bias"])))


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


def test_converted_file_runs_the_same_numbers(tmp_path):
    from petit.cli import main
    out = tmp_path / "d.petit"
    assert main(["convert", str(FOLDER), "-o", str(out), "--q8"]) == 0
    ids = np.load(FOLDER / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_load(out, "q8_0").logits(ids), petit.load(FOLDER, weights="q8_0").logits(ids))


def test_doge_is_refused_naming_what_it_lacks(tmp_path):
    """SmallDoge (`doge`) is not run: its dynamic mask attention (a learned per-key bias in every score, a top-k key
    choice past keep_window_size), per-channel residual scales and CDMoE routing have no kernel here yet."""
    folder = tmp_path / "doge"
    shutil.copytree(FOLDER, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(cfg, model_type="doge", architectures=["DogeForCausalLM"])))
    with pytest.raises(ValueError, match=r"'doge'; the closest family Petit runs is qwen3 \(doge differs: dynamic "
                                         r"mask attention.*exp\(A softplus\(dt_proj v\)\).*keep_window_size.*"
                                         r"input_residual.*CDMoE"):
        petit.load(folder)
