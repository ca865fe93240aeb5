"""The fam36a group of issue 36 (tests/fixtures/hf5_fam36a, made by transformers 5.25): OpenAI GPT (GPT-1), what
tests/test_hf_parity.py (35-token prompt, greedy), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0)
and the app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The forward plan equals the per-op path bit for bit.
- What the family reads (post-LN blocks, no final norm, `afn` "gelu" as the tanh approximation) and refuses.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import petit

from test_plan import CHUNKS, FRESH, _run
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36a"
FOLDER = DIR / "openai-gpt"
F32_TOL = 1e-4


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_the_plan_equals_the_per_op_path(weights):
    model = _load(FOLDER, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks
        assert np.array_equal(c_plan.k, c_oracle.k) and np.array_equal(c_plan.v, c_oracle.v)


def test_reads_post_ln_blocks_without_a_final_norm():
    cfg = json.loads((FOLDER / "config.json").read_text())
    net = _load(FOLDER).net
    D = cfg["n_embd"]
    assert net.final_norm is None and net.pos_embed.shape == (cfg["n_positions"], D)
    assert net.arch.act == "gelu_tanh" and net.arch.head_dim == D // cfg["n_head"]
    for L in net.layers:
        assert L.attn_norm is None and L.mlp_norm is None
        assert L.resid_attn_norm is not None and L.resid_mlp_norm is not None
        assert L.q.shape == (D, D) and L.up.shape == (4 * D, D) and L.rope is None


def _variant(tmp_path, **change) -> Path:
    d = tmp_path / "openai-gpt"
    shutil.copytree(FOLDER, d)
    cfg = json.loads((FOLDER / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, **change)))
    return d


def test_afn_relu_changes_the_logits(tmp_path):
    ref = np.load(FOLDER / "reference.npz")
    got = _load(_variant(tmp_path, afn="relu")).logits(ref["input_ids"])
    assert rel_err(got, ref["logits"]).max() > 0.05


def test_an_unknown_key_is_reported_and_the_released_configs_keys_are_not(tmp_path):
    with pytest.warns(UserWarning, match="ignoring unknown key.*scale_attn_weights"):
        petit.load(_variant(tmp_path, scale_attn_weights=False))
    _load(_variant(tmp_path / "released", n_ctx=256, n_special=0, predict_special_tokens=True))


@pytest.mark.parametrize("change, message", [
    (dict(afn="gelu_fast"), "afn 'gelu_fast' is not supported by the openai-gpt family"),
    (dict(n_head=5), "n_embd 64 is not divisible by n_head 5"),
])
def test_refuses_what_it_cannot_run(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        petit.load(_variant(tmp_path, **change))


# XGLM (the second case of the fixture folder)
XGLM = DIR / "xglm"


@pytest.mark.parametrize("prompt", ["long", "chat"])
def test_xglm_long_and_chat_prompts_match_transformers_at_every_position(prompt):
    ref = np.load(XGLM / f"reference_{prompt}.npz")
    assert len(ref["input_ids"]) >= (100 if prompt == "long" else 60)
    err = rel_err(_load(XGLM).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
def test_xglm_plan_equals_the_per_op_path(weights):
    model = _load(XGLM, weights)
    for chunks in (CHUNKS, FRESH):
        got, c_plan = _run(model, chunks, "f32", oracle=False)
        want, c_oracle = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks


def test_xglm_sinusoids_are_fairseqs_table():
    """Position p reads row p + 2 of [sin | cos](p' * 10000^(-i / (D/2 - 1))), the pad row zeroed (computed here in
    float64 from the formula, independently of petit/models/families/classic/xglm.py)."""
    cfg = json.loads((XGLM / "config.json").read_text())
    D, n = cfg["d_model"], cfg["max_position_embeddings"]
    net = _load(XGLM).net
    ang = (np.arange(n) + 2.0)[:, None] * np.exp(-np.log(10000.0) * np.arange(D // 2) / (D // 2 - 1))[None, :]
    want = np.concatenate([np.sin(ang), np.cos(ang)], axis=1)
    assert net.pos_embed.shape == (n, D)
    np.testing.assert_allclose(net.pos_embed, want, atol=2e-4)
    assert net.arch.embed_scale == np.sqrt(D) and net.final_norm is not None


def test_xglm_pad_row_and_refusals(tmp_path):
    from petit.models.families.classic.xglm import Config, sinusoids
    cfg = json.loads((XGLM / "config.json").read_text())
    table = sinusoids(Config.from_dict(dict(cfg, pad_token_id=5)))
    assert (table[3] == 0).all() and (table[2] != 0).any()     # row 5 is position 3's
    d = tmp_path / "xglm"
    shutil.copytree(XGLM, d)
    for change, message in ((dict(add_cross_attention=True), "add_cross_attention=true is not supported"),
                            (dict(attention_heads=5), "d_model 64 is not divisible by attention_heads 5"),
                            (dict(activation_function="gelu_fast2"), "activation_function 'gelu_fast2' is not")):
        (d / "config.json").write_text(json.dumps(dict(cfg, **change)))
        with pytest.raises(ValueError, match=message):
            petit.load(d)


# BioGPT (the third case)
BIOGPT = DIR / "biogpt"


@pytest.mark.parametrize("prompt", ["long", "chat"])
def test_biogpt_long_and_chat_prompts_match_transformers_at_every_position(prompt):
    ref = np.load(BIOGPT / f"reference_{prompt}.npz")
    assert len(ref["input_ids"]) >= (100 if prompt == "long" else 60)
    err = rel_err(_load(BIOGPT).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


def test_biogpt_plan_equals_the_per_op_path():
    model = _load(BIOGPT, "q8_0")
    for chunks in (CHUNKS, FRESH):
        got, _ = _run(model, chunks, "f32", oracle=False)
        want, _ = _run(model, chunks, "f32", oracle=True)
        assert np.isfinite(want).all() and np.array_equal(got, want), chunks


def test_biogpt_reads_positions_at_plus_2_and_ignores_layer_norm_eps(tmp_path):
    cfg = json.loads((BIOGPT / "config.json").read_text())
    assert cfg["layer_norm_eps"] == 1e-12                    # the fixture's: read nowhere by transformers
    net = _load(BIOGPT).net
    assert net.pos_embed.shape == (cfg["max_position_embeddings"], cfg["hidden_size"])
    assert net.final_norm.eps == 1e-5 and all(L.attn_norm.eps == 1e-5 for L in net.layers)
    d = tmp_path / "biogpt"
    shutil.copytree(BIOGPT, d)
    (d / "config.json").write_text(json.dumps(dict(cfg, hidden_act="gelu_fast2")))
    with pytest.raises(ValueError, match="hidden_act 'gelu_fast2' is not supported by the biogpt family"):
        petit.load(d)
