"""The training wizard's choices: the corpus (a text file or the built-in chat corpus), the tokenizer (BPE and its
size, or characters), the model size (presets with their parameter count and an estimated time, from a speed
measured on this machine on a worker), the steps and the folder the run is saved in."""
import os
import time

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QRadioButton, QSpinBox, QVBoxLayout, QWidget)

from app.paths import data_dir
from app.threads import Worker, WorkerSlot
from app.training.corpus import DEFAULT_CHAT_EXAMPLES, Corpus, char_vocab, file_summary
from app.training.presets import (PRESETS, estimate_seconds, format_count, format_duration, known_speed,
                                  measure_speed, param_count, preset, train_config)
from trainer.chat_corpus import SPECIAL_TOKENS

ESTIMATE_DELAY_MS = 300


def new_run_folder() -> str:
    return os.path.join(data_dir(), "training", time.strftime("run-%Y%m%d-%H%M%S"))


class TrainForm(QWidget):
    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.file_dialog = None
        self._calibration = WorkerSlot()
        self._measuring: set = set()         # (preset, vocab) measured or being measured
        self._idle_callbacks: list = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._corpus_box())
        layout.addWidget(self._tokenizer_box())
        layout.addWidget(self._model_box())
        layout.addStretch(1)
        self._estimate_timer = QTimer(self, singleShot=True, interval=ESTIMATE_DELAY_MS)
        self._estimate_timer.timeout.connect(self.update_estimate)
        for signal in (self.chat_button.toggled, self.examples.valueChanged, self.file_edit.textChanged,
                       self.tokenizer.currentIndexChanged, self.vocab.valueChanged, self.preset_box.currentIndexChanged,
                       self.steps.valueChanged):
            signal.connect(self._on_changed)
        self._on_preset(apply_steps=True)
        self.preset_box.currentIndexChanged.connect(lambda _: self._on_preset(apply_steps=True))
        self._sync()
        self.update_estimate()

    # building
    def _corpus_box(self) -> QGroupBox:
        box = QGroupBox("1. Corpus")
        form = QVBoxLayout(box)
        self.chat_button = QRadioButton("Built-in chat corpus: generated dialogues (sums, counting, spelling, …)")
        self.file_button = QRadioButton("A text file (UTF-8)")
        group = QButtonGroup(box)
        group.addButton(self.chat_button)
        group.addButton(self.file_button)
        self.chat_button.setChecked(True)
        row = QHBoxLayout()
        row.addWidget(QLabel("Dialogues:"))
        self.examples = QSpinBox(minimum=100, maximum=500000, singleStep=1000, value=DEFAULT_CHAT_EXAMPLES)
        self.examples.setAccessibleName("Dialogues to generate")
        row.addWidget(self.examples)
        row.addStretch(1)
        form.addWidget(self.chat_button)
        form.addLayout(row)
        form.addWidget(self.file_button)
        row = QHBoxLayout()
        self.file_edit = QLineEdit(placeholderText="path to a .txt file")
        self.file_edit.setAccessibleName("Corpus file")
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self.choose_file)
        row.addWidget(self.file_edit, 1)
        row.addWidget(self.browse_button)
        form.addLayout(row)
        self.file_info = QLabel()
        self.file_info.setWordWrap(True)
        form.addWidget(self.file_info)
        return box

    def _tokenizer_box(self) -> QGroupBox:
        box = QGroupBox("2. Tokenizer")
        form = QFormLayout(box)
        self.tokenizer = QComboBox()
        self.tokenizer.addItem("Byte-level BPE (learned from the corpus)", "bpe")
        self.tokenizer.addItem("Characters (one token per character)", "char")
        self.tokenizer.setAccessibleName("Tokenizer")
        self.vocab = QSpinBox(minimum=256 + len(SPECIAL_TOKENS), maximum=8192, singleStep=64, value=512)
        self.vocab.setAccessibleName("BPE vocabulary size")
        form.addRow("Type:", self.tokenizer)
        form.addRow("Vocabulary:", self.vocab)
        return box

    def _model_box(self) -> QGroupBox:
        box = QGroupBox("3. Model and training")
        form = QFormLayout(box)
        self.preset_box = QComboBox()
        for p in PRESETS:
            self.preset_box.addItem(p.title, p.key)
        self.preset_box.setAccessibleName("Model size")
        self.preset_info = QLabel()
        self.preset_info.setWordWrap(True)
        self.steps = QSpinBox(minimum=1, maximum=1000000, singleStep=100)
        self.steps.setAccessibleName("Training steps")
        self.estimate = QLabel()
        self.estimate.setObjectName("trainEstimate")
        self.estimate.setWordWrap(True)
        self.folder_edit = QLineEdit(new_run_folder())
        self.folder_edit.setAccessibleName("Folder to save the run in")
        form.addRow("Size:", self.preset_box)
        form.addRow("", self.preset_info)
        form.addRow("Steps:", self.steps)
        form.addRow("Estimate:", self.estimate)
        form.addRow("Save in:", self.folder_edit)
        return box

    # values
    def corpus(self) -> Corpus:
        if self.chat_button.isChecked():
            return Corpus("chat", chat_examples=self.examples.value())
        return Corpus("file", path=self.file_edit.text().strip())

    def preset(self):
        return preset(self.preset_box.currentData())

    def vocab_size(self) -> int:
        return self.vocab.value() if self.tokenizer.currentData() == "bpe" else char_vocab(self.corpus())

    def config(self):
        """The TrainConfig of these choices (ValueError if they do not make one)."""
        return train_config(self.preset(), steps=self.steps.value(), tokenizer=self.tokenizer.currentData(),
                            vocab_size=self.vocab.value())

    def folder(self) -> str:
        return self.folder_edit.text().strip() or new_run_folder()

    def set_corpus_file(self, path: str) -> None:
        self.file_button.setChecked(True)
        self.file_edit.setText(path)

    def choose_file(self) -> None:
        dialog = QFileDialog(self, "Choose a text file to train on", os.path.expanduser("~"),
                             "Text files (*.txt *.md *.text);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.set_corpus_file)
        dialog.open()
        self.file_dialog = dialog

    def set_running(self, running: bool) -> None:
        for w in (self.chat_button, self.file_button, self.examples, self.file_edit, self.browse_button,
                  self.tokenizer, self.vocab, self.preset_box, self.folder_edit):
            w.setEnabled(not running)
        self._sync()
        if not running:
            self.update_estimate()

    @property
    def measuring(self) -> bool:
        """Whether this computer's speed is being measured (a run starts once it is done)."""
        return self._calibration.busy

    def when_idle(self, callback) -> None:
        """Run `callback` now, or once the speed measurement in progress has ended (a training run must not
        overlap it: both set the process's BLAS threads)."""
        if self._calibration.busy:
            self._idle_callbacks.append(callback)
        else:
            callback()

    def _calibrated(self) -> None:
        callbacks, self._idle_callbacks = self._idle_callbacks, []
        for callback in callbacks:
            callback()
        self.update_estimate()

    # reactions
    def _on_preset(self, apply_steps: bool) -> None:
        p = self.preset()
        self.preset_info.setText(p.describe())
        if apply_steps:
            self.steps.setValue(p.steps)

    def _on_changed(self, *_) -> None:
        self._sync()
        self._estimate_timer.start()
        self.changed.emit()

    def _sync(self) -> None:
        chat = self.chat_button.isChecked()
        editable = self.preset_box.isEnabled()
        self.examples.setEnabled(editable and chat)
        self.file_edit.setEnabled(editable and not chat)
        self.browse_button.setEnabled(editable and not chat)
        self.vocab.setEnabled(editable and self.tokenizer.currentData() == "bpe")
        path = self.file_edit.text().strip()
        self.file_info.setText("" if chat or not path else file_summary(path))

    def update_estimate(self) -> None:
        """The parameter count now; the time once this machine's speed for the preset is known (measured here)."""
        p, vocab = self.preset(), self.vocab_size()
        params = f"{format_count(param_count(p, vocab))} parameters (vocabulary {vocab})"
        rate = known_speed(p, vocab)
        if rate is None:
            if (p.key, vocab) in self._measuring and not self._calibration.busy:
                self.estimate.setText(f"{params}; the time could not be estimated")
                return
            self.estimate.setText(f"{params}; measuring this computer's speed…")
            if not self._calibration.busy and self.preset_box.isEnabled() and self.isVisible():
                self._measuring.add((p.key, vocab))
                self._calibration.start(Worker(lambda report: measure_speed(p, vocab), name="petit-calibration"),
                                        then=self._calibrated)
            return
        seconds = estimate_seconds(p, self.steps.value(), rate)
        self.estimate.setText(f"{params}; about {format_duration(seconds)} for {self.steps.value():,} steps "
                              f"at {rate:,.0f} tokens/s")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.update_estimate()          # the speed is measured only once someone looks at the estimate

    def shutdown(self) -> None:
        self._estimate_timer.stop()
        self._idle_callbacks.clear()
        self._calibration.shutdown()
