"""app.threads.Worker, the app's one worker thread: progress, result or error, then `ended`, all on the GUI thread;
a cancelled worker's late result goes to `discard`; stop() cancels and joins."""
import threading

from PySide6.QtCore import QThread

from app.threads import Worker, WorkerSlot, error_text

TIMEOUT_MS = 10000


def record(worker) -> list:
    seen = []
    gui = QThread.currentThread()
    worker.progressed.connect(lambda x: seen.append(("progressed", x, QThread.currentThread() is gui)))
    worker.succeeded.connect(lambda x: seen.append(("succeeded", x, QThread.currentThread() is gui)))
    worker.failed.connect(lambda x: seen.append(("failed", x, QThread.currentThread() is gui)))
    worker.ended.connect(lambda: seen.append(("ended", None, QThread.currentThread() is gui)))
    return seen


def test_progress_then_the_result_then_ended_on_the_gui_thread(qtbot):
    def work(a, b, report):
        report(a)
        report(b)
        return a + b
    worker = Worker(work, 2, 3, name="petit-test")
    seen = record(worker)
    worker.start()
    qtbot.waitUntil(lambda: bool(seen) and seen[-1][0] == "ended", timeout=TIMEOUT_MS)
    assert worker.wait(TIMEOUT_MS) and worker.objectName() == "petit-test"
    assert seen == [("progressed", 2, True), ("progressed", 3, True), ("succeeded", 5, True), ("ended", None, True)]


def test_an_exception_is_failed_with_a_sentence(qtbot):
    def work(report):
        raise PermissionError(13, "Permission denied", "/data/model.petit")
    worker = Worker(work)
    seen = record(worker)
    worker.start()
    qtbot.waitUntil(lambda: bool(seen) and seen[-1][0] == "ended", timeout=TIMEOUT_MS)
    worker.wait()
    assert seen == [("failed", "/data/model.petit: Permission denied", True), ("ended", None, True)]
    assert error_text(ValueError("")) == "ValueError"
    assert error_text(FileNotFoundError("m.petit: file not found")) == "m.petit: file not found"


def test_a_cancelled_workers_result_is_discarded_and_stop_joins(qtbot):
    gate, discarded = threading.Event(), []

    def work(report):
        gate.wait(10)
        return "model"
    worker = Worker(work, discard=discarded.append)
    seen = record(worker)
    worker.start()
    worker.cancel()
    assert worker.cancelled
    gate.set()
    assert worker.stop(TIMEOUT_MS) and worker.isFinished()
    qtbot.waitUntil(lambda: seen == [("ended", None, True)], timeout=TIMEOUT_MS)
    assert discarded == ["model"]


def test_a_slot_runs_one_worker_and_frees_itself(qtbot):
    slot, done = WorkerSlot(), []
    gate = threading.Event()
    slot.start(Worker(lambda report: gate.wait(10)), then=lambda: done.append(slot.busy))
    assert slot.busy
    gate.set()
    qtbot.waitUntil(lambda: done == [False], timeout=TIMEOUT_MS)
    workers = []

    def until_cancelled(report):                     # long work that polls the cancel flag
        while not workers[0].cancelled:
            gate.wait(0.01)
    workers.append(Worker(until_cancelled))
    slot.start(workers[0])
    slot.shutdown()                                  # cancels and joins
    assert not slot.busy and workers[0].isFinished()
