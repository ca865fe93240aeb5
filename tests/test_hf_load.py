"""Opening Hugging Face folders: the errors a user can act on, `petit convert`, and the converted file running the
same numbers as the folder."""
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.models import MODEL_TYPES

FIX = Path(__file__).parent / "fixtures" / "hf"


@pytest.fixture
def folder(tmp_path):
    """A writable copy of the llama fixture."""
    dst = tmp_path / "llama"
    shutil.copytree(FIX / "llama", dst)
    return dst


def _edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (folder / "config.json").write_text(json.dumps(cfg))


def test_unknown_model_type_lists_the_supported_ones(folder):
    _edit_config(folder, model_type="mamba")
    with pytest.raises(ValueError) as e:
        petit.load(folder)
    assert str(e.value) == (f"{folder / 'config.json'}: unsupported model_type 'mamba': supported model types are "
                            f"{', '.join(sorted(MODEL_TYPES))}")


def test_a_feature_we_do_not_implement_is_named(folder):
    _edit_config(folder, hidden_act="relu")
    with pytest.raises(ValueError, match=r"config.json: config: hidden_act 'relu' is not supported by the llama family"):
        petit.load(folder)
    _edit_config(folder, hidden_act="silu", rope_scaling={"rope_type": "su-per", "factor": 2.0})
    with pytest.raises(ValueError, match=r"rope_scaling type 'su-per' is not supported \(supported: default, linear, "):
        petit.load(folder)


def test_a_pre_quantized_checkpoint_is_refused(folder):
    _edit_config(folder, quantization_config={"quant_method": "gptq", "bits": 4})
    with pytest.raises(ValueError, match=r"quantization_config \(gptq\): pre-quantized checkpoints are not supported"):
        petit.load(folder)


def test_unknown_config_keys_are_reported_not_dropped(folder):
    _edit_config(folder, frobnicate=3)
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) frobnicate"):
        model = petit.load(folder)
    assert model.config.unknown_keys == ["frobnicate"]


def test_missing_files_are_named(folder, tmp_path):
    (folder / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"model\.safetensors\.index\.json.*model\.safetensors.*pytorch_model\.bin"):
        petit.load(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"empty: config.json is missing"):
        petit.load(empty)


def test_corrupt_config_names_the_line(folder):
    (folder / "config.json").write_text('{\n  "model_type": "llama",\n  "hidden_size": 64,,\n}')
    with pytest.raises(ValueError, match=r"config.json: not valid JSON: .* at line 3"):
        petit.load(folder)


def _rewrite_safetensors(path, change):
    """Rewrite a safetensors file with `change(header)` applied to its JSON header (tensors unchanged)."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    body = change(header, body)
    h = json.dumps(header).encode()
    path.write_bytes(len(h).to_bytes(8, "little") + h + body)


def test_a_missing_tensor_is_named(folder):
    def drop(header, body):
        header.pop("model.layers.1.mlp.up_proj.weight")
        return body
    _rewrite_safetensors(folder / "model.safetensors", drop)
    with pytest.raises(ValueError, match=r"tensor 'model\.layers\.1\.mlp\.up_proj\.weight' is missing"):
        petit.load(folder)


def test_a_shape_mismatch_names_tensor_expected_and_found(folder):
    def reshape(header, body):
        t = header["model.norm.weight"]
        t["shape"] = [t["shape"][0] // 2, 2]
        return body
    _rewrite_safetensors(folder / "model.safetensors", reshape)
    D = json.loads((folder / "config.json").read_text())["hidden_size"]
    with pytest.raises(ValueError, match=rf"tensor 'model\.norm\.weight' has shape \({D // 2}, 2\), expected \({D},\)"):
        petit.load(folder)


@pytest.mark.parametrize("weights", ["q8_0", "q4_0", "f32"])
def test_convert_writes_a_file_that_runs_the_same_numbers(folder, tmp_path, weights):
    flag = {"q8_0": "--q8", "q4_0": "--q4", "f32": "--f32"}[weights]
    out = tmp_path / f"m-{weights}.petit"
    r = subprocess.run([sys.executable, "-m", "petit.cli", "convert", str(folder), "-o", str(out), flag],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"petit convert: {out}: llama, ") and f"{weights} weights" in r.stderr
    ids = np.load(FIX / "llama" / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        direct, converted = petit.load(folder, weights=weights), petit.load(out)
    assert converted.weight_type == weights
    np.testing.assert_array_equal(converted.logits(ids), direct.logits(ids))
    # self-contained: tokenizer, chat template and generation defaults travel with the file
    assert converted.tokenizer.encode("hello world") == direct.tokenizer.encode("hello world")
    assert converted.metadata.get("chat_template") == direct.metadata.get("chat_template")
    assert converted.metadata.get("generation") == direct.metadata.get("generation")


def test_convert_errors_are_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "petit.cli", "convert", str(tmp_path / "nope"), "-o",
                        str(tmp_path / "x.petit")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr == f"petit convert: error: {tmp_path / 'nope'}: not a folder (petit convert " \
                                             f"reads a Hugging Face model folder)\n"
    assert not (tmp_path / "x.petit").exists()
    r = subprocess.run([sys.executable, "-m", "petit.cli", "convert", str(tmp_path), "-o", str(tmp_path / "x.petit"),
                        "--q8", "--q4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
