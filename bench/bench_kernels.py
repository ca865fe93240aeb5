#!/usr/bin/env python3
"""Throughput of petit's matmul kernels beside NumPy's float32 matmul, measured in the same run.

For every kernel path this CPU supports (scalar / avx2 / avx512) and every thread count, it times
  * matvec (one token, T=1): GB/s of weight bytes read per call (W.raw.nbytes / time), on a [4864, 896] MLP
    matrix (mostly cache-resident) and an lm_head-like [32768, 896] matrix (memory-bound; --big: [151936, 896]);
  * matmul (prefill, T=64 and T=128 tokens): GMAC/s (T*rows*cols / time) on [4864, 896] and [896, 4864];
for q8_0, q4_0, f16 and f32 weights. The NumPy peer is `x @ w.T` in float32 on the same [rows, cols] matrix
(matvec: GB/s of its f32 bytes; matmul: GMAC/s).

Method. The engine is called through `lib.pt_matmul` with pointers built once (no wrapper overhead). NumPy runs
in one child process per thread count, started with OPENBLAS_NUM_THREADS (and OMP/MKL_NUM_THREADS) equal to the
kernels' thread count: OpenBLAS reads it only at import, so a child per count is the simple honest way to match.
For each row both sides are timed in alternation, sample by sample (engine, NumPy, engine, ...), so machine noise
hits both; after each NumPy sample the bench waits SETTLE seconds, because OpenBLAS's idle threads keep spinning
for a while after a call and would otherwise take the cores from the engine's next sample; each sample is one
warm-up call (skipped for calls over 50 ms) plus enough calls to last ~30 ms, and a
row reports the median sample of each side. `ratio` divides the engine's rate by NumPy's (for matvec that is
bandwidth efficiency; a q4_0 matrix is ~7x smaller than f32, so `speedup` = NumPy time / engine time is the
wall-clock gain). On a loaded 2-core machine the 2-thread rows are noisy; the load average is printed.

NumPy as configured. The children inherit your environment apart from the thread count. If OPENBLAS_CORETYPE (or
OPENBLAS_L2_SIZE) is set, OpenBLAS uses a slower core than it would pick; to compare against a full-speed NumPy run
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_kernels.py
Prefill mode (--prefill): the matmuls of a 512-token prefill on Qwen2.5-0.5B's shapes ([896, 896] q/o, [128, 896]
k/v, [4864, 896] gate/up, [896, 4864] down) in q8_0 and q4_0, as GOPS (2 * T * rows * cols / time), for this checkout
and, with --baseline DIR, for another checkout with its own built kernels (e.g. `git worktree add /tmp/base main`,
then build it there): each side runs in its own child process (PYTHONPATH = its checkout), timed in alternation
sample by sample, and `new/base` is the ratio of the medians.

Usage: python bench/bench_kernels.py [--threads 1,2] [--paths scalar,avx2] [--dtypes q8_0,f32] [--repeat 7]
                                     [--big] [--quick]
       python bench/bench_kernels.py --prefill [--baseline DIR] [--threads 1,2] [--paths avx2] [--tokens 512]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

NP_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
USER_ENV = {k: os.environ.get(k) for k in NP_ENV}
WORKER = sys.argv[1:2] == ["--numpy-worker"]
ENGINE_WORKER = sys.argv[1:2] == ["--engine-worker"]
if not (WORKER or ENGINE_WORKER):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # the parent never calls BLAS: keep its idle OpenBLAS pool small
import numpy as np  # noqa: E402

SLOW_CALL = 0.05  # seconds: calls slower than this get no per-sample warm-up, and at most 3 samples
SETTLE = 0.15          # seconds for the peer's idle BLAS threads to stop spinning


def matrix(rows: int, cols: int) -> np.ndarray:
    return np.random.default_rng(rows * 131 + cols).standard_normal((rows, cols), dtype=np.float32)


def timed(fn, inner: int, warm: bool) -> float:
    """Seconds per call of fn, averaged over `inner` back-to-back calls (after one untimed call if warm)."""
    if warm:
        fn()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def blas_info() -> dict:
    """NumPy's BLAS as built, plus (best effort, via ctypes) the core and thread count OpenBLAS runs with."""
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    info = {"numpy": np.__version__, "blas": f"{blas.get('name')} {blas.get('version')}", "core": "?", "threads": "?"}
    try:
        import ctypes
        paths = {ln.split()[-1] for ln in open("/proc/self/maps") if "openblas" in ln.lower() and ".so" in ln}
        for path in paths:
            so = ctypes.CDLL(path)
            for pre, suf in (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", "")):
                if hasattr(so, f"{pre}get_num_threads{suf}"):
                    info["threads"] = getattr(so, f"{pre}get_num_threads{suf}")()
                    getattr(so, f"{pre}get_corename{suf}").restype = ctypes.c_char_p
                    info["core"] = getattr(so, f"{pre}get_corename{suf}")().decode()
                    return info
    except Exception:  # informational only
        pass
    return info


def numpy_worker() -> None:
    """Child: answers 'rows cols T inner warm' lines with the seconds per call of `x @ w.T` (float32)."""
    ws, bufs = {}, {}
    print(json.dumps(blas_info()), flush=True)
    for line in sys.stdin:
        rows, cols, T, inner, warm = map(int, line.split())
        if (rows, cols) not in ws:
            ws[(rows, cols)] = matrix(rows, cols)
        if (rows, cols, T) not in bufs:
            bufs[(rows, cols, T)] = (matrix(T, cols), np.empty((T, rows), np.float32))
        wt, (x, y) = ws[(rows, cols)].T, bufs[(rows, cols, T)]
        print(timed(lambda: np.matmul(x, wt, out=y), inner, bool(warm)), flush=True)


class NumpyPeer:
    """A NumPy child process pinned (by environment) to `threads` BLAS threads."""

    def __init__(self, threads: int):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--numpy-worker"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.p.stdout.readline())

    def time(self, rows: int, cols: int, T: int, inner: int, warm: bool) -> float:
        self.p.stdin.write(f"{rows} {cols} {T} {inner} {int(warm)}\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def measure(engine, peer: NumpyPeer, shape, T: int, repeat: int, target: float) -> tuple[float, float]:
    """Median seconds per call of the engine and of NumPy, sampled alternately."""
    rows, cols = shape
    t_e, t_n = timed(engine, 1, True), peer.time(rows, cols, T, 1, True)   # warm-up and first estimate
    time.sleep(SETTLE)
    inner_e, inner_n = max(1, round(target / t_e)), max(1, round(target / t_n))
    slow = max(t_e, t_n) >= SLOW_CALL      # slow calls: the estimate is kept as the first sample
    se, sn = ([t_e], [t_n]) if slow else ([], [])
    while len(se) < (min(repeat, 3) if slow else repeat):
        se.append(timed(engine, inner_e, t_e < SLOW_CALL))
        sn.append(peer.time(rows, cols, T, inner_n, t_n < SLOW_CALL))
        time.sleep(SETTLE)
    return statistics.median(se), statistics.median(sn)


PREFILL_SHAPES = [(896, 896), (128, 896), (4864, 896), (896, 4864)]


def engine_worker() -> None:
    """Child: answers 'path threads dtype rows cols T inner warm' lines with the seconds per call of pt_matmul, for
    the petit found first on sys.path (the checkout the parent put on PYTHONPATH)."""
    from petit import native as K
    weights, bufs = {}, {}
    print(json.dumps({"petit": os.path.dirname(K.__file__)}), flush=True)
    for line in sys.stdin:
        path, threads, dtype, rows, cols, T, inner, warm = line.split()
        rows, cols, T, inner, warm = int(rows), int(cols), int(T), int(inner), int(warm)
        if K.info()["isa"] != path or K.lib.pt_n_threads() != int(threads):
            K.configure(threads=int(threads), isa=path)
        if (dtype, rows, cols) not in weights:
            weights[(dtype, rows, cols)] = K.Weight.from_float(matrix(rows, cols), dtype)
        if (rows, cols, T) not in bufs:
            x, y = matrix(T, cols), np.empty((T, rows), np.float32)
            bufs[(rows, cols, T)] = (x, y, K.ffi.cast("float *", K.ffi.from_buffer(x)),
                                     K.ffi.cast("float *", K.ffi.from_buffer(y)))
        Wc, (_, _, xp, yp) = weights[(dtype, rows, cols)].c, bufs[(rows, cols, T)]
        print(timed(lambda: K.lib.pt_matmul(Wc, xp, T, yp, 0), inner, bool(warm)), flush=True)


class EnginePeer:
    """An engine child running the petit of checkout `root`."""

    def __init__(self, root: str):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--engine-worker"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root)
        self.info = json.loads(self.p.stdout.readline())

    def time(self, key: str, inner: int, warm: bool) -> float:
        self.p.stdin.write(f"{key} {inner} {int(warm)}\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def prefill_main(a, paths: list[str], threads: list[int]) -> None:
    """GOPS of the prefill matmuls, this checkout against --baseline, sampled alternately."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"new": EnginePeer(here)}
    if a.baseline:
        sides["base"] = EnginePeer(a.baseline)
    for name, side in sides.items():
        print(f"{name}: petit from {side.info['petit']}")
    print(f"Load average (1/5/15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"T={a.tokens}; per row the median of {a.repeat} samples per side, alternating; GOPS = 2*T*rows*cols / time\n")
    head = f"{'path':<7}{'thr':>3}  {'dtype':<5}{'shape':>10}{'new ms':>9}{'new GOPS':>10}"
    head += f"{'base GOPS':>11}{'new/base':>10}" if a.baseline else ""
    print(head + "\n" + "-" * len(head), flush=True)
    for path in paths:
        for n in threads:
            for d in ("q8_0", "q4_0"):
                for rows, cols in PREFILL_SHAPES:
                    key = f"{path} {n} {d} {rows} {cols} {a.tokens}"
                    first = {k: side.time(key, 1, True) for k, side in sides.items()}
                    inner = {k: max(1, round(0.03 / t)) for k, t in first.items()}
                    samples = {k: [] for k in sides}
                    for _ in range(a.repeat):
                        for k, side in sides.items():
                            samples[k].append(side.time(key, inner[k], False))
                    ops = 2.0 * a.tokens * rows * cols
                    med = {k: statistics.median(v) for k, v in samples.items()}
                    line = f"{path:<7}{n:>3}  {d:<5}{f'{rows}x{cols}':>10}{med['new'] * 1e3:>9.2f}" \
                           f"{ops / med['new'] / 1e9:>10.1f}"
                    if a.baseline:
                        line += f"{ops / med['base'] / 1e9:>11.1f}{med['base'] / med['new']:>10.2f}"
                    print(line, flush=True)
        print(flush=True)
    for side in sides.values():
        side.close()


def main() -> None:
    from petit import native as K
    from petit.native import ISAS

    supported = [p for p, code in ISAS.items() if K.lib.pt_isa_supported(code)]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--paths", default=",".join(supported), help=f"kernel paths (default: {','.join(supported)})")
    ap.add_argument("--dtypes", default="q8_0,q4_0,f16,f32", help="weight dtypes (default q8_0,q4_0,f16,f32)")
    ap.add_argument("--repeat", type=int, default=7, help="samples per side and row (default 7; 3 if slow)")
    ap.add_argument("--big", action="store_true", help="use the full Qwen2.5-0.5B lm_head [151936, 896] for matvec")
    ap.add_argument("--quick", action="store_true", help="tiny shapes and few samples: a smoke test")
    ap.add_argument("--prefill", action="store_true", help="the prefill matmuls (T=--tokens) in GOPS, q8_0 and q4_0")
    ap.add_argument("--baseline", metavar="DIR", help="with --prefill: also time the petit checkout in DIR")
    ap.add_argument("--tokens", type=int, default=512, help="with --prefill: tokens per call (default 512)")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    threads = [int(t) for t in a.threads.split(",")]
    paths, dtypes = a.paths.split(","), a.dtypes.split(",")
    for p in paths:
        if p not in supported:
            ap.error(f"path {p!r} is not supported here (supported: {', '.join(supported)})")
    for d in dtypes:
        if d not in K.DTYPES:
            ap.error(f"unknown dtype {d!r} (choose from {', '.join(K.DTYPES)})")
    if a.baseline and not os.path.isdir(os.path.join(a.baseline, "petit")):
        ap.error(f"--baseline {a.baseline!r} holds no petit package (give the root of a built checkout)")
    if a.prefill:
        prefill_main(a, paths, threads)
        return
    if a.quick:
        cases, repeat, target = [("matvec", (1024, 896), 1), ("matmul", (1024, 896), 16)], min(a.repeat, 3), 0.005
    else:
        lm_head = (151936, 896) if a.big else (32768, 896)
        cases = [("matvec", (4864, 896), 1), ("matvec", lm_head, 1)]
        cases += [("matmul", s, T) for s in ((4864, 896), (896, 4864)) for T in (64, 128)]
        repeat, target = a.repeat, 0.03

    t_start = time.perf_counter()
    print("Building weights ...", flush=True)
    weights = {}  # (shape, dtype) -> Weight
    for shape in dict.fromkeys(s for _, s, _ in cases):
        w = matrix(*shape)
        for d in dtypes:
            weights[(shape, d)] = K.Weight.from_float(w, d)
        del w
    bufs = {}  # (shape, T) -> x, y, x pointer, y pointer
    for _, (rows, cols), T in cases:
        x, y = matrix(T, cols), np.empty((T, rows), np.float32)
        bufs[((rows, cols), T)] = (x, y, K.ffi.cast("float *", K.ffi.from_buffer(x)),
                                   K.ffi.cast("float *", K.ffi.from_buffer(y)))
    peers = {n: NumpyPeer(n) for n in threads}

    info = K.info()
    unset = "<unset>"
    print(f"\npetit kernels: CPU features {info['cpu_features']}; paths supported {', '.join(supported)}; "
          f"measuring {', '.join(paths)} at {', '.join(map(str, threads))} thread(s)")
    for n, peer in peers.items():
        i = peer.info
        print(f"NumPy {i['numpy']} child for {n} thread(s): BLAS {i['blas']}, OpenBLAS core {i['core']}, "
              f"BLAS threads at run time {i['threads']}")
    print("Your environment: " + ", ".join(f"{k}={USER_ENV[k] or unset}" for k in NP_ENV))
    print("NumPy children run with OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = the row's thread count "
          "(everything else inherited).")
    if USER_ENV["OPENBLAS_CORETYPE"] or USER_ENV["OPENBLAS_L2_SIZE"]:
        print("WARNING: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set, so NumPy may run below full speed; for a "
              "full-speed peer run with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`.")
    print(f"Load average (1/5/15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"Per row: median of {repeat} alternating samples per side (3 for calls over {SLOW_CALL * 1e3:.0f} ms); "
          "rate = GB/s of weight bytes (matvec) or GMAC/s (matmul); numpy = x @ w.T in float32 on the same shape;\n"
          "ratio = rate / numpy rate; speedup = numpy time / engine time (equal to ratio for matmul).\n")

    head = f"{'path':<7}{'thr':>3}  {'dtype':<5} {'op':<7}{'shape':>12}{'T':>5}{'ms/call':>10}" \
           f"{'rate':>9} {'unit':<7}{'numpy':>8}{'ratio':>8}{'speedup':>8}"
    print(head + "\n" + "-" * len(head), flush=True)
    for path in paths:
        for n in threads:
            K.configure(threads=n, isa=path)
            for d in dtypes:
                for op, shape, T in cases:
                    W, (x, y, xp, yp) = weights[(shape, d)], bufs[(shape, T)]
                    Wc, lib = W.c, K.lib
                    if lib.pt_matmul(Wc, xp, T, yp, 0) != 0:
                        raise RuntimeError(f"pt_matmul failed on {d} {shape} T={T}")
                    te, tn = measure(lambda: lib.pt_matmul(Wc, xp, T, yp, 0), peers[n], shape, T, repeat, target)
                    if op == "matvec":
                        rate, np_rate, unit = W.raw.nbytes / te / 1e9, shape[0] * shape[1] * 4 / tn / 1e9, "GB/s"
                    else:
                        rate, np_rate, unit = T * shape[0] * shape[1] / te / 1e9, \
                            T * shape[0] * shape[1] / tn / 1e9, "GMAC/s"
                    print(f"{path:<7}{n:>3}  {d:<5} {op:<7}{f'{shape[0]}x{shape[1]}':>12}{T:>5}{te * 1e3:>10.3f}"
                          f"{rate:>9.2f} {unit:<7}{np_rate:>8.2f}{rate / np_rate:>8.2f}{tn / te:>8.2f}", flush=True)
            print(flush=True)
    for peer in peers.values():
        peer.close()
    print(f"Total time {time.perf_counter() - t_start:.0f} s; load average now "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}.")


if __name__ == "__main__":
    numpy_worker() if WORKER else engine_worker() if ENGINE_WORKER else main()
