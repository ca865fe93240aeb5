"""The Train tab: the wizard's choices (TrainForm), Start / Pause / Cancel / Continue, the live loss plot
(training and validation), tokens/s, elapsed time and ETA; then "Export…" and "Chat with this model".

The run lives on a TrainRun (on its Worker thread); the GUI only sends it pause / resume / cancel (thread-safe
flags) and draws what it reports. Closing the window cancels the run (the trainer saves a checkpoint) and joins the
thread."""
import dataclasses
import os

from PySide6.QtCore import QThread, Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QProgressBar, QPushButton, QScrollArea, QSplitter, QVBoxLayout,
                               QWidget)

from app.threads import Worker, WorkerSlot
from app.training.exports import default_target, export_all
from app.training.hub import reveal, shared_hub
from app.training.plot import LinePlot
from app.training.presets import format_duration
from app.training.run import RunSpec, TrainRun
from app.training.train_form import TrainForm, new_run_folder

CHECKPOINT = "checkpoint"            # the checkpoint's folder inside the run folder
ERROR_STYLE = "color: #b00020;"


class TrainPanel(QWidget):
    chat_with_model = Signal(str)    # a .petit file to chat with (the window loads it)

    def __init__(self, parent=None, hub=None):
        super().__init__(parent)
        self.hub = hub or shared_hub()
        self.run: TrainRun | None = None          # the run in progress
        self.spec: RunSpec | None = None          # the last run started (Continue resumes it)
        self.checkpoint: str | None = None        # its latest checkpoint
        self.result: dict | None = None
        self._export = WorkerSlot()
        self.form = TrainForm()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.form)
        scroll.setMinimumWidth(380)
        splitter = QSplitter()
        splitter.addWidget(scroll)
        splitter.addWidget(self._run_side())
        splitter.setStretchFactor(1, 1)
        QVBoxLayout(self).addWidget(splitter)
        self._sync()

    def _run_side(self) -> QWidget:
        side = QWidget()
        layout = QVBoxLayout(side)
        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start training")
        self.pause_button = QPushButton("Pause")
        self.cancel_button = QPushButton("Cancel")
        self.continue_button = QPushButton("Continue training")
        self.start_button.clicked.connect(self.start)
        self.pause_button.clicked.connect(self.toggle_pause)
        self.cancel_button.clicked.connect(self.cancel)
        self.continue_button.clicked.connect(self.continue_run)
        self.cancel_button.setToolTip("Stop after the current step; a checkpoint is saved")
        self.continue_button.setToolTip("Resume the last run from its checkpoint, up to the steps set on the left")
        for b in (self.start_button, self.pause_button, self.cancel_button, self.continue_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.status = QLabel("Choose a corpus, a tokenizer and a model size, then start.")
        self.status.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setFormat("step %v / %m")
        self.stats = QLabel()
        self.stats.setObjectName("trainStats")
        self.stats.setWordWrap(True)
        self.plot = LinePlot("step", "loss", empty_text="The loss curves appear here while the model trains.")
        self.train_series = self.plot.add_series("training", "#1f77b4")
        self.val_series = self.plot.add_series("validation", "#e6550d", markers=True)
        self.error = QLabel()
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.result_label = QLabel()
        self.result_label.setWordWrap(True)
        self.result_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        after = QHBoxLayout()
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Write the checkpoint as .petit files (fp32, q8_0, q4_0)")
        self.chat_button = QPushButton("Chat with this model")
        self.chat_button.setToolTip("Export as q8_0 and open it in the chat")
        self.export_button.clicked.connect(self.go_export)
        self.chat_button.clicked.connect(self.chat_with_this_model)
        after.addWidget(self.export_button)
        after.addWidget(self.chat_button)
        after.addStretch(1)
        for w in (self.status, self.progress, self.stats):
            layout.addWidget(w)
        layout.addWidget(self.plot, 1)
        for w in (self.error, self.result_label):
            layout.addWidget(w)
        layout.addLayout(after)
        return side

    # state
    @property
    def running(self) -> bool:
        return self.run is not None

    def _sync(self) -> None:
        running, exporting = self.running, self._export.busy
        self.form.set_running(running)
        self.start_button.setEnabled(not running and not exporting)
        self.pause_button.setEnabled(running)
        self.pause_button.setText("Resume" if running and self.run.is_paused else "Pause")
        self.cancel_button.setEnabled(running)
        self.continue_button.setEnabled(not running and not exporting and self.checkpoint is not None)
        self.export_button.setEnabled(not running and self.checkpoint is not None)
        self.chat_button.setEnabled(not running and not exporting and self.checkpoint is not None)

    # actions
    def start(self) -> None:
        """Start a new run with the form's choices, in a new folder."""
        if self.running:
            return
        try:
            config = self.form.config()
        except ValueError as e:
            self._fail(str(e))
            return
        corpus = self.form.corpus()
        if not corpus.chat and not os.path.isfile(corpus.path):
            self._fail("Choose a text file to train on." if not corpus.path else f"{corpus.path} is not a file.")
            return
        folder = self.form.folder()
        if self.spec is not None and _same(folder, os.path.dirname(self.spec.checkpoint_dir)):
            folder = new_run_folder()             # the last run's folder, still shown: a new run, a new folder
        folder = _unused(folder)
        self.form.folder_edit.setText(folder)     # "Save in" shows where this run's checkpoint goes
        self._launch(RunSpec(config, corpus, os.path.join(folder, CHECKPOINT)), fresh=True)

    def continue_run(self) -> None:
        """Resume the last run from its checkpoint up to the form's step count."""
        if self.running or self.spec is None or self.checkpoint is None:
            return
        done = self.result["step"] if self.result else 0
        steps = self.form.steps.value()
        if steps <= done:
            self._fail(f"The run has done {done:,} steps: set more steps than that to continue it.")
            return
        config = dataclasses.replace(self.spec.config, steps=steps)
        self.form.folder_edit.setText(os.path.dirname(self.spec.checkpoint_dir))
        self._launch(dataclasses.replace(self.spec, config=config, resume=True), fresh=False)

    def _launch(self, spec: RunSpec, fresh: bool) -> None:
        self.error.clear()
        self.result_label.clear()
        if fresh:
            self.plot.clear()
            self.checkpoint, self.result = None, None
        self.spec = spec
        self.progress.setRange(0, spec.config.steps)
        self.status.setText("Waiting for this computer's speed measurement to end…" if self.form.measuring
                            else "Starting…")
        self.run = run = TrainRun(spec)
        run.stage_changed.connect(self.status.setText)
        run.progressed.connect(self._on_progress)
        run.paused.connect(self._on_paused)
        run.checkpoint_saved.connect(self._on_checkpoint)
        run.succeeded.connect(self._on_succeeded)
        run.failed.connect(self._on_failed)
        run.ended.connect(self._on_ended)
        self._sync()
        self.form.when_idle(lambda: run.start(QThread.Priority.LowPriority) if run is self.run else None)

    def toggle_pause(self) -> None:
        if self.run is None:
            return
        if self.run.is_paused:
            self.run.resume()
            self.status.setText("Training…")
        else:
            self.run.pause()
            self.status.setText("Pausing after the current step…")
        self._sync()

    def pause(self) -> None:
        if self.run is not None and not self.run.is_paused:
            self.toggle_pause()

    def resume(self) -> None:
        if self.run is not None and self.run.is_paused:
            self.toggle_pause()

    def cancel(self) -> None:
        if self.run is not None:
            self.run.cancel()
            self.status.setText("Stopping after the current step and saving a checkpoint…")
            self.cancel_button.setEnabled(False)

    # what the run reports
    def _on_progress(self, p: dict) -> None:
        self.train_series.points.extend(p["losses"])
        self.val_series.points.extend(p["val_losses"])
        self.plot.update()
        self.progress.setValue(p["step"])
        parts = [f"step {p['step']:,} / {p['steps']:,}"]
        if p["loss"] is not None:
            parts.append(f"loss {p['loss']:.4f}")
        last_val = self.val_series.points[-1][1] if self.val_series.points else None
        if last_val is not None:
            parts.append(f"validation {last_val:.4f}")
        parts.append(f"{p['tokens_per_s']:,.0f} tokens/s")
        parts.append(f"elapsed {format_duration(p['elapsed_s'])}")
        if p["eta_s"] is not None and p["step"] < p["steps"]:
            parts.append(f"about {format_duration(p['eta_s'])} left")
        self.stats.setText(" · ".join(parts))

    def _on_paused(self, step: int) -> None:
        if self.run is not None and self.run.is_paused and not self.run.cancelled:
            self.status.setText(f"Paused after step {step:,}. Resume continues; Cancel saves a checkpoint.")
        self._sync()

    def _on_checkpoint(self, path: str) -> None:
        self.checkpoint = path
        self.result_label.setText(f"Checkpoint saved: {path}")

    def _on_succeeded(self, r: dict) -> None:
        self.result = r
        if r["checkpoint"]:
            self.checkpoint = r["checkpoint"]
            self.hub.checkpoint_saved.emit(r["checkpoint"])
        val = f", validation loss {r['val_loss']:.4f}" if r["val_loss"] is not None else ""
        loss = f": loss {r['loss']:.4f}{val}" if r["loss"] is not None else ""
        if r["interrupted"]:
            what = f"Stopped at step {r['step']:,} of {r['steps']:,}{loss}."
            what += " Continue training resumes it." if r["checkpoint"] else " Nothing was saved."
        else:
            what = f"Done: {r['step']:,} steps{loss}."
        self.status.setText(what)
        if r["checkpoint"]:
            self.result_label.setText(f"Checkpoint: {r['checkpoint']}")

    def _on_failed(self, message: str) -> None:
        self.status.setText("Training failed.")
        self._fail(message)

    def _on_ended(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.worker.wait()             # `ended` is the worker's last act: this returns at once
            run.deleteLater()
        self._sync()

    def _fail(self, message: str) -> None:
        self.error.setText(message)

    # after training
    def go_export(self) -> None:
        """Hand the checkpoint to the Export tab and show it."""
        if self.checkpoint is None:
            return
        self.hub.checkpoint_saved.emit(self.checkpoint)
        from app.training.export_panel import ExportPanel
        reveal(self, ExportPanel)

    def chat_with_this_model(self) -> None:
        """Export the checkpoint as q8_0 (on a worker), then emit chat_with_model with the file."""
        if self.checkpoint is None or self.running or self._export.busy:
            return
        folder, stem = default_target(self.checkpoint)
        self.status.setText("Exporting the model as q8_0…")
        job = Worker(export_all, self.checkpoint, folder, stem, ["q8_0"], name="petit-export")
        job.succeeded.connect(self._on_exported)
        job.failed.connect(self._fail)
        self._export.start(job, then=self._sync)
        self._sync()

    def _on_exported(self, summaries: list) -> None:
        path = summaries[-1]["path"]
        self.status.setText(f"Exported {path}; opening it in the chat.")
        self.hub.model_exported.emit(path)
        self.chat_with_model.emit(path)

    def shutdown(self) -> None:
        """Cancel the run (its checkpoint is saved) and every job, and join their threads."""
        self.form.shutdown()
        self._export.shutdown()
        run, self.run = self.run, None
        if run is not None:               # (a run still waiting for the speed measurement never starts)
            run.stop()


def _same(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _unused(folder: str) -> str:
    """`folder`, or folder-2, folder-3... if it already holds a run."""
    candidate, n = folder, 1
    while os.path.exists(os.path.join(candidate, CHECKPOINT)):
        n += 1
        candidate = f"{folder}-{n}"
    return candidate
