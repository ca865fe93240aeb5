"""The fam36b group of issue 36 (tests/fixtures/hf5_fam36b: GPT-NeoX-Japanese and CTRL, made by transformers 5.25): what
tests/test_hf_parity.py (35-token prompt, greedy), test_verify_families.py (`petit verify` at f32 / q8_0 / q4_0) and
the app's chat test do not already hold for every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- What the family reads: the per-head fused query_key_value split, the one output bias (last layer only), the MLP
  width hidden_size * intermediate_multiple_size, transformers 4's rotary_pct / rotary_emb_base spellings; what it
  refuses or reports by name.
- CTRL's sinusoidal position table against its definition; its tied head (the default) reading `w` with the
  separate lm_head.bias; its refusals.
- Mellum: each layer's window, RoPE theta and MLP kind as listed; both spellings of the expert count; Qwen's keys it
  refuses; a converted `.petit` file reloads and runs the same numbers.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.formats.safetensors import SafetensorsFile
from petit.models.families.moe import mellum
from petit.models.families.classic import ctrl, gpt_neox_japanese
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36b"
FOLDER = DIR / "gpt_neox_japanese"
CTRL = DIR / "ctrl"
MELLUM = DIR / "mellum"
F32_TOL = 1e-4


def test_the_fused_qkv_is_split_per_head_and_only_the_last_layer_has_an_output_bias():
    st = SafetensorsFile(FOLDER / "model.safetensors")
    raw = {n: np.array(st.raw(n), dtype=np.float32) for n in (
        "gpt_neox_japanese.layers.0.attention.query_key_value.weight",
        "gpt_neox_japanese.layers.1.attention.dense_bias")}
    st.close()
    model = _load(FOLDER)
    cfg = model.config
    D, H = cfg.hidden_size, cfg.num_attention_heads
    hd = D // H
    assert cfg.intermediate_size == int(D * cfg.intermediate_multiple_size) == 128
    assert cfg.rotary_dim == hd // 2
    fused = raw["gpt_neox_japanese.layers.0.attention.query_key_value.weight"].reshape(H, 3, hd, D)
    layers = model.net.layers
    for j, w in enumerate((layers[0].q, layers[0].k, layers[0].v)):
        np.testing.assert_array_equal(np.asarray(w.dequantize(), dtype=np.float32).reshape(D, D),
                                      fused[:, j].reshape(D, D))
    assert all(L.o_b is None for L in layers[:-1]) and layers[-1].o_b is not None
    np.testing.assert_array_equal(np.asarray(layers[-1].o_b.a, dtype=np.float32),
                                  raw[f"gpt_neox_japanese.layers.{len(layers) - 1}.attention.dense_bias"])
    assert all(L.q_b is None and L.up_b is None and L.down_b is None for L in layers)


def _config(**changes):
    d = json.loads((FOLDER / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_transformers_4_rope_spellings_read_as_aliases():
    d = _config(rope_parameters=None, rotary_pct=0.25, rotary_emb_base=500.0)
    cfg = gpt_neox_japanese.Config.from_dict(d)
    assert (cfg.partial_rotary_factor, cfg.rope_theta, cfg.rotary_dim) == (0.25, 500.0, 4)


def test_transformers_4_folder_spelling_gives_the_same_logits(tmp_path):
    folder = tmp_path / "gnj4"
    shutil.copytree(FOLDER, folder)
    d = _config(rope_parameters=None, rotary_pct=0.5, rotary_emb_base=10000.0)
    (folder / "config.json").write_text(json.dumps(d))
    ref = np.load(FOLDER / "reference.npz")
    err = rel_err(_load(folder).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL


def test_untied_reads_embed_out(tmp_path):
    folder = tmp_path / "untied"
    shutil.copytree(FOLDER, folder)
    (folder / "config.json").write_text(json.dumps(_config(tie_word_embeddings=False)))
    with pytest.raises(Exception, match="embed_out"):
        _load(folder)


@pytest.mark.parametrize("changes, message", [
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
    (dict(num_attention_heads=None), "num_attention_heads"),
    (dict(intermediate_multiple_size=0), "intermediate_multiple_size"),
    (dict(hidden_act="swiglu_nonsense"), "hidden_act"),
])
def test_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        gpt_neox_japanese.Config.from_dict(_config(**changes))


def test_unknown_keys_are_reported():
    with pytest.warns(UserWarning, match="use_flash_attn"):
        cfg = gpt_neox_japanese.Config.from_dict(_config(use_flash_attn=True))
    assert cfg.unknown_keys == ["use_flash_attn"]


def test_ctrl_sinusoid_is_sines_of_the_even_columns_then_cosines_of_the_odd():
    n, d = 7, 10
    got = ctrl.positions(n, d)
    assert got.shape == (n, d) and got.dtype == np.float32
    for p in range(n):
        for c in range(d // 2):
            i_even, i_odd = 2 * c, 2 * c + 1
            assert got[p, c] == pytest.approx(np.sin(p / 10000 ** (2 * (i_even // 2) / d)), abs=1e-7)
            assert got[p, d // 2 + c] == pytest.approx(np.cos(p / 10000 ** (2 * (i_odd // 2) / d)), abs=1e-7)
    model = _load(CTRL)
    assert model.net.pos_embed.shape == (model.config.n_positions, model.config.n_embd)


def test_ctrl_tied_head_reads_w_and_keeps_the_head_bias(tmp_path):
    folder = tmp_path / "tied"
    shutil.copytree(CTRL, folder)
    d = json.loads((CTRL / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(d, tie_word_embeddings=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # lm_head.weight is then left over (reported)
        model = petit.load(folder, weights="f32")
    assert model.net.lm_head is model.net.embed and model.net.lm_head_b is not None


@pytest.mark.parametrize("changes, message", [
    (dict(n_embd=65, n_head=5), "odd"),
    (dict(n_head=3), "not divisible"),
    (dict(dff=0), "dff"),
    (dict(n_layer=None), "n_layer"),
])
def test_ctrl_bad_configs_are_refused_by_name(changes, message):
    d = json.loads((CTRL / "config.json").read_text())
    d.update(changes)
    with pytest.raises(ValueError, match=message):
        ctrl.Config.from_dict({k: v for k, v in d.items() if v is not None})


def test_mellum_reads_each_layers_kinds():
    model = _load(MELLUM)
    layers = model.net.layers
    assert [L.window for L in layers] == [8, 0, 8]
    assert [L.moe is not None for L in layers] == [False, True, True]
    assert layers[0].rope is layers[2].rope and layers[0].rope is not layers[1].rope
    assert (model.config.rope_theta, model.config.rope_local_base_freq, model.config.num_experts) == (500000.0, 100.0, 6)


def _mellum(**changes):
    d = json.loads((MELLUM / "config.json").read_text())
    d.update(changes)
    return {k: v for k, v in d.items() if v is not None}


def test_mellum_takes_either_spelling_of_the_expert_count():
    d = _mellum(num_local_experts=None, num_experts=6)
    assert mellum.Config.from_dict(d).num_experts == 6
    with pytest.raises(ValueError, match="num_experts 5 and num_local_experts 6 differ"):
        mellum.Config.from_dict(_mellum(num_experts=5))


@pytest.mark.parametrize("changes, message", [
    (dict(use_sliding_window=True), "use_sliding_window: not Mellum keys"),
    (dict(mlp_only_layers=[0]), "mlp_only_layers: not Mellum keys"),
    (dict(mlp_layer_types=["dense", "sparse"]), "mlp_layer_types must list 3"),
    (dict(mlp_layer_types=["dense", "moe", "sparse"]), "mlp_layer_types must list 3"),
    (dict(layer_types=["full_attention"] * 2), "layer_types must list 3"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                           "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
     "sliding_attention"),
])
def test_mellum_bad_configs_are_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        mellum.Config.from_dict(_mellum(**changes))


def test_mellum_mtp_keys_are_not_reported():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mellum.Config.from_dict(_mellum(num_mtp_layers=1, mtp_layer_types=["sliding_attention"]))


def test_mellum_converted_file_runs_the_same_numbers(tmp_path):
    from petit.cli import main
    out = tmp_path / "m.petit"
    assert main(["convert", str(MELLUM), "-o", str(out), "--f32"]) == 0
    ids = np.load(MELLUM / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(_load(out).logits(ids), _load(MELLUM).logits(ids))
