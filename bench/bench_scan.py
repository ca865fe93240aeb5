#!/usr/bin/env python3
"""The recurrent mixers' scans alone, chunked against token by token, at realistic shapes (issue 17).

Times the scan of one layer over a prompt of T tokens from a zero state, in one C call, each form in turn, best of
--rounds, for each thread count; prints the times and the ratio recurrent / chunked (above 1: the chunked form is
faster). The inputs are random but shaped as the model's: q and k l2-normed, decays and gates in their ranges.

  deltanet  Gated DeltaNet's rule, Qwen3-Next / Qwen3.5-small-like: 16 value heads, dk = dv = 128 (pt_delta_rule)
  ssd       Mamba-2's SSD scan, mamba2-130m-like: 24 heads of 64 channels, d_state 128, one group (pt_ssd_scan)

    python bench/bench_scan.py [--mixer deltanet] [--T 512,2048] [--threads 1,2] [--rounds 3]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from petit.native import configure, ffi, lib  # noqa: E402

P = lambda a: ffi.cast("float *", ffi.from_buffer(a))      # noqa: E731
FORMS = {"recurrent": 1, "chunked": 2}


def deltanet(T, rng):
    H, dk, dv = 16, 128, 128
    q = rng.standard_normal((T, H, dk)).astype(np.float32)
    q /= np.linalg.norm(q, axis=-1, keepdims=True) * np.sqrt(dk)
    k = rng.standard_normal((T, H, dk)).astype(np.float32)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((T, H, dv)).astype(np.float32)
    g = -rng.exponential(0.3, (T, H)).astype(np.float32)
    beta = rng.uniform(0, 1, (T, H)).astype(np.float32)
    S, o = np.zeros((H, dk, dv), np.float32), np.empty((T, H, dv), np.float32)

    def run(mode):
        S[:] = 0
        assert lib.pt_delta_rule(P(q), P(k), P(v), P(g), P(beta), T, H, dk, dv, P(S), P(o), mode) == 0
    return run, f"H {H}, dk {dk}, dv {dv}"


def ssd(T, rng):
    H, G, P_, N = 24, 1, 64, 128
    x = rng.standard_normal((T, H, P_)).astype(np.float32)
    B, C = (rng.standard_normal((T, G, N)).astype(np.float32) for _ in range(2))
    dt = rng.exponential(0.05, (T, H)).astype(np.float32)
    A = -rng.uniform(1, 16, H).astype(np.float32)
    S, y = np.zeros((H, P_, N), np.float32), np.empty((T, H, P_), np.float32)

    def run(mode):
        S[:] = 0
        assert lib.pt_ssd_scan(P(x), P(B), P(C), P(dt), P(A), T, H, G, P_, N, P(S), P(y), mode) == 0
    return run, f"H {H}, P {P_}, N {N}, G {G}"


MIXERS = {"deltanet": deltanet, "ssd": ssd}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixer", default=",".join(MIXERS))
    ap.add_argument("--T", default="512,2048")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'mixer':10} {'shape':28} {'T':>5} {'thr':>3} {'recurrent ms':>13} {'chunked ms':>11} {'ratio':>6}")
    for name in a.mixer.split(","):
        for T in (int(t) for t in a.T.split(",")):
            run, shape = MIXERS[name](T, rng)
            for threads in (int(t) for t in a.threads.split(",")):
                configure(threads=threads)
                best = {}
                for _ in range(a.rounds):              # the forms alternate, so drifting load hits both
                    for form, mode in FORMS.items():
                        t0 = time.perf_counter()
                        run(mode)
                        dt = time.perf_counter() - t0
                        best[form] = min(best.get(form, dt), dt)
                r, c = best["recurrent"] * 1e3, best["chunked"] * 1e3
                print(f"{name:10} {shape:28} {T:5d} {threads:3d} {r:13.2f} {c:11.2f} {r / c:6.2f}", flush=True)


if __name__ == "__main__":
    main()
