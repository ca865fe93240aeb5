"""Loading a model on a worker thread. petit.load cannot be interrupted, so cancelling a load means its result is
thrown away (and the model closed) when it arrives; the app goes back to the old model at once."""
from PySide6.QtCore import Signal

import petit
from app.models.info import describe
from app.threads import CancellableThread


class LoadJob(CancellableThread):
    # each carries the job, so one receiver (living on the GUI thread: queued) can tell old jobs from the current
    loaded = Signal(object, object, object)      # job, the Model, its ModelInfo
    failed = Signal(object, str)                 # job, the engine's message
    ended = Signal(object)                       # job; always last, also when cancelled

    def __init__(self, path: str, weights: str | None = None, parent=None):
        super().__init__(parent)
        self.path, self.weights = path, weights

    def run(self) -> None:
        try:
            self._load()
        finally:
            self.ended.emit(self)

    def _load(self) -> None:
        try:
            model = petit.load(self.path, weights=self.weights)
            info = describe(model, self.path)
        except Exception as e:           # missing, corrupt, unsupported: the engine says which
            if not self.cancelled:
                self.failed.emit(self, load_error_text(e))
            return
        if self.cancelled:
            model.close()
            return
        self.loaded.emit(self, model, info)


def load_error_text(error: Exception) -> str:
    text = str(error).strip()
    if isinstance(error, FileNotFoundError) and error.filename and error.filename not in text:
        text = f"{error.filename}: {text}"
    return text or type(error).__name__
