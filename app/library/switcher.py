"""The model switcher above the chat: a combo box of the model in use, the library's models that run, the models
opened recently and the models of the remote backends; choosing one loads it (its own settings come with it)."""
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.models.info import display_name, model_key


class ModelSwitcher(QWidget):
    model_chosen = Signal(str)            # the path (or remote key) of the model to use

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 0)
        self.label = QLabel("Model:")
        layout.addWidget(self.label)
        self.combo = QComboBox()
        self.combo.setAccessibleName("Model")
        self.combo.setToolTip("The model that answers; each keeps its own settings")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.label.setBuddy(self.combo)
        layout.addWidget(self.combo)
        layout.addStretch(1)
        self.current = ""
        self._local: list[tuple[str, str]] = []       # (key, label)
        self._recent: list[tuple[str, str]] = []
        self._remote: list[tuple[str, str]] = []
        self.combo.activated.connect(self._on_activated)

    def set_local(self, entries) -> None:
        """The library's models that can run."""
        self._local = [(model_key(e.path), f"{e.name} ({e.source})" if e.source != "folder" else e.name)
                       for e in entries if e.usable]
        self._fill()

    def set_recent(self, paths: list[str]) -> None:
        self._recent = [(model_key(p), display_name(p)) for p in paths]
        self._fill()

    def set_remote(self, models: list[tuple[str, str]]) -> None:
        """(key, label) of every remote backend's model."""
        self._remote = list(models)
        self._fill()

    def set_current(self, key: str, label: str = "") -> None:
        self.current = key
        self._current_label = label or display_name(key)
        self._fill()

    def items(self) -> list[tuple[str, str]]:
        return [(self.combo.itemData(i), self.combo.itemText(i)) for i in range(self.combo.count())]

    def _fill(self) -> None:
        blocked = self.combo.blockSignals(True)
        self.combo.clear()
        keys = set()
        rows = list(self._local) + list(self._recent) + list(self._remote)
        if self.current and self.current not in {k for k, _ in rows}:
            rows.insert(0, (self.current, getattr(self, "_current_label", self.current)))
        for key, label in rows:
            if key not in keys:
                keys.add(key)
                self.combo.addItem(label, key)
        index = self.combo.findData(self.current)
        self.combo.setCurrentIndex(index)
        self.combo.blockSignals(blocked)

    def _on_activated(self, index: int) -> None:
        key = self.combo.itemData(index)
        if key and key != self.current:
            self.model_chosen.emit(key)
