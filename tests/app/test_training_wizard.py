"""The training wizard (app.training.TrainPanel) end to end on a tiny corpus: train with the live loss plot, then
export, verify and chat through the Export and Verify panels; pause, cancel and closing keep a checkpoint; every
thread ends. Runs take seconds: the tiny preset, 20-odd steps."""
import json
import os

import pytest
from PySide6.QtWidgets import QTabWidget

from app.training import ExportPanel, TrainPanel, VerifyPanel
from app.training.hub import TrainingHub
from app.training.run import TrainRun
from trainer.checkpoint import load_checkpoint

TIMEOUT_MS = 30000
TEXT = ("The quick brown fox jumps over the lazy dog. A small model learns to spell what it reads. "
        "Once upon a time there was a tiny language model that ran on a laptop.\n") * 60


@pytest.fixture
def panels(qtbot, workers):
    """The Train, Export and Verify panels sharing a hub, as tabs of one QTabWidget (as in the window)."""
    hub = TrainingHub()
    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    train, export, verify = TrainPanel(hub=hub), ExportPanel(hub=hub), VerifyPanel(hub=hub)
    for panel, title in ((train, "Train"), (export, "Export"), (verify, "Verify")):
        tabs.addTab(panel, title)
    tabs.resize(1100, 700)
    tabs.show()
    yield tabs, train, export, verify
    for panel in (train, export, verify):
        panel.shutdown()


def tiny(train: TrainPanel, steps: int, text_file=None, tokenizer="char"):
    form = train.form
    if text_file is not None:
        form.set_corpus_file(str(text_file))
    else:
        form.chat_button.setChecked(True)
        form.examples.setValue(300)
    form.tokenizer.setCurrentIndex(form.tokenizer.findData(tokenizer))
    form.preset_box.setCurrentIndex(form.preset_box.findData("tiny"))
    form.steps.setValue(steps)


def last_step(train: TrainPanel) -> int:
    return train.train_series.points[-1][0] if train.train_series.points else 0


def wait_done(qtbot, train: TrainPanel) -> dict:
    qtbot.waitUntil(lambda: not train.running and train.result is not None, timeout=TIMEOUT_MS)
    return train.result


def test_the_wizard_trains_exports_verifies_and_chats(qtbot, panels, tmp_path):
    tabs, train, export, verify = panels
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    tiny(train, 20, corpus)
    assert "of text" in train.form.file_info.text()
    qtbot.waitUntil(lambda: "tokens/s" in train.form.estimate.text(), timeout=TIMEOUT_MS)
    assert "parameters" in train.form.estimate.text() and "for 20 steps" in train.form.estimate.text()

    train.start_button.click()
    assert train.running and not train.start_button.isEnabled() and not train.form.preset_box.isEnabled()
    r = wait_done(qtbot, train)
    assert r["step"] == 20 and not r["interrupted"] and train.error.text() == ""
    assert [s for s, _ in train.train_series.points] == list(range(1, 21))     # every step's loss is plotted
    assert [s for s, _ in train.val_series.points] == [5, 10, 15, 20]
    assert train.progress.value() == 20 and "tokens/s" in train.stats.text() and "Done" in train.status.text()
    ckpt = load_checkpoint(r["checkpoint"])
    assert ckpt.step == 20 and ckpt.tokenizer["type"] == "char" and ckpt.data["source"] == "file"

    # Export: the checkpoint came over; three files, their sizes and ratios shown
    train.export_button.click()
    assert tabs.currentWidget() is export and export.checkpoint_edit.text() == r["checkpoint"]
    assert "step 20 of 20" in export.checkpoint_info.text()
    export.export_button.click()
    qtbot.waitUntil(lambda: export.export_button.isEnabled() and len(export.results) == 3, timeout=TIMEOUT_MS)
    assert export.error.text() == ""
    by_label = {s["label"]: s for s in export.results}
    assert set(by_label) == {"fp32", "q8_0", "q4_0"}
    for row in range(3):
        label, size, ratio, path = (export.table.item(row, c).text() for c in range(4))
        s = by_label[label]
        assert os.path.getsize(path) == s["bytes"] and s["path"] == path
        from trainer.export import format_size
        assert size == format_size(s["bytes"]) and ratio == f"{100 * s['ratio']:.1f} %"
    assert by_label["fp32"]["ratio"] == 1.0
    assert by_label["q4_0"]["bytes"] < by_label["q8_0"]["bytes"] < by_label["fp32"]["bytes"]

    # Verify the selected (q8_0) file: PASS, with the error at every position plotted
    assert export.selected_path() == by_label["q8_0"]["path"]
    export.verify_button.click()
    assert tabs.currentWidget() is verify and verify.model_edit.text() == by_label["q8_0"]["path"]
    verify.verify_button.click()
    qtbot.waitUntil(lambda: verify.result is not None, timeout=TIMEOUT_MS)
    result = verify.result
    assert result["pass"] and verify.verdict.text() == "VERIFY PASS"
    assert f"position {result['worst_position']}" in verify.details["worst"].text()
    assert f"{result['argmax_matches']} of {result['positions']}" in verify.details["argmax"].text()
    errors = [e for _, e in verify.error_series.points]
    assert len(errors) == result["positions"]
    assert max(errors) == pytest.approx(result["max_rel_err"], rel=1e-6)

    # Chat with this model, from the Export panel and from the Train panel (which exports q8_0 itself)
    with qtbot.waitSignal(export.chat_with_model, timeout=TIMEOUT_MS) as signal:
        export.chat_button.click()
    assert signal.args == [by_label["q8_0"]["path"]]
    os.remove(by_label["q8_0"]["path"])
    with qtbot.waitSignal(train.chat_with_model, timeout=TIMEOUT_MS) as signal:
        train.chat_button.click()
    assert signal.args == [by_label["q8_0"]["path"]] and os.path.isfile(signal.args[0])


