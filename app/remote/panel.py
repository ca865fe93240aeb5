"""The remote backends box of the Models tab: add a backend (name, base URL, optional API key), see the models its
/v1/models lists (fetched on a worker thread), remove it. The keys go to the keyring; where there is none, the box
says the key is kept for this session only."""
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout)

from app.remote.api import Backend, list_models
from app.remote.backends import remote_key
from app.threads import Worker, WorkerSlot


class BackendsBox(QGroupBox):
    models_changed = Signal(object)          # [(remote key, label)] of every backend's models

    def __init__(self, store, parent=None):
        super().__init__("Remote backends (OpenAI-compatible)", parent)
        self.store = store
        layout = QVBoxLayout(self)
        self.notice = QLabel(store.keys.notice)
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("color: #8a4b00;")
        self.notice.setVisible(bool(store.keys.notice))
        layout.addWidget(self.notice)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Backend / model", "Base URL", "State"])
        self.tree.setAccessibleName("Remote backends")
        self.tree.setMaximumHeight(self.fontMetrics().lineSpacing() * 9)
        layout.addWidget(self.tree)
        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. my server")
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://127.0.0.1:8080/v1")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("optional; kept in the system keyring")
        for label, edit in (("Name", self.name_edit), ("Base URL", self.url_edit), ("API key", self.key_edit)):
            edit.setAccessibleName(label)
            form.addRow(label, edit)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.add_button = QPushButton("Add backend")
        self.remove_button = QPushButton("Remove")
        self.refresh_button = QPushButton("Refresh models")
        for b in (self.add_button, self.remove_button, self.refresh_button):
            row.addWidget(b)
        row.addStretch(1)
        layout.addLayout(row)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #a40000;")
        self.error.hide()
        layout.addWidget(self.error)
        self.add_button.clicked.connect(self.add_from_form)
        self.remove_button.clicked.connect(self._remove_selected)
        self.refresh_button.clicked.connect(self.refresh)
        self._slot = WorkerSlot(self)
        self._queue: list[int] = []
        self._states: dict[int, str] = {}
        self._listing: int | None = None
        self._show()

    def backend(self, row) -> Backend:
        return Backend(row.base_url, self.store.api_key(row), row.name)

    def add_from_form(self) -> None:
        try:
            row = self.store.add(self.name_edit.text(), self.url_edit.text(), self.key_edit.text() or None)
        except ValueError as e:
            self._say(f"Not added: {e}.")
            return
        self._say("")
        self.notice.setText(self.store.keys.notice)
        self.notice.setVisible(bool(self.store.keys.notice))
        for edit in (self.name_edit, self.url_edit, self.key_edit):
            edit.clear()
        self._show()
        self.list_models(row.id)

    def _remove_selected(self) -> None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        if item is not None:
            self.store.remove(item.data(0, Qt.ItemDataRole.UserRole))
            self._show()

    def refresh(self) -> None:
        for row in self.store.all():
            self.list_models(row.id)

    def list_models(self, backend_id: int) -> None:
        """Ask the backend for its models (queued behind a listing in progress)."""
        if backend_id not in self._queue and backend_id != self._listing:
            self._queue.append(backend_id)
        self._next()

    def _next(self) -> None:
        if self._slot.busy or not self._queue:
            return
        row = self.store.get(self._queue.pop(0))
        if row is None:
            self._next()
            return
        self._listing = row.id
        self._states[row.id] = "listing models…"
        job = Worker(list_models, self.backend(row), name="petit-backend")
        job.succeeded.connect(self._on_listed)
        job.failed.connect(self._on_list_failed)
        self._slot.start(job, then=self._after)
        self._show()

    def _after(self) -> None:
        self._listing = None
        self._next()

    def _on_listed(self, models: list) -> None:
        if self._listing is not None:
            self.store.set_models(self._listing, models)
            self._states[self._listing] = f"{len(models)} models"
            self._show()

    def _on_list_failed(self, message: str) -> None:
        if self._listing is not None:
            self._states[self._listing] = f"could not list the models: {message}"
            self._show()

    def _say(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _show(self) -> None:
        self.tree.clear()
        models = []
        for row in self.store.all():
            top = QTreeWidgetItem([row.name, row.base_url, self._states.get(row.id, f"{len(row.models)} models")])
            top.setData(0, Qt.ItemDataRole.UserRole, row.id)
            self.tree.addTopLevelItem(top)
            for m in row.models:
                child = QTreeWidgetItem([m, "", ""])
                child.setData(0, Qt.ItemDataRole.UserRole, remote_key(row.id, m))
                top.addChild(child)
                models.append((remote_key(row.id, m), f"{m} ({row.name})"))
            top.setExpanded(True)
        self.models_changed.emit(models)

    def state_text(self, backend_id: int) -> str:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, Qt.ItemDataRole.UserRole) == backend_id:
                return item.text(2)
        return ""

    def shutdown(self) -> None:
        self._queue.clear()
        self._slot.shutdown()
