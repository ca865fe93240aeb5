"""The Fine-tune tab (issue 33): LoRA adapters on a model Petit opens, trained on a JSONL file of chats (loss on the
assistant turns) or texts, or plain text lines. The base, the data and a few settings on the left; Start / Pause /
Continue, the live loss (each step's, and the held-out loss after each epoch) and tokens/s on the right; then
"Merge and chat", which merges the adapter into a q8_0 copy of the base and loads it in the chat.

The run lives on a Worker (trainer.lora.train.finetune). Pause asks it to stop after the current step: it saves the
run's checkpoint (the adapter file's name + ".run", trainer.lora.checkpoint) and its thread ends, so a paused run
holds no core, and Continue resumes it from that checkpoint, also after the app was closed or killed. Closing the
window pauses a run the same way and joins its thread."""
import json
import os
import shutil
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QProgressBar, QPushButton, QSpinBox, QSplitter,
                               QVBoxLayout, QWidget)

from app.threads import Worker, WorkerSlot
from app.training.plot import LinePlot

ERROR_STYLE = "color: #b00020;"


def chat_examples(conn, chat_ids) -> list[dict]:
    """The chats as training examples ({"messages": [...]}, the data file's format): each chat's turns in order, a
    reply cut off (finish_reason "interrupted") and the turns after the last reply left out; a chat without a whole
    reply gives nothing."""
    from app.chat.store import INTERRUPTED, ChatStore
    store, out = ChatStore(conn), []
    for chat_id in chat_ids:
        turns = []
        for m in store.messages(chat_id):
            if m.role == "assistant" and (m.meta.get("finish_reason") == INTERRUPTED or not m.content.strip()):
                break
            turns.append({"role": m.role, "content": m.content})
        while turns and turns[-1]["role"] != "assistant":
            turns.pop()
        if turns:
            out.append({"messages": turns})
    return out


def _work(spec: dict, report) -> dict:
    """On the worker: load the base, train (or resume), report each step and epoch."""
    import petit
    from trainer.lora.base import check_supported
    from trainer.lora.train import FinetuneConfig, Hooks, finetune
    report({"stage": f"Loading {os.path.basename(spec['model'])}…"})
    model = petit.load(spec["model"])
    try:
        check_supported(model)
        cfg = FinetuneConfig(rank=spec["rank"], alpha=2.0 * spec["rank"], epochs=spec["epochs"], lr=spec["lr"],
                             ctx=spec["ctx"], batch=spec["batch"])
        report({"stage": "Reading the data and scoring the held-out part…" if not spec["resume"]
                else "Loading the run's checkpoint…"})
        hooks = Hooks(on_step=lambda info: report({"step": info}), on_epoch=lambda stats: report({"epoch": stats}),
                      should_stop=spec["stop"].is_set)
        with open(os.devnull, "w") as quiet:
            result = finetune(model, spec["data"], spec["output"], cfg, out=quiet, hooks=hooks,
                              checkpoint=spec["checkpoint"], resume=spec["resume"])
    finally:
        model.close()
    return {k: result[k] for k in ("history", "val_before", "interrupted", "steps")}


def _merge(model: str, adapter: str, output: str, report) -> str:
    from trainer.lora import merge_to_file
    merge_to_file(model, adapter, output, "q8_0").close()
    return output


