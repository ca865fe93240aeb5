"""The Fine-tune tab (issue 33): a LoRA run on a tiny model streams its losses into the plot, writes the adapter, and
a run paused and continued writes the same adapter byte for byte as one never paused; "Merge and chat" hands the
chat a merged q8_0 model."""
import json
import os

import petit
from app.training.finetune_panel import FinetunePanel
from app_helpers import HF_FIXTURES

FACTS = os.path.join(os.path.dirname(HF_FIXTURES), "lora5", "facts.jsonl")
MODEL = os.path.join(HF_FIXTURES, "qwen3")
WAIT_MS = 120000


def _panel(qtbot, output):
    panel = FinetunePanel()
    qtbot.addWidget(panel)
    panel.model_edit.setText(MODEL)
    panel.data_edit.setText(FACTS)
    panel.output_edit.setText(str(output))
    panel.rank.setValue(2)
    panel.epochs.setValue(2)
    panel.batch.setValue(4)
    panel.ctx.setValue(48)
    panel.lr.setValue(0.003)
    return panel


def _finish(qtbot, panel):
    qtbot.waitUntil(lambda: not panel.running, timeout=WAIT_MS)


def test_a_run_plots_its_losses_and_writes_the_adapter_and_a_paused_one_the_same(qtbot, tmp_path):
    panel = _panel(qtbot, tmp_path / "straight.lora")
    assert not panel.chat_button.isEnabled() and not panel.continue_button.isEnabled()
    panel.start_button.click()
    assert panel.running and panel.pause_button.isEnabled() and not panel.start_button.isEnabled()
    _finish(qtbot, panel)
    steps = panel.progress.maximum()
    assert steps > 2 and [x for x, _ in panel.train_series.points] == list(range(1, steps + 1))
    assert [x for x, _ in panel.val_series.points] == [steps // 2, steps]       # the held-out loss after each epoch
    assert panel.status.text().startswith(f"Done: {tmp_path / 'straight.lora'} written, held-out loss ")
    assert panel.error.text() == "" and panel.chat_button.isEnabled()
    straight = (tmp_path / "straight.lora").read_bytes()
    panel.shutdown()

    paused = _panel(qtbot, tmp_path / "paused.lora")
    paused.start_button.click()
    qtbot.waitUntil(lambda: len(paused.train_series.points) >= 1, timeout=WAIT_MS)
    paused.pause_button.click()
    _finish(qtbot, paused)
    assert paused.status.text().startswith("Paused at step ") and paused.continue_button.isEnabled()
    assert (tmp_path / "paused.lora.run" / "config.json").exists() and not (tmp_path / "paused.lora").exists()
    paused.continue_button.click()
    _finish(qtbot, paused)
    assert paused.status.text().startswith("Done: ") and paused.error.text() == ""
    assert (tmp_path / "paused.lora").read_bytes() == straight
    assert not (tmp_path / "paused.lora.run").exists()          # a finished run's checkpoint is let go

    # paused, then the app closed: a new window's Start continues the run where it stopped
    first = _panel(qtbot, tmp_path / "restarted.lora")
    first.start_button.click()
    qtbot.waitUntil(lambda: len(first.train_series.points) >= 2, timeout=WAIT_MS)
    first.shutdown()                                              # closing the window pauses the run
    assert (tmp_path / "restarted.lora.run" / "config.json").exists()
    again = _panel(qtbot, tmp_path / "restarted.lora")
    again.rank.setValue(3)
    again.start_button.click()
    _finish(qtbot, again)
    assert again.error.text() == (f"checkpoint {tmp_path / 'restarted.lora.run'} was made with other settings: rank 2 "
                                  f"(now 3), alpha 4.0 (now 6.0). It is an unfinished run of restarted.lora: set its "
                                  f"settings back to continue it, or choose another adapter file to start afresh.")
    again.rank.setValue(2)
    again.start_button.click()
    _finish(qtbot, again)
    assert again.status.text().startswith("Done: ") and (tmp_path / "restarted.lora").read_bytes() == straight
    again.shutdown()

    with qtbot.waitSignal(paused.chat_with_model, timeout=WAIT_MS) as merged:
        paused.chat_button.click()
    path = merged.args[0]
    assert path == str(tmp_path / "paused-merged-q8_0.petit")
    m = petit.load(path)
    assert m.metadata["merged_lora"]["rank"] == 2
    m.close()
    qtbot.waitUntil(lambda: paused.start_button.isEnabled(), timeout=WAIT_MS)
    paused.shutdown()


def test_missing_choices_are_named(qtbot, tmp_path):
    panel = FinetunePanel()
    qtbot.addWidget(panel)
    panel.model_edit.setText("")
    panel.start_button.click()
    assert panel.error.text() == "Choose the base model and the training data (a file or chats)." and not panel.running
    panel.model_edit.setText(MODEL)
    panel.data_edit.setText(str(tmp_path / "none.jsonl"))
    panel.start_button.click()
    assert panel.error.text() == f"{tmp_path / 'none.jsonl'} does not exist." and not panel.running
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    panel.data_edit.setText(str(bad))
    panel.start_button.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=WAIT_MS)
    assert "needs \"messages\"" in panel.error.text() and panel.start_button.isEnabled()
    panel.shutdown()


def test_checked_chats_are_the_data(qtbot, tmp_path, data_dir):
    from app.chat.store import ChatStore, Message
    from app.db import connect
    conn = connect()
    store = ChatStore(conn)
    facts = store.create("Facts")
    for role, text in (("user", "Who is Marda Voss?"), ("assistant", "Marda Voss is the keeper of Quellin."),
                       ("user", "Where is Quellin?"), ("assistant", "Quellin is north of the moon of Zarb."),
                       ("user", "And then?")):                            # a question left without a reply
        store.append(facts, Message(role, text))
    cut = store.create("Cut off")
    store.append(cut, Message("user", "Count to 3"))
    store.append(cut, Message("assistant", "1, 2", {"finish_reason": "interrupted"}))
    store.create("Empty")
    conn.close()
    panel = _panel(qtbot, tmp_path / "chats.lora")
    panel.data_edit.setText("")
    panel.refresh_chats()
    titles = {panel.chat_list.item(i).text(): panel.chat_list.item(i) for i in range(panel.chat_list.count())}
    assert set(titles) == {"Facts (5 messages)", "Cut off (2 messages)", "Empty (0 messages)"}
    from PySide6.QtCore import Qt
    titles["Cut off (2 messages)"].setCheckState(Qt.CheckState.Checked)
    panel.start_button.click()                  # nothing whole to learn from: said, and no run
    assert panel.error.text() == "None of the checked chats has a whole reply to learn from." and not panel.running
    titles["Facts (5 messages)"].setCheckState(Qt.CheckState.Checked)
    panel.start_button.click()
    _finish(qtbot, panel)
    data = panel.data_edit.text()
    assert os.path.dirname(data) == str(data_dir / "finetune") and panel.status.text().startswith("Done: ")
    with open(data, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == [{"messages": [
            {"role": "user", "content": "Who is Marda Voss?"},
            {"role": "assistant", "content": "Marda Voss is the keeper of Quellin."},
            {"role": "user", "content": "Where is Quellin?"},
            {"role": "assistant", "content": "Quellin is north of the moon of Zarb."}]}]
    assert (tmp_path / "chats.lora").exists()
    panel.shutdown()
