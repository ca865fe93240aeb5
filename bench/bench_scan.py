#!/usr/bin/env python3
"""The recurrent mixers' scans alone, chunked against token by token, at realistic shapes (issue 17).

Times the scan of one layer over a prompt of T tokens from a zero state, in one C call, each form in turn, best of
--rounds, for each thread count; prints the times and the ratio recurrent / chunked (above 1: the chunked form is
faster). The inputs are random but shaped as the model's: q and k l2-normed, decays and gates in their ranges.

  deltanet  Gated DeltaNet's rule, Qwen3-Next / Qwen3.5-small-like: 16 value heads, dk = dv = 128 (pt_delta_rule)
  ssd       Mamba-2's SSD scan, mamba2-130m-like: 24 heads of 64 channels, d_state 128, one group (pt_ssd_scan)
  mamba     Mamba-1's selective scan with its gate, mamba-130m's: d_inner 1536, d_state 16 (pt_selective_scan)
  mixer     mamba-130m's whole mixer op at q8_0 (in_proj, conv, x_proj, dt_proj, the scan, out_proj: pt_mamba_run)

PETIT_ISA=scalar times both forms on the scalar path (what the ratio owes to the instruction set).

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


def mamba(T, rng):
    di, ds = 1536, 16
    u, z = (rng.standard_normal((T, di)).astype(np.float32) for _ in range(2))
    dt = rng.exponential(0.05, (T, di)).astype(np.float32)
    A = (-np.arange(1, ds + 1, dtype=np.float32)[None, :] * np.ones((di, 1), np.float32)).copy()
    B, C = (rng.standard_normal((T, ds)).astype(np.float32) for _ in range(2))
    D = rng.standard_normal(di).astype(np.float32)
    S, y = np.zeros((di, ds), np.float32), np.empty((T, di), np.float32)

    def run(mode):
        S[:] = 0
        assert lib.pt_selective_scan(P(u), P(dt), P(A), P(B), P(C), P(D), P(z), T, di, ds, P(S), P(y), mode) == 0
    return run, f"d_inner {di}, d_state {ds}"


def mixer(T, rng):
    from petit.models.blocks.ssm import Mamba
    from petit.native import Weight, prefers_interleaved
    D, di, ds, R, K = 768, 1536, 16, 48, 4

    def mat(r, c, dtype="q8_0"):         # q8_0 interleaved where the loader would (x86)
        w = Weight.from_float((rng.standard_normal((r, c)) / np.sqrt(c)).astype(np.float32), dtype)
        return w.interleave() if dtype == "q8_0" and prefers_interleaved() else w
    w = [mat(2 * di, D), rng.standard_normal((di, K)).astype(np.float32) / 2, np.zeros(di, np.float32),
         mat(R + 2 * ds, di), mat(di, R, "f32"), np.full(di, -4.0, np.float32),
         (-np.arange(1, ds + 1, dtype=np.float32)[None, :] * np.ones((di, 1), np.float32)).copy(),
         np.ones(di, np.float32), mat(D, di), ds, K, R]
    forms = {mode: Mamba(*w, scan=form) for form, mode in FORMS.items()}
    x = rng.standard_normal((T, D)).astype(np.float32)
    conv, S, y = np.zeros((di, K - 1), np.float32), np.zeros((di, ds), np.float32), np.empty((T, D), np.float32)

    def run(mode):
        conv[:], S[:] = 0, 0
        assert forms[mode].run(P(x), T, P(conv), P(S), P(y)) == 0
    return run, "mamba-130m's mixer, q8_0"


MIXERS = {"deltanet": deltanet, "ssd": ssd, "mamba": mamba, "mixer": mixer}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixer", default="deltanet,ssd,mamba")
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
