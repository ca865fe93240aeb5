"""Opening Hugging Face folders: the errors a user can act on, `petit convert`, and the converted file running the
same numbers as the folder."""
import json
import os
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
ROOT = Path(__file__).parent.parent
CLI = [sys.executable, "-m", "petit.cli"]


def _cli(*args, timeout=120):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


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
    _edit_config(folder, model_type="frobnicator")
    with pytest.raises(ValueError) as e:
        petit.load(folder)
    assert str(e.value) == (f"{folder / 'config.json'}: unsupported model_type 'frobnicator': supported model types are "
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
    r = _cli("convert", folder, "-o", out, flag)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"petit convert: {out}: llama, ") and f"{weights} weights" in r.stderr
    ids = np.load(FIX / "llama" / "reference.npz")["input_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # convert searches the q4_0 scales (petit.load's search=True): loading a folder takes GGML's by default
        direct, converted = petit.load(folder, weights=weights, search=True), petit.load(out)
    assert converted.weight_type == weights
    np.testing.assert_array_equal(converted.logits(ids), direct.logits(ids))
    # self-contained: tokenizer, chat template and generation defaults travel with the file
    assert converted.tokenizer.encode("hello world") == direct.tokenizer.encode("hello world")
    assert converted.metadata.get("chat_template") == direct.metadata.get("chat_template")
    assert converted.metadata.get("generation") == direct.metadata.get("generation")
    # a checksum for every tensor, which loading checked (a file without them would have warned above)
    assert set(converted.metadata["checksums"]["pt64"]) == set(converted._source.tensors)


def test_convert_errors_are_one_line(tmp_path):
    r = _cli("convert", tmp_path / "nope", "-o", tmp_path / "x.petit")
    assert r.returncode == 1 and r.stderr == f"petit convert: error: {tmp_path / 'nope'}: no such file or folder " \
                                             f"(petit convert reads a Hugging Face model folder, a GGUF file or a " \
                                             f".petit file)\n"
    assert not (tmp_path / "x.petit").exists()
    r = _cli("convert", tmp_path, "-o", tmp_path / "x.petit", "--q8", "--q4")
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


def test_convert_to_a_missing_folder_names_the_path_given_and_leaves_nothing(folder, tmp_path):
    """The error named the writer's temporary file (x.petit.tmp-<pid>-0), a name the user never gave."""
    out = tmp_path / "nonexistent" / "dir" / "x.petit"
    r = _cli("convert", folder, "-o", out)
    assert r.returncode == 1
    assert r.stderr == f"petit convert: error: cannot write {out}: folder {out.parent} does not exist\n"
    assert os.listdir(tmp_path) == ["llama"]


TOKENIZER_MISSING = ("{}: tokenizer.json is missing (a Hugging Face model folder needs config.json, the weights and "
                     "tokenizer.json; to load a model without a tokenizer, pass tokenizer=False, or --no-tokenizer to "
                     "petit convert)")


def test_a_folder_without_tokenizer_json_is_refused_unless_asked_for(folder, tmp_path):
    """It loaded with model.tokenizer = None, so the app said "loaded" and failed only at Send; petit convert
    wrote a file without a tokenizer and said nothing."""
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ValueError) as e:
        petit.load(folder)
    assert str(e.value) == TOKENIZER_MISSING.format(folder)
    r = _cli("convert", folder, "-o", tmp_path / "m.petit")
    assert r.returncode == 1 and r.stderr == f"petit convert: error: {TOKENIZER_MISSING.format(folder)}\n"
    assert not (tmp_path / "m.petit").exists()
    # asked for explicitly: a model that takes token ids
    model = petit.load(folder, tokenizer=False, weights="f32")
    ids = np.load(FIX / "llama" / "reference.npz")["input_ids"]
    assert model.tokenizer is None
    np.testing.assert_array_equal(model.logits(ids), petit.load(FIX / "llama", weights="f32").logits(ids))
    r = _cli("convert", folder, "-o", tmp_path / "m.petit", "--no-tokenizer")
    assert r.returncode == 0, r.stderr
    converted = petit.load(tmp_path / "m.petit")
    assert converted.tokenizer is None and "tokenizer" not in converted.metadata


def _poison(folder, name, where):
    """Put NaN / infinity into an f32 tensor of the folder's safetensors at {(row, col): value}."""
    def change(header, body):
        t = header[name]
        assert t["dtype"] == "F32"
        w = np.frombuffer(body, np.float32, int(np.prod(t["shape"])), t["data_offsets"][0]).reshape(t["shape"])
        w = w.copy()
        for (r, c), v in where.items():
            w[r, c] = v
        return body[:t["data_offsets"][0]] + w.tobytes() + body[t["data_offsets"][1]:]
    _rewrite_safetensors(folder / "model.safetensors", change)


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused_naming_the_tensor_and_the_first_one(folder, weights, bad):
    """The quantizers turned them into zeros or block minima, silently."""
    name = "model.layers.1.mlp.down_proj.weight"
    _poison(folder, name, {(40, 3): bad, (5, 70): bad})
    with pytest.raises(ValueError) as e:
        petit.load(folder, weights=weights)
    assert str(e.value) == (f"{folder}: tensor {name!r}: the weight at [5, 70] is {float(bad)} (not a finite "
                            f"number); it cannot be stored as {weights}: the checkpoint is damaged or was saved "
                            f"after training diverged")


def test_a_petit_file_quantized_at_load_names_the_tensor_holding_a_non_finite_weight(folder, tmp_path):
    """A float .petit file converted to q4_0 while it loads goes through the same quantizer as a folder."""
    name = "model.layers.0.self_attn.o_proj.weight"
    _poison(folder, name, {(7, 9): np.inf})
    r = _cli("convert", folder, "-o", tmp_path / "m.petit", "--f32")
    assert r.returncode == 0, r.stderr
    with pytest.raises(ValueError) as e:
        petit.load(tmp_path / "m.petit", weights="q4_0")
    assert str(e.value) == (f"{tmp_path / 'm.petit'}: tensor {name!r}: the weight at [7, 9] is inf (not a finite "
                            f"number); it cannot be stored as q4_0: the checkpoint is damaged or was saved after "
                            f"training diverged")


def test_convert_refuses_non_finite_weights(folder, tmp_path):
    _poison(folder, "model.embed_tokens.weight", {(300, 1): np.nan})
    r = _cli("convert", folder, "-o", tmp_path / "m.petit", "--q4")
    assert r.returncode == 1 and r.stderr == (
        f"petit convert: error: {folder}: tensor 'model.embed_tokens.weight': the weight at [300, 1] is nan (not a "
        f"finite number); it cannot be stored as q4_0: the checkpoint is damaged or was saved after training "
        f"diverged\n")
    assert sorted(os.listdir(tmp_path)) == ["llama"]


def test_what_loading_warns_about_is_also_kept_for_the_app(folder):
    def add(header, body):
        header["model.layers.0.mlp.extra.weight"] = {"dtype": "F32", "shape": [4], "data_offsets": [len(body),
                                                                                                     len(body) + 16]}
        return body + bytes(16)
    _rewrite_safetensors(folder / "model.safetensors", add)
    message = (f"{folder}: ignoring checkpoint tensor(s) the llama family does not use: "
               f"model.layers.0.mlp.extra.weight")
    with pytest.warns(UserWarning) as caught:
        model = petit.load(folder)
    assert [str(w.message) for w in caught] == [message] and model.warnings == [message]
