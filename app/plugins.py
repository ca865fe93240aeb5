"""The panels other parts of the app provide, imported lazily: app.training's TrainPanel, ExportPanel and
VerifyPanel, app.server's ServerPanel. A panel that is missing (not written yet) or fails to import is replaced by
a placeholder that says so, and the rest of the app works as before."""
import importlib

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

PANELS = (("Train", "app.training", "TrainPanel"), ("Export", "app.training", "ExportPanel"),
          ("Verify", "app.training", "VerifyPanel"), ("Server", "app.server", "ServerPanel"))


def make_panel(module: str, name: str):
    """An instance of module.name (a QWidget taking parent=None), or a placeholder QLabel naming the problem."""
    try:
        cls = getattr(importlib.import_module(module), name)
        return cls(parent=None)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return placeholder(f"{name} is not part of this version yet.")
        return placeholder(f"{name} could not be loaded: {e}")
    except AttributeError:
        return placeholder(f"{name} is not part of this version yet.")
    except Exception as e:                       # a bug in the panel must not take the app down
        return placeholder(f"{name} could not be loaded: {type(e).__name__}: {e}")


def placeholder(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("panelPlaceholder")
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setEnabled(False)
    return label


def is_placeholder(widget) -> bool:
    return widget.objectName() == "panelPlaceholder"
