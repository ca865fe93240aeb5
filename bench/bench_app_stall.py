#!/usr/bin/env python3
"""How long the desktop app's event loop stalls while replies stream and while models load.

Method. A 10 ms QTimer ticks on the GUI thread of a real MainWindow (offscreen unless QT_QPA_PLATFORM says
otherwise, with a throwaway data folder); every interval between two ticks is recorded. A stall of the app's own
making (work on the GUI thread, a lock held by the worker, the GIL not handed back) shows as a long interval in every
run; other processes taking the cores add random ones, so each scenario runs --rounds times and the table shows
each round's largest gap, the GUI thread's own CPU time during that gap (near 0: the GUI thread was waiting, not
working), the 99th percentile and the median interval. The load average is printed at the start and the end.

Scenarios: "generate" sends a message, then regenerates it --replies times (the bundled model, greedy); "load"
loads the bundled q4_0 and q8_0 models and, when present, the tiny Hugging Face folder of the tests (converted at
load: the heaviest), for at least half a second per round.

The tests (tests/app/test_responsiveness.py) check that no loading or generation work runs on the GUI thread; they
never assert timings. This is where the timings are.

Usage: python bench/bench_app_stall.py [--rounds 3] [--replies 8]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_FOLDER = os.path.join(ROOT, "tests", "fixtures", "hf", "qwen2")
TIMEOUT_S = 30


class GapMeter:
    """Every interval between ticks of a 10 ms timer, and the GUI thread's CPU time during the largest."""

    def __init__(self):
        from PySide6.QtCore import QTimer
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.gaps = []
        self.largest = self.busy = 0.0

    def __enter__(self):
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self.timer.start()
        return self

    def _tick(self):
        now, cpu = time.perf_counter(), time.thread_time()
        gap = now - self._last
        self.gaps.append(gap)
        if gap > self.largest:
            self.largest, self.busy = gap, cpu - self._last_cpu
        self._last, self._last_cpu = now, cpu

    def __exit__(self, *exc):
        self.timer.stop()


def wait_until(predicate, what: str) -> None:
    from PySide6.QtTest import QTest
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"bench_app_stall: timed out waiting for {what}")
        QTest.qWait(5)


def generate(window, replies: int) -> None:
    window.chat.send("count from 1 to 30")
    wait_until(lambda: not window.chat.busy, "a reply")
    for _ in range(replies):
        window.chat.regenerate()
        wait_until(lambda: not window.chat.busy, "a reply")


def load(window, paths) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        for path in paths:
            window.open_model(path)
            wait_until(lambda p=path: window.models.info.path == p and not window.models.loading, f"loading {path}")


def row(name: str, meter: GapMeter) -> str:
    gaps = sorted(meter.gaps)
    p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] if gaps else float("nan")
    median = statistics.median(gaps) if gaps else float("nan")
    return (f"{name:<10} {1000 * meter.largest:>9.1f} {1000 * meter.busy:>10.1f} {1000 * p99:>8.1f} "
            f"{1000 * median:>8.1f} {len(gaps):>7}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="runs of each scenario (default 3)")
    p.add_argument("--replies", type=int, default=8, help="regenerated replies per generate round (default 8)")
    args = p.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory(prefix="petit-bench-stall-") as data:
        os.environ["PETIT_DATA_DIR"] = data
        return run(args)


def run(args) -> int:
    sys.path.insert(0, ROOT)
    from app.main import create_app
    from app.window import MainWindow
    from petit.assets import default_model_path

    app = create_app([])
    default = default_model_path()
    q4 = os.path.join(os.path.dirname(default), "default-q4_0.petit")
    paths = [q4, default] + ([HF_FOLDER, default] if os.path.isdir(HF_FOLDER) else [])
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; cores: {os.cpu_count()}")
    print(f"models loaded: {', '.join(os.path.basename(x) for x in paths)}")
    window = MainWindow(model_path=default)
    window.show()
    wait_until(lambda: window.chat.model_ready and not window.models.loading, "the first model")
    generate(window, 1)                                   # warm: first-use costs are not what is measured
    print(f"\n{'scenario':<10} {'largest ms':>9} {'GUI cpu ms':>10} {'p99 ms':>8} {'median':>8} {'ticks':>7}")
    try:
        for _ in range(args.rounds):
            with GapMeter() as meter:
                generate(window, args.replies)
            print(row("generate", meter))
            with GapMeter() as meter:
                load(window, paths)
            print(row("load", meter))
    finally:
        window.close()
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
