#!/usr/bin/env python3
"""Decode speed of the bundled model: the forward step as one C call (the plan, kernels/plan.c) against the per-op
path driven from Python (`Decoder.forward(..., oracle=True)`), in the same process, interleaved.

What is timed: a 16-token prompt into a fresh cache (untimed), then greedy decode at positions 16..127 (112
tokens: one forward of the last token, the argmax of its logits), the bundled model's whole context. A sample
repeats that until it lasts ~0.2 s and gives tokens/s; each round takes one sample of each path, the order
alternating round by round, so load on the machine hits both; the table shows the median over rounds and the
plan / per-op ratio. The issue's goal (issue 14): >= 5,000 tokens/s on one thread.

Usage: python bench/bench_step.py [--threads 1] [--rounds 7] [--models default-q8_0.petit,default-q4_0.petit]
                                  [--kv f32|int8]
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

PROMPT, END = 16, 128       # decode positions PROMPT .. END - 1
SAMPLE_S = 0.2


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def decode_rate(model, oracle: bool, kv: str) -> float:
    """Tokens/s of greedy decode over positions PROMPT..END-1, repeated for about SAMPLE_S seconds."""
    net, V = model.net, model.vocab_size
    prompt = np.arange(1, PROMPT + 1, dtype=np.int32) % V
    logits = np.empty((1, V), np.float32)
    ids = np.empty(1, np.int32)
    tokens, spent = 0, 0.0
    while spent < SAMPLE_S:
        cache = model.new_cache(END, kv_type=kv)
        net.forward(prompt, cache, logits, oracle=oracle)
        t0 = time.perf_counter()
        for _ in range(END - PROMPT):
            ids[0] = int(logits[0].argmax())
            net.forward(ids, cache, logits, oracle=oracle)
        spent += time.perf_counter() - t0
        tokens += END - PROMPT
    return tokens / spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--models", default="default-q8_0.petit,default-q4_0.petit")
    ap.add_argument("--kv", default="f32", choices=["f32", "int8"])
    args = ap.parse_args()
    os.environ["PETIT_THREADS"] = str(args.threads)     # read when petit.native is first imported
    import petit
    from petit.assets import default_model_path
    from petit.native import info

    i = info()
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs), kernel path {i['isa']}, {i['threads']} thread(s); "
          f"features {i['cpu_features']}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; python {sys.version.split()[0]}")
    print(f"decode positions {PROMPT}..{END - 1}, {args.kv} KV cache, median of {args.rounds} interleaved rounds\n")
    print(f"{'model':<22} {'C step tok/s':>13} {'per-op tok/s':>13} {'ratio':>6} {'us/token (C step)':>18}")
    for name in args.models.split(","):
        model = petit.load(default_model_path(name))
        for oracle in (False, True):            # warm both paths: plan built, tables made, pages touched
            decode_rate(model, oracle, args.kv)
        rates = {False: [], True: []}
        for r in range(args.rounds):
            for oracle in ((False, True) if r % 2 == 0 else (True, False)):
                rates[oracle].append(decode_rate(model, oracle, args.kv))
        plan, per_op = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"{name:<22} {plan:>13,.0f} {per_op:>13,.0f} {plan / per_op:>6.2f} {1e6 / plan:>18.1f}")
        print(f"{'':<22} {'(' + ' '.join(f'{x:,.0f}' for x in rates[False]) + ')'}")
        print(f"{'':<22} {'(' + ' '.join(f'{x:,.0f}' for x in rates[True]) + ')'}")
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
