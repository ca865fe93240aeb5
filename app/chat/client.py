"""The GUI thread's handle on the generation worker: starts its QThread, sends it requests through queued
signals, and passes on only what belongs to the current request (a new request cancels the old one, and the old
one's late tokens and results are dropped here: they can never reach the new reply).
"""
from PySide6.QtCore import QObject, QThread, Signal

from app.chat.worker import GenerationWorker


class GenerationClient(QObject):
    # to the worker (queued: it lives on another thread)
    _generate_requested = Signal(int, object, str, object, str)
    _measure_requested = Signal(int, object, object)
    _model_offered = Signal(object, object)

    # to the GUI: only the current request's
    tokens_decoded = Signal(str)
    finished = Signal(str, object)       # reply, result dict (stats, context used / size)
    failed = Signal(str)
    measured = Signal(int, int)          # context used, context size (measured, or as the reply grows)
    model_changed = Signal(object)       # ModelInfo

    def __init__(self, parent=None):
        super().__init__(parent)
        self._thread = QThread()
        self._thread.setObjectName("petit-generation")
        self.worker = GenerationWorker()
        self.worker.moveToThread(self._thread)
        self._generate_requested.connect(self.worker.generate)
        self._measure_requested.connect(self.worker.measure)
        self._model_offered.connect(self.worker.set_model)
        self.worker.tokens_decoded.connect(self._on_tokens)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.worker.measured.connect(self._on_measured)
        self.worker.progressed.connect(self._on_progressed)
        self.worker.model_changed.connect(self.model_changed)
        self._thread.start()
        self._last_id = 0
        self._current = None              # the request whose results are passed on
        self._measure_id = 0

    @property
    def busy(self) -> bool:
        """A reply is being generated (from the GUI's point of view)."""
        return self._current is not None

    def generate(self, history: list, text: str, options: dict, partial: str = "") -> int:
        """Cancel any reply in progress and request a new one (going on from `partial`, when given); returns its
        id."""
        self._last_id += 1
        self.worker.cancel(self._last_id)
        self._current = self._last_id
        self._generate_requested.emit(self._last_id, [dict(m) for m in history], text, dict(options), partial)
        return self._last_id

    def stop(self) -> None:
        """Stop the reply in progress within one token; its `finished` still arrives, with the partial reply."""
        if self._current is not None:
            self.worker.cancel(self._current + 1)

    def abandon(self) -> None:
        """Stop the reply in progress and drop whatever it still sends."""
        self.stop()
        self._current = None

    def measure(self, history: list, options: dict) -> None:
        self._measure_id += 1
        self._measure_requested.emit(self._measure_id, [dict(m) for m in history], dict(options))

    def set_model(self, model, info) -> None:
        """Hand a loaded model to the worker: it takes over once the reply in progress (if any) has ended."""
        self._model_offered.emit(model, info)

    def _on_tokens(self, request_id: int, text: str) -> None:
        if request_id == self._current:
            self.tokens_decoded.emit(text)

    def _on_finished(self, request_id: int, reply: str, result) -> None:
        if request_id == self._current:
            self._current = None
            self.finished.emit(reply, result)

    def _on_failed(self, request_id: int, message: str) -> None:
        if request_id == self._current:
            self._current = None
            self.failed.emit(message)

    def _on_progressed(self, request_id: int, used: int, size: int) -> None:
        if request_id == self._current:
            self.measured.emit(used, size)

    def _on_measured(self, request_id: int, used: int, size: int) -> None:
        if request_id == self._measure_id:
            self.measured.emit(used, size)

    def shutdown(self, timeout_ms: int = 10000) -> bool:
        """Stop generating, end the thread and wait for it; then close the model. True when the thread ended."""
        self.abandon()
        self.worker.cancel(self._last_id + (1 << 30))   # queued requests too
        self._thread.quit()
        ended = self._thread.wait(timeout_ms)
        if ended:
            self.worker.close_model()
        return ended