class FinetunePanel(QWidget):
    chat_with_model = Signal(str)    # a .petit file to chat with (the window loads it)

    def __init__(self, parent=None):
        super().__init__(parent)
        import threading
        self._stop = threading.Event()
        self._slot, self._merge_slot = WorkerSlot(self), WorkerSlot(self)
        self.spec: dict | None = None              # the last run started (Continue resumes it)
        self.adapter: str | None = None            # the last adapter written
        splitter = QSplitter()
        splitter.addWidget(self._form())
        splitter.addWidget(self._run_side())
        splitter.setStretchFactor(1, 1)
        QVBoxLayout(self).addWidget(splitter)
        self._sync()

    def _form(self) -> QWidget:
        from petit.assets import default_model_path
        form = QWidget()
        lay = QFormLayout(form)
        self.model_edit, self.data_edit, self.output_edit = QLineEdit(default_model_path()), QLineEdit(), QLineEdit()
        self.data_edit.setPlaceholderText("chats.jsonl: {\"messages\": [...]} a line, or texts")
        self.output_edit.setPlaceholderText("beside the data: <data>.lora")
        for label, edit, pick in (("Base model", self.model_edit, self._pick_model),
                                  ("Training data", self.data_edit, self._pick_data),
                                  ("Adapter file", self.output_edit, self._pick_output)):
            row, browse = QHBoxLayout(), QPushButton("Browse…")
            browse.clicked.connect(pick)
            row.addWidget(edit, 1)
            row.addWidget(browse)
            lay.addRow(label, row)
        self.rank, self.epochs, self.batch, self.ctx = QSpinBox(), QSpinBox(), QSpinBox(), QSpinBox()
        for box, lo, hi, value in ((self.rank, 1, 256, 8), (self.epochs, 1, 100, 2), (self.batch, 1, 64, 1),
                                   (self.ctx, 16, 32768, 512)):
            box.setRange(lo, hi)
            box.setValue(value)
        self.lr = QDoubleSpinBox()
        self.lr.setDecimals(5)
        self.lr.setRange(1e-5, 0.1)
        self.lr.setSingleStep(1e-4)
        self.lr.setValue(2e-4)
        for label, box in (("Rank", self.rank), ("Epochs", self.epochs), ("Chats a step", self.batch),
                           ("Context (tokens)", self.ctx), ("Learning rate", self.lr)):
            lay.addRow(label, box)
        self.chat_list = QListWidget()
        self.chat_list.setToolTip("Checked chats are the training data (instead of a file): the replies are what "
                                  "the model learns to say")
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_chats)
        lay.addRow(QLabel("Or train on your chats (checked):"), refresh)
        lay.addRow(self.chat_list)
        return form

    def refresh_chats(self) -> None:
        """List the app's chats (the newest first), keeping the checks of those listed before."""
        from app.chat.store import ChatStore
        from app.db import connect
        checked = set(self.checked_chats())
        self.chat_list.clear()
        conn = connect()
        try:
            store = ChatStore(conn)
            for chat in store.chats():
                n = len(store.messages(chat.id))
                item = QListWidgetItem(f"{chat.title} ({n} messages)")
                item.setData(Qt.ItemDataRole.UserRole, chat.id)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(Qt.CheckState.Checked if chat.id in checked else Qt.CheckState.Unchecked)
                self.chat_list.addItem(item)
        finally:
            conn.close()

    def checked_chats(self) -> list[int]:
        items = (self.chat_list.item(i) for i in range(self.chat_list.count()))
        return [it.data(Qt.ItemDataRole.UserRole) for it in items if it.checkState() == Qt.CheckState.Checked]

    def _write_chats(self) -> str:
        """The checked chats as a JSONL data file in the data folder's finetune/ (written to a temporary name, then
        renamed), its path."""
        from app.db import connect
        from app.paths import data_dir
        conn = connect()
        try:
            examples = chat_examples(conn, self.checked_chats())
        finally:
            conn.close()
        if not examples:
            raise ValueError("None of the checked chats has a whole reply to learn from.")
        folder = os.path.join(data_dir(), "finetune")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, time.strftime("chats-%Y%m%d-%H%M%S.jsonl"))
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in examples)
        os.replace(path + ".tmp", path)
        return path

    def showEvent(self, event) -> None:
        if self.chat_list.count() == 0:
            self.refresh_chats()
        super().showEvent(event)

    def _run_side(self) -> QWidget:
        side = QWidget()
        layout = QVBoxLayout(side)
        buttons = QHBoxLayout()
        self.start_button, self.pause_button = QPushButton("Start fine-tuning"), QPushButton("Pause")
        self.continue_button, self.chat_button = QPushButton("Continue"), QPushButton("Merge and chat")
        self.pause_button.setToolTip("Stop after the current step; the run is saved and Continue resumes it")
        self.chat_button.setToolTip("Merge the adapter into a q8_0 copy of the base model and chat with it")
        for b, slot in ((self.start_button, self.start), (self.pause_button, self.pause),
                        (self.continue_button, self.continue_run), (self.chat_button, self.merge_and_chat)):
            b.clicked.connect(slot)
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.status = QLabel("Choose a base model and your data (chats as JSONL, or text lines), then start.")
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setFormat("step %v / %m")
        self.stats, self.error = QLabel(), QLabel()
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.plot = LinePlot("step", "loss", empty_text="The loss curves appear here while the adapter trains.")
        self.train_series = self.plot.add_series("training", "#1f77b4")
        self.val_series = self.plot.add_series("held-out", "#e6550d", markers=True)
        for w in (self.status, self.progress, self.stats, self.plot, self.error):
            layout.addWidget(w)
        return side

    # ------------------------------------------------------------------ choices

    def _pick_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Base model", "", "Models (*.petit *.gguf config.json)")
        if path:
            self.model_edit.setText(os.path.dirname(path) if path.endswith("config.json") else path)

    def _pick_data(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Training data", "", "Chats or text (*.jsonl *.txt);;All (*)")
        if path:
            self.data_edit.setText(path)

    def _pick_output(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Adapter file", "", "LoRA adapter (*.lora *.gguf)")
        if path:
            self.output_edit.setText(path)

    # ------------------------------------------------------------------ the run

    @property
    def running(self) -> bool:
        return self._slot.busy

    def _sync(self) -> None:
        busy = self.running or self._merge_slot.busy
        self.start_button.setEnabled(not busy)
        self.pause_button.setEnabled(self.running)
        self.continue_button.setEnabled(not busy and self.spec is not None and self.spec.get("paused", False))
        self.chat_button.setEnabled(not busy and self.adapter is not None)

    def start(self) -> None:
        model, data = self.model_edit.text().strip(), self.data_edit.text().strip()
        if not data and self.checked_chats():
            try:
                data = self._write_chats()
            except (ValueError, OSError) as e:
                return self._fail(str(e))
            self.data_edit.setText(data)
        output = self.output_edit.text().strip() or (os.path.splitext(data)[0] + ".lora" if data else "")
        missing = [what for what, p in (("the base model", model), ("the training data (a file or chats)", data))
                   if not p]
        if missing or not os.path.exists(model) or not os.path.isfile(data):
            return self._fail(f"Choose {' and '.join(missing)}." if missing else
                              f"{model if not os.path.exists(model) else data} does not exist.")
        self.output_edit.setText(output)
        checkpoint = output + ".run"
        # a run paused (or cut off) before the app was last closed is where it stopped: Start continues it
        self.spec = {"model": model, "data": data, "output": output, "checkpoint": checkpoint,
                     "rank": self.rank.value(), "epochs": self.epochs.value(), "batch": self.batch.value(),
                     "ctx": self.ctx.value(), "lr": self.lr.value(),
                     "resume": os.path.isfile(os.path.join(checkpoint, "config.json"))}
        self.plot.clear()
        self._launch()

    def continue_run(self) -> None:
        if self.spec is not None:
            self.spec.update(resume=True, epochs=max(self.spec["epochs"], self.epochs.value()))
            self._launch()

    def _launch(self) -> None:
        self._stop.clear()
        self.error.setText("")
        self.spec.update(stop=self._stop, paused=False)
        worker = Worker(_work, dict(self.spec), name="petit-finetune")
        worker.progressed.connect(self._on_progress)
        worker.succeeded.connect(self._on_succeeded)
        worker.failed.connect(self._fail)
        self._slot.start(worker, then=self._sync)
        self._sync()

    def pause(self) -> None:
        if self.running:
            self._stop.set()
            self.status.setText("Pausing after the current step…")

    def _on_progress(self, p: dict) -> None:
        if "stage" in p:
            self.status.setText(p["stage"])
        elif "step" in p:
            s = p["step"]
            self.status.setText(f"Training: epoch {s['epoch']} of {s['epochs']}")
            self.progress.setRange(0, s["steps"])
            self.progress.setValue(s["step"])
            self.stats.setText(f"{s['tokens_per_s']:,.0f} tokens/s · loss {s['loss']:.4f}")
            self.train_series.points.append((s["step"], s["loss"]))
            self.plot.update()
        elif "epoch" in p and p["epoch"]["val_loss"] is not None:
            self.val_series.points.append((p["epoch"]["steps"], p["epoch"]["val_loss"]))
            self.plot.update()

    def _on_succeeded(self, r: dict) -> None:
        if r["interrupted"]:
            self.spec["paused"] = True
            self.status.setText(f"Paused at step {r['steps']}: the run is saved in {self.spec['checkpoint']}; "
                                f"Continue resumes it.")
            return
        self.adapter = self.spec["output"]
        shutil.rmtree(self.spec["checkpoint"], ignore_errors=True)     # the run is done: the adapter is what it made
        last = r["history"][-1] if r["history"] else None
        held = "" if last is None or last["val_loss"] is None else \
            f", held-out loss {r['val_before']:.4f} → {last['val_loss']:.4f}"
        self.status.setText(f"Done: {self.adapter} written{held}.")

    def _fail(self, message: str) -> None:
        if self.spec is not None and self.spec.get("resume") and message.startswith("checkpoint "):
            message += (f". It is an unfinished run of {os.path.basename(self.spec['output'])}: set its settings back "
                        f"to continue it, or choose another adapter file to start afresh.")
        self.error.setText(message)
        self._sync()

    def merge_and_chat(self) -> None:
        if self.adapter is None or self._merge_slot.busy:
            return
        output = os.path.splitext(self.adapter)[0] + "-merged-q8_0.petit"
        self.status.setText(f"Merging the adapter into {os.path.basename(output)}…")
        worker = Worker(_merge, self.spec["model"], self.adapter, output, name="petit-merge")
        worker.succeeded.connect(self._on_merged)
        worker.failed.connect(self._fail)
        self._merge_slot.start(worker, then=self._sync)
        self._sync()

    def _on_merged(self, path: str) -> None:
        self.status.setText(f"Merged into {path}; it opens in the chat.")
        self.chat_with_model.emit(path)

    def shutdown(self) -> None:
        """Pause a run (its checkpoint is saved) and join the threads."""
        self._stop.set()
        self._slot.shutdown()
        self._merge_slot.shutdown()
