"""Which model the chat uses, and changing it: a load runs on a Worker thread (loader.py) while the old model keeps
answering; the new one is handed to the generation worker only when it is ready. One load at a time: a new one
cancels the previous."""
import os

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from app.models import dialogs
from app.models.info import ModelInfo, model_key
from app.models.loader import close_loaded, load_worker
from app.models.memory import fit_message
from app.remote.model import load_remote
from app.threads import Worker


class ModelManager(QObject):
    loading_started = Signal(str, str)        # path, what it needs against what the machine has
    loading_ended = Signal()                  # loaded, failed or cancelled
    load_failed = Signal(str, str)            # path, the engine's message
    confirmation_needed = Signal(str, str)    # path, why (it may not fit in memory)
    model_loaded = Signal(object)             # ModelInfo, once the worker uses the new model

    def __init__(self, generation, settings_store, recent, parent=None):
        super().__init__(parent)
        self.generation, self.settings_store, self.recent = generation, settings_store, recent
        self.info: ModelInfo | None = None
        self._job: Worker | None = None       # the load in progress
        self._path = ""                       # what it loads
        self._jobs: list[Worker] = []         # every load not yet ended (a cancelled one runs to its end)
        self.warning_dialog = None            # the notice of the engine's warnings about the model loaded
        # "remote:ID/MODEL" -> (app.remote.api.Backend, model id), or ValueError naming what is missing (the window's)
        self.remote_resolver = None
        generation.model_changed.connect(self._on_model_changed)

    @property
    def loading(self) -> bool:
        return self._job is not None

    def open(self, path: str, confirmed: bool = False) -> None:
        """Start loading `path` (a .petit file or a Hugging Face folder). A model that may not fit in memory is
        loaded only once confirmed (confirmation_needed asks)."""
        path = model_key(path)
        if path.startswith("remote:"):
            try:
                backend, model = self.remote_resolver(path)
            except (ValueError, TypeError) as e:
                self.load_failed.emit(path, str(e))
                return
            self.cancel()
            text = f"asking {backend.base_url} for {model}"
            job = Worker(load_remote, path, backend, model, name="petit-load", discard=close_loaded)
        else:
            text, fits = fit_message(path) if os.path.exists(path) else ("", True)
            if not fits and not confirmed:
                self.confirmation_needed.emit(path, text)
                return
            self.cancel()
            settings = self.settings_store.get(path)
            job = load_worker(path, settings.get("weights"), settings.get("device"))
        job.succeeded.connect(self._on_loaded)
        job.failed.connect(self._on_failed)
        job.ended.connect(self._on_job_ended)
        self._job, self._path = job, path
        self._jobs.append(job)
        self.loading_started.emit(path, text)
        job.start()

    def reload(self) -> None:
        """Load the current model again (its weights type or device changed)."""
        if self.info is not None:
            self.open(self.info.path, confirmed=True)

    def cancel(self) -> None:
        """Give up the load in progress; the current model stays."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
            self.loading_ended.emit()

    # from the load workers (self.sender(): which one)
    def _on_loaded(self, loaded: tuple) -> None:
        model, info = loaded
        if self.sender() is not self._job:    # a newer load replaced it (a cancelled load's model is closed already)
            model.close()
            return
        self._job = None
        self.generation.set_model(model, info)
        self.loading_ended.emit()

    def _on_failed(self, message: str) -> None:
        if self.sender() is not self._job:
            return
        self._job = None
        self.loading_ended.emit()
        self.load_failed.emit(self._path, message)

    def _on_model_changed(self, info: ModelInfo) -> None:
        self.info = info
        self.recent.add(info.path)
        self.model_loaded.emit(info)
        if info.warnings:                     # e.g. a file with no checksums: loaded, but the user should know
            parent = self.parent() if isinstance(self.parent(), QWidget) else None
            self.warning_dialog = dialogs.model_warnings(parent, info.name, info.warnings)

    def _on_job_ended(self) -> None:
        job = self.sender()
        if job not in self._jobs:         # already joined by shutdown()
            return
        self._jobs.remove(job)
        job.wait()                        # `ended` is run()'s last act: this returns at once
        job.deleteLater()

    def shutdown(self) -> None:
        """Cancel any load and join every load thread (petit.load cannot be interrupted: this waits for it; a
        model it still loads is closed)."""
        self.cancel()
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.stop()
            job.deleteLater()
