#!/usr/bin/env python3
"""Where a 7-8B decode and prefill spend their time, per matrix kind (issue 31): Petit's kernels on the matrices of
a Qwen2.5-7B layer (q, k / v, o, gate / up, down) and its LM head, by block type, against the machine's measured read
bandwidth and int8 peak (bench/bench_limits.py).

decode: one token (T=1) through --copies different matrices of the kind in turn (from memory, not the caches, as
a decode step reads them; --mib in all, default 1 GiB, past the L3): ms per matrix and GB/s of the matrix's own bytes, as % of the read bandwidth.
prefill: --tokens tokens (default 512) through one matrix: GOPS (2 x rows x cols x T / s; int8 multiply-adds) as %
of the int8 peak. q8_0 / q4_0 are interleaved, as a load makes them on x86; the K-quants and IQ4_XS run as stored.
Random blocks with finite scales (speed does not depend on the values). Timings alternate between the types, sample
by sample, and each cell is the median of --repeat samples.

Usage: python bench/bench_big_kernels.py [--types q4_k,q5_k,q6_k,q8_0] [--kinds qo,kv,gateup,down,lm_head]
                                         [--threads 2] [--repeat 5] [--tokens 512] [--no-prefill] [--shape 7b]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # this checkout's petit
from bench_gguf_decode import random_matrix  # noqa: E402
from petit import native as K  # noqa: E402

SHAPES = {"7b": dict(h=3584, kv=512, inter=18944, vocab=152064),
          "3b": dict(h=2048, kv=256, inter=11008, vocab=151936)}


def kinds(s: dict) -> dict:
    return {"qo": (s["h"], s["h"]), "kv": (s["kv"], s["h"]), "gateup": (s["inter"], s["h"]),
            "down": (s["h"], s["inter"]), "lm_head": (s["vocab"], s["h"])}


def make(t: str, rows: int, cols: int, seed: int) -> K.Weight:
    if t in ("q8_0", "q4_0"):
        x = np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32) * 0.02
        W = K.Weight(K.quantize(x, t), t, (rows, cols))
        return W.interleave() if K.prefers_interleaved() else W
    return K.Weight(random_matrix(t.upper(), rows, cols, seed), t, (rows, cols))


def timed(Ws, x, out, target=0.3) -> float:
    for W in Ws:
        K.matmul(W, x, out=out)
    t0, n = time.perf_counter(), 0
    while True:
        for W in Ws:
            K.matmul(W, x, out=out)
        n += len(Ws)
        dt = time.perf_counter() - t0
        if dt >= target:
            return dt / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="q4_k,q5_k,q6_k,q8_0")
    ap.add_argument("--kinds", default="qo,kv,gateup,down,lm_head")
    ap.add_argument("--shape", default="7b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--copies", type=int, default=0, help="matrices per kind for decode (default: >= --mib)")
    ap.add_argument("--mib", type=int, default=1024, help="decode: at least this many MiB of copies in all")
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--no-limits", action="store_true")
    a = ap.parse_args()
    K.configure(threads=a.threads)
    lim = None
    if not a.no_limits:
        from bench_limits import limits
        lim = limits(a.threads)
        print(f"read {lim['read_gbs']:.1f} GB/s, int8 {lim['int8_gops']:.0f} GOPS ({lim['int8_kernel']}), "
              f"{a.threads} threads")
    print(f"path {K.info()['isa']}, amx {K.info().get('amx')}; Qwen2.5-{a.shape} matrices")
    print("| kind | [rows, cols] | type | MiB | decode ms | GB/s | % bw | prefill GOPS | % int8 peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    types = a.types.split(",")
    for kind in a.kinds.split(","):
        rows, cols = kinds(SHAPES[a.shape])[kind]
        x1 = np.random.default_rng(1).standard_normal((1, cols), dtype=np.float32)
        o1 = np.empty((1, rows), np.float32)
        xp = np.random.default_rng(2).standard_normal((a.tokens, cols), dtype=np.float32)
        op = np.empty((a.tokens, rows), np.float32)
        res = {}
        for t in types:
            W0 = make(t, rows, cols, 0)
            n = a.copies or max(1, (a.mib << 20) // W0.raw.nbytes + 1)
            res[t] = dict(Ws=[W0] + [make(t, rows, cols, s) for s in range(1, n)], dec=[], pf=[])
        for _ in range(a.repeat):
            for t in types:
                res[t]["dec"].append(timed(res[t]["Ws"], x1, o1))
                if not a.no_prefill:
                    res[t]["pf"].append(timed(res[t]["Ws"][:1], xp, op, target=0.5))
        for t in types:
            nbytes = res[t]["Ws"][0].raw.nbytes
            d = statistics.median(res[t]["dec"])
            gbs = nbytes / d / 1e9
            bw = f"{100 * gbs / lim['read_gbs']:.0f}" if lim else "-"
            if res[t]["pf"]:
                g = 2 * rows * cols * a.tokens / statistics.median(res[t]["pf"]) / 1e9
                pk = f"{100 * g / lim['int8_gops']:.0f}" if lim else "-"
                pf = f"{g:.0f} | {pk}"
            else:
                pf = "- | -"
            print(f"| {kind} | [{rows}, {cols}] | {t} | {nbytes / 2**20:.1f} | {d * 1e3:.3f} | {gbs:.1f} | {bw} | "
                  f"{pf} |", flush=True)
        del res


if __name__ == "__main__":
    main()
