"""Damaged model files are refused before they answer. Every tensor is checked at load against the checksum its
writer recorded (pt64; older `petit export` files: SHA-256), so a flipped byte anywhere in the weights is an error
naming the tensor. A file that records none loads with a warning saying it cannot be checked, issued as a Python
warning and kept in `model.warnings` for the app to show."""
import os
import shutil
import subprocess
import sys
import warnings

import pytest

import petit
from petit.formats.petit_file import PetitFileError, read_petit, write_petit

import models

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets")


def _flip(path, at: int, n: int = 16) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        data = bytes(b ^ 0xFF for b in f.read(n))
        f.seek(at)
        f.write(data)


def _tensor_at(path, at: int) -> str:
    """The tensor whose bytes hold the file offset `at`."""
    with read_petit(path) as f:
        base = f._data_offset
        return next(n for n, i in f.tensors.items() if base + i.offset <= at < base + i.offset + i.nbytes)


def _damaged_message(path, name, kind="pt64") -> str:
    return f"{path}: tensor {name!r}: damaged: its {kind} checksum is "


def _copy(src, dst, checksums=True, meta_change=None, tensors_change=None):
    """Rewrite src as dst (tensors byte for byte) with the metadata's checksums dropped, then changed."""
    with read_petit(src) as f:
        meta = {k: v for k, v in f.metadata.items() if k != "checksums"}
        tensors = {n: (i.dtype, i.shape, bytes(f.raw(n))) for n, i in f.tensors.items()}
    if meta_change:
        meta_change(meta, tensors)
    write_petit(dst, meta, tensors, checksums=checksums)


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_the_default_model_damaged_mid_file_is_refused_before_any_answer(tmp_path, name):
    """Bytes flipped in the middle of the bundled model: `petit.load` and `petit chat` answered "subtract" to
    "what is 12 plus 7?"."""
    bad = tmp_path / name
    shutil.copy(os.path.join(ASSETS, name), bad)
    at = os.path.getsize(bad) // 2
    _flip(bad, at)
    tensor = _tensor_at(bad, at)
    with pytest.raises(PetitFileError) as e:
        petit.load(bad)
    assert str(e.value).startswith(_damaged_message(bad, tensor))
    assert str(e.value).endswith(", the file records "
                                 f"{read_petit(bad).metadata['checksums']['pt64'][tensor]} (download or convert the "
                                 f"model again)")
    r = subprocess.run([sys.executable, "-m", "petit.cli", "chat", str(bad), "--greedy"], cwd=ROOT,
                       input="what is 12 plus 7?\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == "" and r.stderr == f"petit chat: error: {e.value}\n"
    # asked for explicitly, the damaged file loads (the check is what refused it)
    assert petit.load(bad, verify_checksums=False).warnings == []


def test_any_damaged_tensor_is_named(tmp_path):
    models.write_model(tmp_path / "m.petit", dtype="q8_0")
    with read_petit(tmp_path / "m.petit") as f:
        spans = [(n, f._data_offset + i.offset, i.nbytes) for n, i in f.tensors.items()]
    for name, start, nbytes in spans:
        shutil.copy(tmp_path / "m.petit", tmp_path / "bad.petit")
        _flip(tmp_path / "bad.petit", start + nbytes - 1, 1)          # the last byte of the tensor only
        with pytest.raises(PetitFileError, match="^" + _damaged_message(tmp_path / "bad.petit", name)):
            petit.load(tmp_path / "bad.petit")


def test_a_file_without_checksums_loads_with_a_warning_the_app_can_show(tmp_path):
    models.write_model(tmp_path / "good.petit", dtype="q4_0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert petit.load(tmp_path / "good.petit").warnings == []
    _copy(tmp_path / "good.petit", tmp_path / "old.petit", checksums=False)
    message = (f"{tmp_path / 'old.petit'}: the file records no checksums, so damage to its weights cannot be "
               f"detected (convert or export the model again to add them)")
    with pytest.warns(UserWarning) as caught:
        model = petit.load(tmp_path / "old.petit")
    assert [str(w.message) for w in caught] == [message] and model.warnings == [message]
    assert model.logits([1, 2, 3]).tolist() == petit.load(tmp_path / "good.petit").logits([1, 2, 3]).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert petit.load(tmp_path / "old.petit", verify_checksums=False).warnings == []


def test_files_of_older_exports_are_checked_by_their_sha256(tmp_path):
    """`petit export` recorded only SHA-256 before pt64 existed: those files stay readable, and checked."""
    import hashlib
    models.write_model(tmp_path / "good.petit")

    def sha256_only(meta, tensors):
        meta["checksums"] = {"sha256": {n: hashlib.sha256(t[2]).hexdigest() for n, t in tensors.items()}}
    _copy(tmp_path / "good.petit", tmp_path / "old.petit", checksums=False, meta_change=sha256_only)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert petit.load(tmp_path / "old.petit").warnings == []
    at = read_petit(tmp_path / "old.petit")._data_offset + read_petit(tmp_path / "old.petit").tensors[
        "model.layers.1.self_attn.o_proj.weight"].offset + 100
    _flip(tmp_path / "old.petit", at, 1)
    with pytest.raises(PetitFileError, match="^" + _damaged_message(tmp_path / "old.petit",
                                                                     "model.layers.1.self_attn.o_proj.weight",
                                                                     "sha256")):
        petit.load(tmp_path / "old.petit")


def test_a_checksum_table_that_does_not_match_the_tensors_is_refused(tmp_path):
    models.write_model(tmp_path / "good.petit")
    good = read_petit(tmp_path / "good.petit").metadata["checksums"]["pt64"]

    def drop(meta, tensors):
        meta["checksums"] = {"pt64": {n: c for n, c in good.items() if n != "model.norm.weight"}}

    def extra(meta, tensors):
        meta["checksums"] = {"pt64": dict(good, **{"model.layers.9.mlp.up_proj.weight": "0" * 16})}
    _copy(tmp_path / "good.petit", tmp_path / "a.petit", checksums=False, meta_change=drop)
    with pytest.raises(PetitFileError) as e:
        petit.load(tmp_path / "a.petit")
    assert str(e.value) == (f"{tmp_path / 'a.petit'}: tensor 'model.norm.weight': no pt64 checksum recorded for it "
                            f"in the metadata")
    _copy(tmp_path / "good.petit", tmp_path / "b.petit", checksums=False, meta_change=extra)
    with pytest.raises(PetitFileError) as e:
        petit.load(tmp_path / "b.petit")
    assert str(e.value) == (f"{tmp_path / 'b.petit'}: checksums.pt64: names tensor "
                            f"'model.layers.9.mlp.up_proj.weight', which the file does not hold")


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_the_bundled_models_carry_a_checksum_for_every_tensor(name):
    with read_petit(os.path.join(ASSETS, name)) as f:
        assert set(f.metadata["checksums"]["pt64"]) == set(f.tensors)
        assert f.check_checksums() is None


def test_verify_reports_a_damaged_file_that_records_pt64_only(tmp_path):
    """`petit verify` checked only the SHA-256 of `petit export`: a damaged `petit convert` file was "absent"."""
    from trainer.verify import verify
    models.write_model(tmp_path / "m.petit", dtype="q8_0", seed=1)
    name = "model.layers.0.mlp.up_proj.weight"
    with read_petit(tmp_path / "m.petit") as f:
        assert "sha256" not in f.metadata["checksums"]
        at = f._data_offset + f.tensors[name].offset + 40
    _flip(tmp_path / "m.petit", at, 1)
    r = verify(tmp_path / "m.petit", n=2)
    assert r["checksums"] == "mismatch" and r["bad_tensors"] == [name] and r["pass"] is False
