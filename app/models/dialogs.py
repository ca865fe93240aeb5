"""The model dialogs, all window-modal at most and opened with open() or show() (never exec()): choose a model file
or a Hugging Face folder, confirm loading one that may not fit in memory, report a load error, tell what the engine
warns about a model just loaded (non-modal)."""
import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

MODEL_FILTER = "Models (*.petit *.gguf);;Petit models (*.petit);;GGUF models (*.gguf);;All files (*)"


def load_error(parent, path: str, message: str) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Warning, "Could not open the model",
                      f"Petit could not open {os.path.basename(path) or path}.", QMessageBox.StandardButton.Ok, parent)
    box.setInformativeText(message)
    box.setDetailedText(path)
    box.open()
    return box


def model_warnings(parent, name: str, warnings: list) -> QMessageBox:
    """A non-modal notice of what the engine says about a model just loaded (e.g. a file with no checksums): the
    chat is usable meanwhile."""
    box = QMessageBox(QMessageBox.Icon.Warning, "About this model",
                      f"{name} is loaded, but note:\n" + "\n".join(f"• {w}" for w in warnings),
                      QMessageBox.StandardButton.Ok, parent)
    box.setWindowModality(Qt.WindowModality.NonModal)
    box.show()
    return box


def confirm_load(parent, path: str, why: str, on_yes) -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Question, "Load this model?",
                      f"{os.path.basename(path)} {why}.\nLoading it may make this computer swap or stop the app.",
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, parent)
    box.button(QMessageBox.StandardButton.Yes).setText("Load anyway")
    box.button(QMessageBox.StandardButton.Yes).clicked.connect(on_yes)
    box.open()
    return box


def choose_model_file(parent, on_chosen, start: str = "") -> QFileDialog:
    dialog = QFileDialog(parent, "Open a model", start, MODEL_FILTER)
    dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
    dialog.fileSelected.connect(on_chosen)
    dialog.open()
    return dialog


def choose_model_folder(parent, on_chosen, start: str = "") -> QFileDialog:
    dialog = QFileDialog(parent, "Open a Hugging Face model folder", start)
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    dialog.fileSelected.connect(on_chosen)
    dialog.open()
    return dialog


def dropped_model_path(mime) -> str | None:
    """The model file or folder dropped on the window (the first local one), else None."""
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile():
            path = url.toLocalFile()
            if os.path.isdir(path) or os.path.isfile(path):
                return path
    return None