def test_pause_resume_and_cancel_keep_a_checkpoint_and_continue_resumes(qtbot, panels):
    _, train, export, _ = panels
    tiny(train, 2000, tokenizer="bpe")
    train.form.vocab.setValue(300)
    train.start()
    qtbot.waitUntil(lambda: last_step(train) >= 3, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(train.run.paused, timeout=TIMEOUT_MS) as paused:
        train.pause_button.click()
    step = paused.args[0]
    assert train.pause_button.text() == "Resume" and "Paused after step" in train.status.text()
    qtbot.wait(300)
    assert last_step(train) == step                                 # nothing trains while paused
    train.pause_button.click()                                      # resume
    qtbot.waitUntil(lambda: last_step(train) >= step + 2, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(train.run.paused, timeout=TIMEOUT_MS) as paused:
        train.pause()
    step = paused.args[0]
    train.cancel_button.click()                                     # cancel while paused: saves
    r = wait_done(qtbot, train)
    assert r["interrupted"] and r["step"] == step and "Stopped at step" in train.status.text()
    ckpt = load_checkpoint(r["checkpoint"])
    assert ckpt.step == step and len(ckpt.history["loss"]) == step
    assert export.checkpoint_edit.text() == r["checkpoint"]         # handed to the Export panel

    train.form.steps.setValue(step)                                 # not more than done: refused
    train.continue_button.click()
    assert not train.running and "more steps" in train.error.text()
    train.form.steps.setValue(step + 4)
    train.continue_button.click()
    r = wait_done(qtbot, train)
    assert not r["interrupted"] and r["step"] == step + 4 and os.path.samefile(r["checkpoint"], ckpt.path)
    assert load_checkpoint(r["checkpoint"]).history["loss"][:step] == ckpt.history["loss"]
    assert last_step(train) == step + 4


def test_closing_while_training_saves_a_checkpoint_and_joins_the_thread(qtbot, panels):
    _, train, _, _ = panels
    tiny(train, 2000)
    folder = train.form.folder()
    train.start()
    run = train.run
    qtbot.waitUntil(lambda: last_step(train) >= 2, timeout=TIMEOUT_MS)
    train.shutdown()
    assert run.worker.isFinished() and train.run is None
    with open(os.path.join(folder, "checkpoint", "config.json")) as f:
        assert 2 <= json.load(f)["step"] < 2000


def test_a_bad_corpus_is_a_message_not_a_crash(qtbot, panels, tmp_path):
    _, train, _, _ = panels
    tiny(train, 5, tmp_path / "missing.txt")
    train.start()
    assert not train.running and "is not a file" in train.error.text()
    small = tmp_path / "small.txt"
    small.write_text("too short", encoding="utf-8")
    train.form.set_corpus_file(str(small))
    train.start()
    qtbot.waitUntil(lambda: not train.running, timeout=TIMEOUT_MS)
    assert train.error.text() and train.status.text() == "Training failed."
    assert train.start_button.isEnabled() and train.checkpoint is None


def record_stages(monkeypatch) -> list:
    """Every status line the runs report, in order (connected before each run's thread starts)."""
    seen = []

    def start(self, *args, _orig=TrainRun.start):
        self.stage_changed.connect(seen.append)
        return _orig(self, *args)
    monkeypatch.setattr(TrainRun, "start", start)
    return seen


def test_the_train_tab_says_what_it_does_from_the_start_and_save_in_is_where_the_checkpoint_goes(qtbot, panels,
                                                                                                 monkeypatch):
    _, train, _, _ = panels
    seen = record_stages(monkeypatch)
    tiny(train, 4, tokenizer="bpe")
    train.form.vocab.setValue(300)
    shown = train.form.folder()
    train.start()
    assert train.status.text() in ("Starting…", "Waiting for this computer's speed measurement to end…")
    folder = os.path.dirname(train.spec.checkpoint_dir)
    assert folder == shown and train.form.folder_edit.text() == folder          # "Save in" = where it goes
    r = wait_done(qtbot, train)
    assert seen == ["Generating the built-in chat corpus (300 dialogues)…",
                    "Learning the BPE tokenizer (vocabulary 300) from the corpus…",
                    "Tokenizing the corpus and running the first step…", "Training…"]
    assert r["checkpoint"] == os.path.join(folder, "checkpoint") and train.form.folder_edit.text() == folder
    assert len(load_checkpoint(r["checkpoint"]).tokenizer["vocab"]) == 300

    seen.clear()                                                      # a second run: a new folder, shown
    train.form.tokenizer.setCurrentIndex(train.form.tokenizer.findData("char"))
    train.start()
    second = os.path.dirname(train.spec.checkpoint_dir)
    assert second != folder and train.form.folder_edit.text() == second
    r = wait_done(qtbot, train)
    assert r["checkpoint"] == os.path.join(second, "checkpoint")
    assert seen[1] == "Building the character tokenizer from the corpus…"

    seen.clear()
    train.form.folder_edit.setText(folder)                            # Continue: it shows the run it continues
    train.form.steps.setValue(6)
    train.continue_button.click()
    assert train.form.folder_edit.text() == second
    r = wait_done(qtbot, train)
    assert r["step"] == 6 and r["checkpoint"] == os.path.join(second, "checkpoint")
    assert seen == ["Generating the built-in chat corpus (300 dialogues)…",
                    "Loading the checkpoint, tokenizing the corpus and running the first step…", "Training…"]
