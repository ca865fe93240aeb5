"""A function run on its own QThread: `succeeded(result)` or `failed(message)`, then `ended()`, all delivered
queued to the GUI thread. The function gets a `report(obj)` callable that emits `progressed(obj)` and can poll
`job.cancelled`. Owners keep the job until `ended`, then `wait()` (immediate) and `deleteLater()`; at shutdown
they `cancel()` and `wait()`."""
from PySide6.QtCore import QThread, Signal

from app.threads import CancellableThread


class Job(CancellableThread):
    progressed = Signal(object)
    succeeded = Signal(object)
    failed = Signal(str)
    ended = Signal()                 # always last

    def __init__(self, fn, *args, name: str = "petit-job", parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self._fn, self._args = fn, args

    def run(self) -> None:
        try:
            result = self._fn(*self._args, report=self.progressed.emit)
        except Exception as e:            # the trainer's, exporter's and verifier's errors are sentences
            self.failed.emit(error_text(e))
        else:
            self.succeeded.emit(result)
        finally:
            self.ended.emit()


def error_text(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, FileNotFoundError):
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        return f"{where}{e.strerror or e}"
    return str(e).strip() or type(e).__name__


class JobSlot:
    """At most one job at a time for a panel, released when it ends; `shutdown()` cancels and joins it."""

    def __init__(self):
        self.job: Job | None = None
        self._then = None

    @property
    def busy(self) -> bool:
        return self.job is not None

    def start(self, job: Job, then=None) -> Job:
        """Run `job`; `then()` runs on the GUI thread once it has ended and the slot is free again."""
        if self.job is not None:
            raise RuntimeError("a job is already running")
        self.job, self._then = job, then
        job.ended.connect(self._release)
        job.start(QThread.Priority.LowPriority)
        return job

    def _release(self) -> None:
        job, self.job, then = self.job, None, self._then
        self._then = None
        if job is not None:
            job.wait()
            job.deleteLater()
        if then is not None:
            then()

    def shutdown(self) -> None:
        """Cancel the job and wait for its thread; nothing it still sends is acted on."""
        job, self.job, self._then = self.job, None, None
        if job is not None:
            job.cancel()
            job.wait()
            job.deleteLater()
