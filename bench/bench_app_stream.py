#!/usr/bin/env python3
"""How smooth the chat stays while a long reply streams: the largest event-loop gap over a 4,000-token reply.

Method. A real MainWindow (offscreen unless QT_QPA_PLATFORM says otherwise, a throwaway data folder) talks to a
scripted OpenAI-compatible backend (httpx.MockTransport, no network) that streams --tokens tokens of Markdown, prose
with a fenced Python block every 40 lines, --interval-ms apart. The reply is rendered as the app renders any reply
(Markdown, code colours, Copy headers, re-rendered at most every 33 ms). A 10 ms QTimer ticks on the GUI thread
(bench_app_stall's GapMeter); the largest interval between two ticks is the longest the window could not answer
input. Target: under 50 ms. Each round is one whole reply; the table shows each round's largest gap, the GUI
thread's CPU time during it, the 99th percentile and the median. Other processes add random gaps, hence rounds.

Usage: python bench/bench_app_stream.py [--tokens 4000] [--rounds 3] [--interval-ms 2]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 120


def words(n: int):
    """n tokens of Markdown: sentences, and a Python block every 40 lines."""
    line = 0
    out = []
    while len(out) < n:
        line += 1
        if line % 40 == 0:
            out += ["\n\n```python\n", "def ", "step", "(x):\n", "    return ", "x ", "* ", "2 ", " # double\n",
                    "```\n\n"]
        else:
            out += [f"word{len(out) % 97} " for _ in range(9)] + ["end.\n"]
    return out[:n]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--interval-ms", type=float, default=2.0)
    args = p.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["PETIT_DATA_DIR"] = tempfile.mkdtemp(prefix="petit-bench-")
    import json

    import httpx
    import keyring
    from PySide6.QtWidgets import QApplication

    import app.remote.api as api
    from bench_app_stall import GapMeter
    from app.fonts import load_fonts
    from app.window import MainWindow

    class Memory(keyring.backend.KeyringBackend):
        priority = 1
        secrets = {}

        def set_password(self, s, u, p):
            self.secrets[(s, u)] = p

        def get_password(self, s, u):
            return self.secrets.get((s, u))

        def delete_password(self, s, u):
            self.secrets.pop((s, u), None)
    keyring.set_keyring(Memory())
    tokens = words(args.tokens)

    def body():
        for t in tokens:
            chunk = {"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]}
            yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            time.sleep(args.interval_ms / 1000)
        yield b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'

    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "bench"}]})
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())
    api.transport = httpx.MockTransport(handler)

    qapp = QApplication.instance() or QApplication(sys.argv)
    load_fonts(qapp)
    w = MainWindow()
    w.resize(1100, 720)
    w.show()

    def wait(predicate):
        end = time.monotonic() + TIMEOUT_S
        while not predicate():
            qapp.processEvents()
            time.sleep(0.002)
            if time.monotonic() > end:
                raise SystemExit("timed out")
    wait(lambda: w.chat.model_ready and not w.models.loading)
    w.backends_box.url_edit.setText("https://bench.example/v1")
    w.backends_box.name_edit.setText("bench")
    w.backends_box.add_button.click()
    wait(lambda: any(k.startswith("remote:") for k, _ in w.page.switcher.items()))
    w.open_model(next(k for k, _ in w.page.switcher.items() if k.startswith("remote:")))
    wait(lambda: not w.models.loading and w.models.info.weight_type == "remote")
    print(f"{args.tokens} tokens, {args.interval_ms:g} ms apart, load average {os.getloadavg()[0]:.2f}")
    print(f"{'round':>5} {'largest gap':>12} {'GUI CPU in it':>14} {'p99':>8} {'median':>8} {'reply chars':>12}")
    worst = 0.0
    for r in range(args.rounds):
        with GapMeter() as meter:
            if r == 0:
                w.chat.send("stream")
            else:
                w.chat.regenerate()
            wait(lambda: w.chat.busy)
            wait(lambda: not w.chat.busy)
        gaps = sorted(meter.gaps)
        worst = max(worst, meter.largest)
        print(f"{r + 1:>5} {1000 * meter.largest:>10.1f}ms {1000 * meter.busy:>12.1f}ms "
              f"{1000 * gaps[int(0.99 * (len(gaps) - 1))]:>6.1f}ms {1000 * statistics.median(gaps):>6.1f}ms "
              f"{len(w.chat.messages[-1].content):>12}")
    print(f"largest gap: {1000 * worst:.1f} ms (target < 50 ms)")
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
