"""The multimodal table of issue 36 (petit/models/multimodal_rows.py, tests/fixtures/hf5_mm made by transformers
5.25): what tests/test_hf_parity.py (f32 logits of every row against its class, greedy, the quantized bounds) and
tests/test_verify_families.py do not already hold.

- The table and its fixtures agree: one folder per row, each made by the row's class, whose logits equal its text
  family's committed fixture's (the wrapper adds nothing to a text prompt).
- A converted file of each kind of layout (the text model under model.language_model / language_model.model /
  model.text_model / llm.model / language_model.backbone, a release's names, the plain head) reloads to the same bits.
- What a row reads: the one warning names the towers, an unknown top-level key is reported, a text_config Petit
  does not run is refused by name; the plain head drops the text family's logit scale.
- The multimodal checkpoints left out are refused saying why.
"""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from models import TOWER_NOT_RUN, load_strict
from petit.models import MODEL_TYPES, MULTIMODAL_ROWS

DIR = Path(__file__).parent / "fixtures" / "hf5_mm"
CASES = json.loads((DIR / "cases.json").read_text())
# one row of each layout: where the text model sits, a release's names, the plain head
LAYOUTS = ["llava", "idefics3", "ovis2_5", "nemotron_h_omni", "qianfan_ocr", "kimi_k25", "minimax_m3_vl",
           "cohere2_vision", "qwen2_audio"]


def test_every_row_has_its_fixture_made_by_its_class_and_nothing_else():
    folders = {p.name for p in DIR.iterdir() if (p / "reference.npz").is_file()}
    assert folders == set(MULTIMODAL_ROWS) == set(CASES)
    for t, row in MULTIMODAL_ROWS.items():
        config = json.loads((DIR / t / "config.json").read_text())
        assert config["model_type"] == t and config["architectures"] == [row.cls], t
        assert config["text_config"]["model_type"] == row.text == CASES[t]["text_model_type"], t
        # the wrapper's logits for a text prompt are its text family's fixture's own (that model's weights)
        assert CASES[t]["max_rel_err_vs_text_fixture_model"] <= 1e-6, t
        assert MODEL_TYPES[t].Config.__name__.endswith("Config")


@pytest.mark.parametrize("case", LAYOUTS)
def test_a_converted_file_runs_the_same_numbers(tmp_path, case):
    """`petit convert --f32` writes the text model's file (its config flat, the wrapper's and the text model's types
    kept), which loads without a warning and gives the folder's logits bit for bit."""
    from petit.cli import main
    out = tmp_path / "converted.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        assert main(["convert", str(DIR / case), "-o", str(out), "--f32"]) == 0
    ids = np.load(DIR / case / "reference.npz")["input_ids"]
    converted, (folder, said) = load_strict(out), _load(DIR / case)
    assert all(re.match(TOWER_NOT_RUN, w) for w in said) and len(said) == 1
    assert (converted.config.model_type, converted.config.text_model_type) == (case, MULTIMODAL_ROWS[case].text)
    np.testing.assert_array_equal(converted.logits(ids), folder.logits(ids))


def _load(folder, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = petit.load(folder, weights="f32", **kw)
    return model, [str(w.message) for w in caught]


def test_the_one_warning_names_the_towers_not_run():
    _, said = _load(DIR / "qwen2_audio")
    assert said == ["config: qwen2_audio: the audio tower (audio_config) is not run; Petit runs the text model "
                    "(text_config) alone, so audio cannot be given"]
    _, said = _load(DIR / "idefics2")
    assert said == ["config: idefics2: the perceiver and vision tower (perceiver_config, vision_config) is not run; "
                    "Petit runs the text model (text_config) alone, so images cannot be given"]


def _copy(tmp_path, case, change):
    d = tmp_path / case
    shutil.copytree(DIR / case, d)
    config = json.loads((d / "config.json").read_text())
    change(config)
    (d / "config.json").write_text(json.dumps(config))
    return d


def test_an_unknown_top_level_key_is_reported_and_the_logits_stay(tmp_path):
    d = _copy(tmp_path, "llava", lambda c: c.update(new_projector_knob=3))
    model, said = _load(d)
    assert "config: ignoring unknown key(s) new_projector_knob" in said
    ref = np.load(DIR / "llava" / "reference.npz")
    np.testing.assert_allclose(model.logits(ref["input_ids"]), ref["logits"], atol=1e-4, rtol=0)


def test_a_text_model_petit_does_not_run_is_refused_by_name(tmp_path):
    d = _copy(tmp_path, "llava", lambda c: c["text_config"].update(model_type="no_such_text_model"))
    with pytest.raises(ValueError, match="config: llava's text_config has model_type 'no_such_text_model', a text "
                                         "model Petit does not run"):
        petit.load(d)
    d = _copy(tmp_path / "x", "llava", lambda c: c["text_config"].update(model_type="llava"))
    with pytest.raises(ValueError, match="llava's text_config has model_type 'llava', a text model Petit does not"):
        petit.load(d)


def test_a_text_config_without_model_type_builds_the_classes_default_text_model(tmp_path):
    d = _copy(tmp_path, "internvl", lambda c: c["text_config"].pop("model_type"))
    model, _ = _load(d)
    assert model.config.text_model_type == "qwen2"
    ref = np.load(DIR / "internvl" / "reference.npz")
    np.testing.assert_allclose(model.logits(ref["input_ids"]), ref["logits"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("case, field", [("cohere2_vision", "logit_scale"), ("granite_speech", "logits_scaling")])
def test_the_plain_head_reads_and_drops_the_text_familys_logit_scaling(case, field):
    config = json.loads((DIR / case / "config.json").read_text())
    assert config["text_config"][field] != 1.0          # the text fixture's own scaling, which the wrapper skips
    model, _ = _load(DIR / case)
    assert getattr(model.config, field) == 1.0


@pytest.mark.parametrize("model_type, what", [
    ("paligemma", "a prefix language model"), ("blip-2", "the language model always reads an image"),
    ("apertus1p5", "ids of the text vocabulary"), ("pi0", "a robot policy")])
def test_the_multimodal_checkpoints_left_out_are_refused_saying_why(tmp_path, model_type, what):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "text_config": {}}))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match=f"unsupported model_type '{model_type}'.*{what}"):
        petit.load(tmp_path)
