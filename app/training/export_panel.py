"""The Export tab: a checkpoint written as .petit files with fp32, q8_0 and/or q4_0 weights (on a worker), each
file's size and its ratio to fp32; then "Chat with this model" and "Verify…" for the selected file."""
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QFileDialog, QFormLayout, QHBoxLayout, QHeaderView,
                               QLabel, QLineEdit, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.threads import Worker, WorkerSlot
from app.training.exports import WEIGHTS, default_target, describe_checkpoint, export_all, name_problem
from app.training.hub import reveal, shared_hub
from trainer.export import format_size

HINTS = {"f32": "exactly as trained", "q8_0": "8-bit: about a quarter of fp32, nearly lossless",
         "q4_0": "4-bit: about an eighth of fp32, lossier on a tiny model"}
ERROR_STYLE = "color: #b00020;"


class ExportPanel(QWidget):
    chat_with_model = Signal(str)

    def __init__(self, parent=None, hub=None):
        super().__init__(parent)
        self.hub = hub or shared_hub()
        self.results: list[dict] = []
        self.file_dialog = None
        self._job = WorkerSlot()
        layout = QVBoxLayout(self)
        form = QFormLayout()
        row = QHBoxLayout()
        self.checkpoint_edit = QLineEdit(placeholderText="a checkpoint folder written by the Train tab or petit train")
        self.checkpoint_edit.setAccessibleName("Checkpoint folder")
        self.checkpoint_edit.textChanged.connect(self._on_checkpoint_edited)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self.choose_checkpoint)
        row.addWidget(self.checkpoint_edit, 1)
        row.addWidget(browse)
        form.addRow("Checkpoint:", row)
        self.checkpoint_info = QLabel()
        self.checkpoint_info.setWordWrap(True)
        form.addRow("", self.checkpoint_info)
        self.folder_edit = QLineEdit()
        self.folder_edit.setAccessibleName("Folder to write the model files in")
        self.stem_edit = QLineEdit()
        self.stem_edit.setAccessibleName("Model file name")
        form.addRow("Save in:", self.folder_edit)
        form.addRow("Name:", self.stem_edit)
        kinds = QVBoxLayout()
        self.kind_boxes = {}
        for weights, label in WEIGHTS:
            box = QCheckBox(f"{label}: {HINTS[weights]}")
            box.setChecked(True)
            box.toggled.connect(self._sync)
            self.kind_boxes[weights] = box
            kinds.addWidget(box)
        form.addRow("Weights:", kinds)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.export_button = QPushButton("Export")
        self.export_button.clicked.connect(self.export)
        row.addWidget(self.export_button)
        self.status = QLabel()
        self.status.setWordWrap(True)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        self.error = QLabel()
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        layout.addWidget(self.error)
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Weights", "File size", "vs fp32", "File"])
        self.table.horizontalHeader().setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.itemSelectionChanged.connect(self._sync)
        layout.addWidget(self.table, 1)
        row = QHBoxLayout()
        self.chat_button = QPushButton("Chat with this model")
        self.verify_button = QPushButton("Verify…")
        self.chat_button.clicked.connect(self.chat_with_selected)
        self.verify_button.clicked.connect(self.verify_selected)
        row.addWidget(self.chat_button)
        row.addWidget(self.verify_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.hub.checkpoint_saved.connect(self._on_hub_checkpoint)
        if self.hub.checkpoint:
            self.set_checkpoint(self.hub.checkpoint)
        self._sync()

    # the checkpoint
    def set_checkpoint(self, path: str) -> None:
        self.checkpoint_edit.setText(path)

    def _on_hub_checkpoint(self, path: str) -> None:
        if not self._job.busy:
            self.set_checkpoint(path)

    def _on_checkpoint_edited(self, text: str) -> None:
        path = text.strip()
        self.checkpoint_info.setText(describe_checkpoint(path) if path else "")
        if path:
            folder, stem = default_target(path)
            self.folder_edit.setText(folder)
            self.stem_edit.setText(stem)
        self._sync()

    def choose_checkpoint(self) -> None:
        dialog = QFileDialog(self, "Choose a checkpoint folder", self.checkpoint_edit.text() or os.path.expanduser("~"))
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.set_checkpoint)
        dialog.open()
        self.file_dialog = dialog

    # exporting
    def selected_weights(self) -> list:
        return [w for w, _ in WEIGHTS if self.kind_boxes[w].isChecked()]

    def export(self) -> None:
        checkpoint = self.checkpoint_edit.text().strip()
        weights = self.selected_weights()
        if self._job.busy or not checkpoint or not weights:
            return
        folder = self.folder_edit.text().strip() or default_target(checkpoint)[0]
        stem = self.stem_edit.text().strip() or default_target(checkpoint)[1]
        self.results = []
        self.table.setRowCount(0)
        self.error.clear()
        problem = name_problem(stem)
        if problem:                      # a path, not a name: it would write outside the "Save in" folder
            self.status.setText("Nothing was exported.")
            self.error.setText(problem[0].upper() + problem[1:] + ".")
            self._sync()
            return
        self.status.setText(f"Exporting {', '.join(weights)}…")
        job = Worker(export_all, checkpoint, folder, stem, weights, name="petit-export")
        job.progressed.connect(self._on_exported_one)
        job.succeeded.connect(self._on_exported)
        job.failed.connect(self._on_failed)
        self._job.start(job, then=self._sync)
        self._sync()

    def _on_exported_one(self, s: dict) -> None:
        self.results.append(s)
        row = self.table.rowCount()
        self.table.insertRow(row)
        cells = (s["label"], format_size(s["bytes"]), f"{100 * s['ratio']:.1f} %", s["path"])
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if col in (1, 2):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setToolTip(f"{s['bytes']:,} bytes; fp32 would be {s['fp32_bytes']:,}" if col else s["path"])
            self.table.setItem(row, col, item)
        if s["weights"] == "q8_0" or not self.table.selectedItems():
            self.table.selectRow(row)

    def _on_exported(self, summaries: list) -> None:
        self.status.setText(f"Wrote {len(summaries)} file{'s' if len(summaries) != 1 else ''} "
                            f"(step {summaries[0]['source_step']:,}).")
        path = self.selected_path()
        if path:
            self.hub.model_exported.emit(path)

    def _on_failed(self, message: str) -> None:
        self.status.setText("Export failed.")
        self.error.setText(message)

    # after exporting
    def selected_path(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self.results):
            return None
        return self.results[rows[0].row()]["path"]

    def chat_with_selected(self) -> None:
        path = self.selected_path()
        if path:
            self.chat_with_model.emit(path)

    def verify_selected(self) -> None:
        path = self.selected_path()
        if path:
            self.hub.model_exported.emit(path)
            from app.training.verify_panel import VerifyPanel
            reveal(self, VerifyPanel)

    def _sync(self) -> None:
        busy = self._job.busy
        self.export_button.setEnabled(not busy and bool(self.checkpoint_edit.text().strip())
                                      and bool(self.selected_weights()))
        has = self.selected_path() is not None
        self.chat_button.setEnabled(has and not busy)
        self.verify_button.setEnabled(has and not busy)

    def shutdown(self) -> None:
        self._job.shutdown()
