"""The app's one worker-thread class (a small superqt FunctionWorker): `Worker(fn, *args)` runs
`fn(*args, report=...)` on its own QThread; `report(obj)` emits `progressed(obj)`, the return value `succeeded`, an
exception `failed(message)`, and `ended()` always comes last. The signals reach receivers on the GUI thread queued
(the Worker object itself lives there), so nothing on the worker touches a widget.

Cancelling is a flag (`cancel()`, safe from any thread) that long work polls (`worker.cancelled`); work that cannot
be interrupted (petit.load) runs to its end, and its result, if a `discard` callable was given, is handed to that
on the worker thread instead of `succeeded` (a model loaded for nobody is closed at once). Every owner keeps its
workers until `ended`, then `wait()`s (immediate) and `deleteLater()`s; as the window closes it `stop()`s them
(cancel and join). WorkerSlot does that bookkeeping for at most one worker at a time. Connect the signals to
methods of QObjects (or to other signals), not to lambdas or partials: a slot that needs to know which worker spoke
asks `self.sender()`."""
import threading

from PySide6.QtCore import QObject, QThread, Signal


class Worker(QThread):
    progressed = Signal(object)
    succeeded = Signal(object)
    failed = Signal(str)             # error_text of the exception
    ended = Signal()                 # always last, also when cancelled

    def __init__(self, fn, *args, name: str = "petit-worker", discard=None, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self._fn, self._args, self._discard = fn, args, discard
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Ask the work to stop (safe from any thread): it polls `cancelled`; a result still to come is discarded
        when a `discard` was given."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def stop(self, timeout_ms: int = -1) -> bool:
        """Cancel and wait for the thread to end (forever by default); True once it has."""
        self.cancel()
        return self.wait() if timeout_ms < 0 else self.wait(timeout_ms)

    def run(self) -> None:
        try:
            result = self._fn(*self._args, report=self.progressed.emit)
        except Exception as e:            # the engine's, trainer's, exporter's and verifier's errors are sentences
            self.failed.emit(error_text(e))
        else:
            if self._discard is not None and self.cancelled:
                self._discard(result)
            else:
                self.succeeded.emit(result)
        finally:
            self.ended.emit()


def error_text(e: BaseException) -> str:
    """What a person reads for an exception raised on a worker: its message, with the file an OSError names."""
    filename = getattr(e, "filename", None)
    if isinstance(e, OSError) and not isinstance(e, FileNotFoundError):
        return f"{filename}: {e.strerror or e}" if filename else str(e.strerror or e)
    text = str(e).strip()
    if isinstance(e, FileNotFoundError) and filename and str(filename) not in text:
        text = f"{filename}: {text}"
    return text or type(e).__name__


class WorkerSlot(QObject):
    """At most one worker at a time for a panel, released when it ends; `shutdown()` stops and joins it. (A QObject,
    so a worker's `ended` reaches it through an ordinary queued connection that dies with either end.)"""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.worker: Worker | None = None
        self._then = None

    @property
    def busy(self) -> bool:
        return self.worker is not None

    def start(self, worker: Worker, then=None) -> Worker:
        """Run `worker` (at low priority: the window goes first); `then()` runs on the GUI thread once it has
        ended and the slot is free again."""
        if self.worker is not None:
            raise RuntimeError("a worker is already running")
        self.worker, self._then = worker, then
        worker.ended.connect(self._release)
        worker.start(QThread.Priority.LowPriority)
        return worker

    def _release(self) -> None:
        worker, self.worker, then = self.worker, None, self._then
        self._then = None
        if worker is not None:
            worker.wait()
            worker.deleteLater()
        if then is not None:
            then()

    def shutdown(self) -> None:
        """Stop the worker and wait for its thread; nothing it still sends is acted on."""
        worker, self.worker, self._then = self.worker, None, None
        if worker is not None:
            worker.stop()
            worker.deleteLater()
