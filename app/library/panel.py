"""The Models tab: every model of the library in a table (name, family, parameters, weights type, size, context,
whether it fits in memory, where it is), the folders searched, and opening a model in the chat. A model that cannot
be opened is listed with the reason, in red."""
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QListWidget,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.library.entries import fit_text
from app.models.info import count_text
from app.models.memory import human_bytes, machine_memory
from app.settings.values import CONTEXT_CAP

COLUMNS = ("Name", "Family", "Parameters", "Weights", "Size", "Context", "Memory", "Source")
PROBLEM_COLOUR = QColor("#a40000")


def chosen_context(entry, overrides: dict) -> int:
    """The context the user chose for this model (its settings), else the app's default: its own, capped."""
    n = overrides.get("n_ctx") or CONTEXT_CAP
    return min(n, entry.context_length) if entry.context_length else n


class ModelsPanel(QWidget):
    open_requested = Signal(str)          # a model's path: load it into the chat

    def __init__(self, library, settings_store, parent=None):
        super().__init__(parent)
        self.library, self.settings_store = library, settings_store
        self.file_dialog = None
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(QLabel("Folders searched:"))
        self.folder_list = QListWidget()
        self.folder_list.setMaximumHeight(self.fontMetrics().lineSpacing() * 5)
        self.folder_list.setAccessibleName("Folders searched")
        top.addWidget(self.folder_list, 1)
        buttons = QVBoxLayout()
        self.add_button = QPushButton("Add folder…")
        self.remove_button = QPushButton("Remove")
        self.rescan_button = QPushButton("Rescan")
        for b in (self.add_button, self.remove_button, self.rescan_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        top.addLayout(buttons)
        layout.addLayout(top)
        self.status = QLabel()
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setAccessibleName("Models")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("Memory"), QHeaderView.ResizeMode.Stretch)
        layout.addWidget(self.table, 1)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        self.open_button = QPushButton("Open in chat")
        bottom.addWidget(self.open_button)
        layout.addLayout(bottom)
        self.add_button.clicked.connect(self.choose_folder)
        self.remove_button.clicked.connect(self._remove_selected_folder)
        self.rescan_button.clicked.connect(library.refresh)
        self.open_button.clicked.connect(self.open_selected)
        self.table.cellDoubleClicked.connect(lambda row, _col: self._open_row(row))
        self.table.itemSelectionChanged.connect(self._update_buttons)
        library.scan_started.connect(self._on_scan_started)
        library.scanned.connect(self.show_entries)
        library.scan_failed.connect(lambda m: self.status.setText(f"The scan failed: {m}"))
        self.entries = []
        self._show_folders()
        self._update_buttons()

    # folders
    def choose_folder(self) -> None:
        self.file_dialog = QFileDialog(self, "Add a folder of models", os.path.expanduser("~"))
        self.file_dialog.setFileMode(QFileDialog.FileMode.Directory)
        self.file_dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        self.file_dialog.fileSelected.connect(self.add_folder)
        self.file_dialog.open()

    def add_folder(self, path: str) -> None:
        if path:
            self.library.add_folder(path)
            self._show_folders()

    def _remove_selected_folder(self) -> None:
        item = self.folder_list.currentItem()
        if item is not None and item.data(Qt.ItemDataRole.UserRole):
            self.library.remove_folder(item.data(Qt.ItemDataRole.UserRole))
            self._show_folders()

    def _show_folders(self) -> None:
        self.folder_list.clear()
        for folder in self.library.folders:
            self.folder_list.addItem(folder)
            self.folder_list.item(self.folder_list.count() - 1).setData(Qt.ItemDataRole.UserRole, folder)
        for source, folder in self.library.stores():
            self.folder_list.addItem(f"{folder} ({source}, found on this machine)")

    # the table
    def _on_scan_started(self) -> None:
        self.status.setText("Scanning the folders…" if not self.entries else "Looking for changes…")

    def show_entries(self, entries: list) -> None:
        self.entries = list(entries)
        self._show_folders()
        mem = machine_memory()
        self.table.setRowCount(len(self.entries))
        for row, e in enumerate(self.entries):
            overrides = self.settings_store.get(e.path)
            if e.readable:
                memory, _fits = fit_text(e, chosen_context(e, overrides), mem, overrides.get("kv_type"))
                if e.problem:
                    memory = f"cannot run: {e.problem}"
                cells = (e.name, e.family, count_text(e.parameters), e.weight_type, human_bytes(e.file_size),
                         str(e.context_length) if e.context_length else "", memory, e.source)
            else:
                cells = (e.name, "", "", "", human_bytes(e.file_size) if e.file_size else "", "",
                         f"cannot open: {e.problem}", e.source)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(e.path if col == 0 else text)
                item.setData(Qt.ItemDataRole.UserRole, e.path)
                if not e.usable:
                    item.setForeground(QBrush(PROBLEM_COLOUR))
                self.table.setItem(row, col, item)
        bad = sum(not e.usable for e in self.entries)
        text = f"{len(self.entries)} models" if self.entries else \
            "No models found: add a folder holding .petit or .gguf files, or Hugging Face model folders."
        if bad:
            text += f" ({bad} cannot be opened or run: the reason is in the Memory column)"
        self.status.setText(text)
        self._update_buttons()

    def row_texts(self, row: int) -> list[str]:
        return [self.table.item(row, c).text() for c in range(self.table.columnCount())]

    def selected_entry(self):
        rows = {i.row() for i in self.table.selectedItems()}
        return self.entries[rows.pop()] if len(rows) == 1 else None

    def _update_buttons(self) -> None:
        e = self.selected_entry()
        self.open_button.setEnabled(e is not None and e.usable)

    def open_selected(self) -> None:
        e = self.selected_entry()
        if e is not None and e.usable:
            self.open_requested.emit(e.path)

    def _open_row(self, row: int) -> None:
        if 0 <= row < len(self.entries) and self.entries[row].usable:
            self.open_requested.emit(self.entries[row].path)
