"""The Documents tab: the files and folders the chat can draw on (add files, add a folder, remove, index again),
a progress bar while they are indexed on a Worker thread, the embedding model (optional: without one the search is
BM25 only) and "Use documents in chat". The index follows the files: a change under a root (seen by a
QFileSystemWatcher, debounced) indexes again, reading only what changed.

`sources_for(question)` is the chat's hook (ChatController.sources_for): the passages to put before a question."""
import os
import threading

from PySide6.QtCore import QFileSystemWatcher, Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QProgressBar, QPushButton, QVBoxLayout, QWidget)

from app.documents.index import DocumentIndex
from app.documents.jobs import index_job
from app.documents.prompt import sources_of
from app.documents.retrieve import search
from app.paths import data_dir
from app.threads import Worker, WorkerSlot

INDEX_NAME = "documents.sqlite3"
TOP_K = 3                 # passages put before a question
WATCH_MS = 800            # quiet time after a file change before indexing again
MAX_WATCHED = 2000        # folders and files watched at most


class DocumentsPanel(QWidget):
    indexed = Signal(object)          # the SyncResult of an indexing run that ended

    def __init__(self, parent=None):
        super().__init__(parent)
        self.index = DocumentIndex(os.path.join(data_dir(), INDEX_NAME))
        self.slot = WorkerSlot(self)
        self.embedder = None          # the QueryEmbedder of the chosen model, once loaded
        self._stop = threading.Event()
        self._again = False           # something changed while indexing: index once more after
        self.file_dialog = None
        self.last_result = None
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Files and folders the chat can draw on (text, Markdown, code, PDF, HTML):"))
        self.roots_list = QListWidget()
        self.roots_list.setAccessibleName("Documents")
        layout.addWidget(self.roots_list, 1)
        buttons = QHBoxLayout()
        self.add_files_button = self._button("Add files…", self.choose_files, buttons)
        self.add_folder_button = self._button("Add folder…", self.choose_folder, buttons)
        self.remove_button = self._button("Remove", self.remove_selected, buttons)
        self.reindex_button = self._button("Index again", self.reindex, buttons)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        layout.addWidget(self.progress)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        model_row = QHBoxLayout()
        model_row.addWidget(QLabel("Embedding model (optional):"))
        self.model_edit = QLineEdit(self.index.setting("embedding_model", ""))
        self.model_edit.setPlaceholderText("a sentence-transformers folder or GGUF file; empty: keyword search only")
        self.model_edit.editingFinished.connect(self._on_model_edited)
        model_row.addWidget(self.model_edit, 1)
        self._button("Choose…", self.choose_model, model_row)
        layout.addLayout(model_row)
        self.use_in_chat = QCheckBox("Use documents in chat (the best passages go before each question)")
        self.use_in_chat.setChecked(bool(self.index.setting("use_in_chat", True)))
        self.use_in_chat.toggled.connect(lambda on: self.index.set_setting("use_in_chat", on))
        layout.addWidget(self.use_in_chat)
        self.watcher = QFileSystemWatcher(self)
        self.watcher.directoryChanged.connect(self._on_changed)
        self.watcher.fileChanged.connect(self._on_changed)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(WATCH_MS)
        self._debounce.timeout.connect(self.reindex)
        self._show()
        if self.index.roots():
            self.reindex()             # what changed while the app was closed

    def _button(self, text: str, slot, row) -> QPushButton:
        b = QPushButton(text)
        b.clicked.connect(slot)
        row.addWidget(b)
        return b

    # the roots
    def choose_files(self) -> None:
        self.file_dialog = QFileDialog(self, "Add documents")
        self.file_dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        self.file_dialog.filesSelected.connect(self.add_paths)
        self.file_dialog.open()

    def choose_folder(self) -> None:
        self.file_dialog = QFileDialog(self, "Add a folder of documents")
        self.file_dialog.setFileMode(QFileDialog.FileMode.Directory)
        self.file_dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        self.file_dialog.fileSelected.connect(lambda path: self.add_paths([path]))
        self.file_dialog.open()

    def choose_model(self) -> None:
        self.file_dialog = QFileDialog(self, "Choose an embedding model folder")
        self.file_dialog.setFileMode(QFileDialog.FileMode.Directory)
        self.file_dialog.fileSelected.connect(self.set_embedding_model)
        self.file_dialog.open()

    def add_paths(self, paths) -> None:
        """Add files or folders and index them."""
        for path in paths:
            try:
                self.index.add_root(path)
            except ValueError as e:
                self.status.setText(str(e))
                return
        self._show()
        self.reindex()

    def remove_selected(self) -> None:
        for item in self.roots_list.selectedItems():
            self.index.remove_root(item.data(Qt.ItemDataRole.UserRole))
        self._show()
        self.reindex()

    def set_embedding_model(self, path: str) -> None:
        """Use the embedding model at `path` ("": none, BM25 only); the passages are embedded again."""
        self.model_edit.setText(path)
        self._on_model_edited()

    def _on_model_edited(self) -> None:
        path = self.model_edit.text().strip()
        if path != self.index.setting("embedding_model", ""):
            self.index.set_setting("embedding_model", path)
            self.embedder = None
            self.reindex()

    # indexing
    def _on_changed(self, _path: str) -> None:
        self._debounce.start()

    def reindex(self) -> None:
        """Bring the index in step with the files (on a Worker; once more after, if asked again meanwhile)."""
        if self.index is None:                 # shut down
            return
        if self.slot.busy:
            self._again = True
            return
        model = self.index.setting("embedding_model", "")
        worker = Worker(index_job, self.index.path, model, self.embedder, self._stop.is_set, name="petit-documents")
        worker.progressed.connect(self._on_progress)
        worker.succeeded.connect(self._on_indexed)
        worker.failed.connect(self._on_failed)
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.status.setText("Indexing…")
        self.slot.start(worker, then=self._on_ended)

    def _on_progress(self, info: dict) -> None:
        total, done = info["total"], info["done"]
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        if info["phase"] == "loading":
            self.status.setText(f"Loading the embedding model {info['name']}…")
        elif info["phase"] == "reading":
            self.status.setText(f"Reading {info['name']} ({done + 1}/{total})" if info["name"] else "Read.")
        else:
            self.status.setText(f"Embedding passages: {done}/{total}")

    def _on_indexed(self, outcome) -> None:
        result, embedder, model = outcome
        # a model chosen while this run embedded with the one before is loaded by the next run
        self.embedder = embedder if model == self.index.setting("embedding_model", "") else None
        self.last_result = result
        docs = self.index.documents()
        summary = (f"{sum(1 for d in docs if not d.error)} documents, {self.index.passage_count()} passages indexed "
                   f"({'keywords and embeddings' if self.embedder is not None else 'keywords only'}).")
        self.status.setText("\n".join([summary, *result.errors]))
        self._show()
        self.indexed.emit(result)

    def _on_failed(self, message: str) -> None:
        self.status.setText(f"Indexing failed: {message}")
        self.embedder = None

    def _on_ended(self) -> None:
        self.progress.setVisible(False)
        if self._again and not self._stop.is_set():
            self._again = False
            self.reindex()

    def _show(self) -> None:
        """List the roots (with their document counts) and watch them."""
        self.roots_list.clear()
        docs = self.index.documents()
        for root in self.index.roots():
            inside = [d for d in docs if d.path == root or d.path.startswith(root.rstrip(os.sep) + os.sep)]
            passages = sum(d.passages for d in inside)
            missing = "" if os.path.exists(root) else " — not found"
            item = QListWidgetItem(f"{root}  ({len(inside)} files, {passages} passages){missing}")
            item.setData(Qt.ItemDataRole.UserRole, root)
            self.roots_list.addItem(item)
        watched = self.watcher.files() + self.watcher.directories()
        if watched:
            self.watcher.removePaths(watched)
        paths = self.index.roots() + sorted({os.path.dirname(d.path) for d in docs} | {d.path for d in docs})
        paths = [p for p in dict.fromkeys(paths) if os.path.exists(p)][:MAX_WATCHED]
        if paths:
            self.watcher.addPaths(paths)

    # the chat's hook
    def sources_for(self, question: str, options: dict | None = None) -> list[dict]:
        """The passages (as message meta entries) that best answer `question`, their texts within a budget of
        options["n_ctx"] characters (a quarter of the context at about four characters a token, so the question
        and the reply still fit); none when the toggle is off or nothing is indexed."""
        if self.index is None or not self.use_in_chat.isChecked() or not self.index.roots():
            return []
        budget = (options or {}).get("n_ctx")
        return sources_of(search(self.index, question, k=TOP_K, embedder=self.embedder), budget)

    def shutdown(self) -> None:
        """Stop indexing (the run ends after the file or batch in hand) and close the index."""
        self._stop.set()
        self.watcher.blockSignals(True)
        self._debounce.stop()
        self.slot.shutdown()
        if self.index is not None:
            self.index.close()
            self.index = None
