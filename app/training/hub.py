"""What the Train, Export and Verify panels hand each other: the latest checkpoint (Train -> Export) and the latest
exported model (Export -> Verify). The window builds each panel with `Panel(parent=None)`, so they meet through one
shared hub; tests give each panel group a hub of their own. `reveal` brings a sibling panel's tab to the front when
the panels are tabs of one QTabWidget (the main window's), and does nothing otherwise."""
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QTabWidget


class TrainingHub(QObject):
    checkpoint_saved = Signal(str)       # a checkpoint directory
    model_exported = Signal(str)         # a .petit file

    def __init__(self, parent=None):
        super().__init__(parent)
        self.checkpoint: str | None = None
        self.model: str | None = None
        self.checkpoint_saved.connect(self._set_checkpoint)
        self.model_exported.connect(self._set_model)

    def _set_checkpoint(self, path: str) -> None:
        self.checkpoint = path

    def _set_model(self, path: str) -> None:
        self.model = path


_shared: TrainingHub | None = None


def shared_hub() -> TrainingHub:
    global _shared
    if _shared is None:
        _shared = TrainingHub()
    return _shared


def reveal(widget, panel_type) -> bool:
    """Show the tab holding a `panel_type` widget in the QTabWidget that holds `widget`. True if found."""
    parent = widget.parentWidget()
    while parent is not None and not isinstance(parent, QTabWidget):
        parent = parent.parentWidget()
    if parent is None:
        return False
    for i in range(parent.count()):
        if isinstance(parent.widget(i), panel_type):
            parent.setCurrentIndex(i)
            return True
    return False
