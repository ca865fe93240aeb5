"""The Export and Verify panels on their own: only the weight types asked for, a checkpoint that is not one, a
damaged model file (VERIFY FAIL), a missing one (the verifier's message), and the error plot's PASS limit."""
import io
import os

import pytest

from app.training import ExportPanel, VerifyPanel
from app.training.hub import TrainingHub
from trainer.chat_corpus import make_split
from trainer.train import TrainConfig, train

TIMEOUT_MS = 30000


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny chat model trained for 12 steps (about a second)."""
    out = tmp_path_factory.mktemp("run") / "checkpoint"
    config = TrainConfig(vocab_size=300, n_layers=2, dim=64, n_heads=4, n_kv_heads=2, ffn_dim=192, context=64,
                         batch_size=8, steps=12, eval_interval=6, eval_tokens=2048, checkpoint_interval=0)
    train(config, make_split(3, 300).train_text, chat=True, out_dir=out, progress=False, log=io.StringIO())
    return str(out)


@pytest.fixture
def hub():
    return TrainingHub()


@pytest.fixture
def export(qtbot, hub, workers):
    panel = ExportPanel(hub=hub)
    qtbot.addWidget(panel)
    panel.show()
    yield panel
    panel.shutdown()


@pytest.fixture
def verify(qtbot, hub, workers):
    panel = VerifyPanel(hub=hub)
    qtbot.addWidget(panel)
    panel.show()
    yield panel
    panel.shutdown()


def export_and_wait(qtbot, panel):
    panel.export_button.click()
    qtbot.waitUntil(lambda: panel.export_button.isEnabled(), timeout=TIMEOUT_MS)


def verify_and_wait(qtbot, panel):
    panel.verify_button.click()
    qtbot.waitUntil(lambda: panel.verify_button.isEnabled(), timeout=TIMEOUT_MS)


def test_export_writes_only_the_types_asked_for_and_hands_the_file_to_verify(qtbot, export, verify, hub, checkpoint,
                                                                             tmp_path):
    hub.checkpoint_saved.emit(checkpoint)
    assert export.checkpoint_edit.text() == checkpoint and "chat model" in export.checkpoint_info.text()
    assert export.stem_edit.text() == os.path.basename(os.path.dirname(checkpoint))
    export.folder_edit.setText(str(tmp_path / "out"))
    export.stem_edit.setText("mine")
    export.kind_boxes["f32"].setChecked(False)
    export_and_wait(qtbot, export)
    assert [s["label"] for s in export.results] == ["q8_0", "q4_0"]
    assert sorted(os.listdir(tmp_path / "out")) == ["mine-q4_0.petit", "mine-q8_0.petit"]
    for s in export.results:          # the ratio to fp32 without writing the fp32 file
        assert 0.1 < s["ratio"] < 0.35 and s["fp32_bytes"] > s["bytes"]
    assert verify.model_edit.text() == str(tmp_path / "out" / "mine-q8_0.petit")
    for box in export.kind_boxes.values():
        box.setChecked(False)
    assert not export.export_button.isEnabled()


def test_export_of_a_folder_that_is_no_checkpoint_says_so(qtbot, export, tmp_path):
    export.set_checkpoint(str(tmp_path))
    assert "no checkpoint here" in export.checkpoint_info.text()
    export_and_wait(qtbot, export)
    assert export.results == [] and export.error.text() and export.status.text() == "Export failed."
    assert not export.chat_button.isEnabled()


def files_under(root) -> list:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("name", ["../escaped", "sub/inner", "..\\escaped", "ABSOLUTE"])
def test_a_name_that_is_a_path_is_refused_and_nothing_is_written_outside_the_folder(qtbot, export, checkpoint,
                                                                                    tmp_path, name):
    """The Name field names files inside "Save in": a name with a folder separator or an absolute path would
    write elsewhere, so it is refused with a message and nothing is written anywhere."""
    if name == "ABSOLUTE":
        name = str(tmp_path / "elsewhere" / "abs")
    folder = tmp_path / "out" / "inside"
    export.set_checkpoint(checkpoint)
    export.folder_edit.setText(str(folder))
    export.stem_edit.setText(name)
    before = files_under(tmp_path)
    export.export_button.click()
    qtbot.waitUntil(lambda: export.export_button.isEnabled(), timeout=TIMEOUT_MS)
    assert export.results == [] and export.status.text() == "Nothing was exported."
    assert export.error.text() == (f"The name {name!r} contains a folder separator (/ or \\): give a plain file "
                                   f"name; the files are written in the \"Save in\" folder.")
    assert files_under(tmp_path) == before
    export.stem_edit.setText("..plain")               # dots alone are a name, written inside the folder
    export.kind_boxes["f32"].setChecked(False)
    export.kind_boxes["q4_0"].setChecked(False)
    export_and_wait(qtbot, export)
    assert export.error.text() == "" and os.listdir(folder) == ["..plain-q8_0.petit"]
    assert files_under(tmp_path) == sorted(before + [os.path.join("out", "inside", "..plain-q8_0.petit")])


def test_verify_fails_a_damaged_file_and_reports_a_missing_one(qtbot, export, verify, checkpoint, tmp_path):
    export.set_checkpoint(checkpoint)
    export.folder_edit.setText(str(tmp_path))
    for w in ("q8_0", "q4_0"):
        export.kind_boxes[w].setChecked(False)
    export_and_wait(qtbot, export)
    good = export.results[0]["path"]
    verify_and_wait(qtbot, verify)
    assert verify.verdict.text() == "VERIFY PASS" and verify.result["weights"] == "f32"
    assert verify.plot.lines[0][1] == verify.result["thresholds"]["max_rel_err"]

    data = bytearray(open(good, "rb").read())
    data[-100] ^= 0x40                                   # a bit of the last tensor (the final norm's weights)
    bad = tmp_path / "damaged.petit"
    bad.write_bytes(bytes(data))
    verify.set_model(str(bad))
    verify_and_wait(qtbot, verify)
    assert verify.verdict.text() == "VERIFY FAIL" and not verify.result["pass"]
    assert "checksums" in verify.details["failures"].text()
    assert "MISMATCH" in verify.details["checksums"].text()

    verify.set_model(str(tmp_path / "nothing.petit"))
    verify_and_wait(qtbot, verify)
    assert verify.result is None and "nothing.petit" in verify.verdict.text()
    assert verify.status.text() == "The verifier could not run."


def test_verify_chat_with_this_model(qtbot, verify, tmp_path):
    verify.set_model(str(tmp_path / "m.petit"))
    with qtbot.waitSignal(verify.chat_with_model) as signal:
        verify.chat_button.click()
    assert signal.args == [str(tmp_path / "m.petit")]


def test_the_generated_text_stops_at_the_end_of_the_models_turn(qtbot, verify):
    """The verifier compares logits past the end-of-turn token, but what follows it is not the model's answer:
    "Generated" shows the answer and the marker that ended it, nothing past it."""
    from petit.assets import default_model_path
    verify.set_model(default_model_path())
    verify_and_wait(qtbot, verify)
    assert verify.result["generated_text"].startswith("19<|im_end|>") and len(verify.result["generated_text"]) > 12
    assert verify.details["generated"].text() == "'19', then <|im_end|> (the end of the model's turn)"
