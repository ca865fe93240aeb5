#!/usr/bin/env python3
"""Decode speed (one token, T=1) of GGUF block types multiplied as stored against the same values decoded to q8_0 and
interleaved, as a load does on x86 for the types it does not keep (kernels/kern_x86_gguf.h, kern_x86_kq2.h).

For each type and thread count: ms per call and GB/s (the matrix's own bytes read per call: a stored Q2_K matrix is
about a third of its q8_0 form) on [4864, 1024] matrices (Qwen2.5-0.5B's MLP shape with whole super-blocks), two
ways: `hot`, one matrix called again and again (4.9 MiB as q8_0: from the caches, the kernels' arithmetic alone),
and `stream`, --layers different matrices called in turn, as a decode step calls a model's layers (24 x 4.9 MiB as
q8_0: from memory, more than a last-level cache holds). The matrices are random blocks with finite scales (a
product's speed does not depend on the values). Both forms are timed in alternation, sample by sample, and each row
reports the medians; `stored/q8` is the ratio of the times (below 1: as stored is faster). On a machine others load,
--cpu times the one-thread rows by the calling thread's CPU time (the pool's thread 0 is the caller), which a
preempted call does not inflate.

Usage: python bench/bench_gguf_decode.py [--types Q2_K,Q3_K,IQ4_XS,Q4_K] [--threads 1,2] [--repeat 7] [--layers 24]
                                         [--cpu]
"""
import argparse
import statistics
import time

import numpy as np

from petit import native as K

# bytes per super-block of 256 values, and where its fp16 scales sit (GGUF's layouts, kernels/gguf_quants.c)
LAYOUT = {"Q2_K": (84, (80, 82)), "Q3_K": (110, (108,)), "Q4_K": (144, (0, 2)), "Q5_K": (176, (0, 2)),
          "Q6_K": (210, (208,)), "IQ4_XS": (136, (0,))}


def random_matrix(gguf_type: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """rows x cols values of gguf_type as random bytes, each super-block's fp16 scales set to small finite values."""
    size, halves = LAYOUT[gguf_type]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows * cols // 256, size), dtype=np.uint8)
    for at in halves:
        raw[:, at:at + 2] = (rng.uniform(0.001, 0.02, size=len(raw)).astype(np.float16)).view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, -1)


def seconds(Ws: list[K.Weight], x: np.ndarray, out: np.ndarray, target: float = 0.05, clock=time.perf_counter) -> float:
    """Seconds per matrix: one warm-up round over Ws, then rounds until about `target` has passed on `clock`."""
    for W in Ws:
        K.matmul(W, x, out=out)
    t0, n = clock(), 0
    while True:
        for W in Ws:
            K.matmul(W, x, out=out)
        n += len(Ws)
        dt = clock() - t0
        if dt >= target:
            return dt / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="Q2_K,Q3_K,IQ4_XS")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--cpu", action="store_true", help="time one-thread rows by the thread's CPU time")
    a = ap.parse_args()
    rows, cols = 4864, 1024
    print(f"path {K.info()['isa']}; {K.cpu_features()}; [{rows}, {cols}] matrices")
    if a.cpu:
        print("one-thread rows: the thread's CPU time")
    print(f"{'type':7} {'mode':>6} {'thr':>3} | {'stored ms':>9} {'GB/s':>6} {'MiB':>5} | "
          f"{'q8_0 ms':>8} {'GB/s':>6} {'MiB':>5} | stored/q8")
    x = np.random.default_rng(1).standard_normal((1, cols), dtype=np.float32)
    out = np.empty((1, rows), dtype=np.float32)
    for name in a.types.split(","):
        stored, q8 = [], []
        for seed in range(a.layers):
            raw = random_matrix(name, rows, cols, seed)
            stored.append(K.Weight(raw, name.lower(), (rows, cols)))
            W = K.Weight(K.quantize(K.dequantize_gguf(raw, name, (rows, cols)), "q8_0"), "q8_0", (rows, cols))
            q8.append(W.interleave() if K.prefers_interleaved() else W)
        sb, qb = stored[0].raw.nbytes, q8[0].raw.nbytes
        for mode, n in (("hot", 1), ("stream", a.layers)):
            for threads in map(int, a.threads.split(",")):
                K.configure(threads=threads)
                clock = time.thread_time if a.cpu and threads == 1 else time.perf_counter
                ts, tq = [], []
                for _ in range(a.repeat):          # alternated, so machine noise hits both
                    ts.append(seconds(stored[:n], x, out, clock=clock))
                    tq.append(seconds(q8[:n], x, out, clock=clock))
                s, q = statistics.median(ts), statistics.median(tq)
                print(f"{name:7} {mode:>6} {threads:>3} | {s * 1e3:9.3f} {sb / s / 1e9:6.2f} {sb / 2**20:5.2f} | "
                      f"{q * 1e3:8.3f} {qb / q / 1e9:6.2f} {qb / 2**20:5.2f} | {s / q:6.2f}")
    K.configure()


if __name__ == "__main__":
    main()
