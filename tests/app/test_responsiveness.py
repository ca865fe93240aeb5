"""The GUI thread never waits on the engine: a 10 ms timer keeps firing on time (largest gap under 50 ms) while
replies stream and while models load.

A stall of the app's own making shows in every run; a busy machine (other processes taking the 2 cores) adds
random gaps. So each scenario is measured up to ATTEMPTS times and the best run is what must stay under 50 ms.
"""
import time

from PySide6.QtCore import QTimer

import os

from app_helpers import DEFAULT, HF_FOLDER, Q4, TIMEOUT_MS, wait_idle

LIMIT_S = 0.050
ATTEMPTS = 3


class GapMeter:
    """The largest interval between ticks of a 10 ms timer."""

    def __init__(self):
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.largest = 0.0
        self.ticks = 0

    def __enter__(self):
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self.busy = 0.0                     # the GUI thread's own CPU time during the largest gap
        self.timer.start()
        return self

    def _tick(self):
        now, cpu = time.perf_counter(), time.thread_time()
        if now - self._last > self.largest:
            self.largest, self.busy = now - self._last, cpu - self._last_cpu
        self._last, self._last_cpu = now, cpu
        self.ticks += 1

    def __exit__(self, *exc):
        self.timer.stop()


def best_of(scenario) -> list:
    """Run `scenario(meter)` until one run stays under the limit (at most ATTEMPTS); the largest gap of each."""
    gaps = []
    for _ in range(ATTEMPTS):
        with GapMeter() as meter:
            scenario(meter)
        gaps.append((meter.largest, meter.busy))
        if meter.largest < LIMIT_S:
            break
    return gaps


def describe(gaps) -> str:
    return ", ".join(f"{1000 * gap:.1f} ms (GUI thread busy {1000 * busy:.1f} ms of it)" for gap, busy in gaps)


def test_no_stall_while_generating(qtbot, window):
    window.chat.send("count from 1 to 30")
    wait_idle(qtbot, window)                         # warm: first-use costs are not what is measured

    def generate(meter):
        start = time.perf_counter()
        for _ in range(8):
            window.chat.regenerate()
            wait_idle(qtbot, window)
        window.chat.send("say the alphabet")
        wait_idle(qtbot, window)
        assert meter.ticks > 0.5 * (time.perf_counter() - start) / 0.010

    gaps = best_of(generate)
    tokens = sum(m.meta.get("stats", {}).get("generated_tokens", 0) for m in window.chat.messages)
    print(f"\nlargest event-loop gap while generating: {describe(gaps)}")
    assert tokens > 10
    assert min(gap for gap, _ in gaps) < LIMIT_S


def test_no_stall_while_loading(qtbot, window):
    # a Hugging Face folder is converted at load (safetensors read, weights quantized): the heaviest load
    paths = (Q4, DEFAULT, HF_FOLDER, DEFAULT) if os.path.isdir(HF_FOLDER) else (Q4, DEFAULT, Q4, DEFAULT)

    def load(meter):
        start = time.perf_counter()
        while time.perf_counter() - start < 0.5:       # at least half a second of loading, whatever the disk cache
            for path in paths:
                window.open_model(path)
                qtbot.waitUntil(lambda p=path: window.models.info.path == p and not window.models.loading,
                                timeout=TIMEOUT_MS)
        assert meter.ticks > 10

    gaps = best_of(load)
    print(f"\nlargest event-loop gap while loading: {describe(gaps)}")
    assert min(gap for gap, _ in gaps) < LIMIT_S
