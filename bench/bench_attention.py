#!/usr/bin/env python3
"""Attention at long contexts: this checkout against a baseline checkout, timed in alternation.

Kernel rows: one attention call on Qwen2.5-0.5B's shape (14 query heads over 2 kv heads, head_dim 64), float32 and
int8 KV caches, at contexts of 512, 1,500 and 4,000 positions:
  * decode   one token at the last position (T=1, pos0 = n - 1): ms per call;
  * prefill  n tokens from position 0 (T=n, causal): ms per call, and the tokens/s that call alone allows.
Model rows (--model FILE): a whole prefill of 1,500 and 4,000 tokens into an empty cache (petit.load, model.forward
with the last position's logits), tokens/s; random token ids.

Method. Each checkout runs in its own child process (PYTHONPATH = its root, its own built kernels): `new` is this
checkout, `base` the one given by --baseline (e.g. `git archive main | tar -x -C /tmp/base`, then copy or build its
petit/_kernels*.so). For every row the two children are sampled in alternation, sample by sample (new, base, new,
...), so the machine's noise hits both; a sample is enough back-to-back calls to last about --target seconds (at
least one) after one warm-up call, and a row reports the median sample of each side and base time / new time. The
machine may be shared with other work: compare the two columns of one run, not figures across runs.

Usage: python bench/bench_attention.py --baseline DIR [--threads 1,2] [--contexts 512,1500,4000] [--kv f32,int8]
                                       [--rounds 5] [--model /tmp/petit-bench-hf/petit-q8_0.petit] [--model-only]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

H, KV, HD = 14, 2, 64      # Qwen2.5-0.5B


def timed(fn, inner: int) -> float:
    fn()                    # warm-up (and the first call that grows the scratch)
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def kernel_call(K, kv: str, n: int, mode: str):
    """A closure calling pt_attention / pt_attention_q8 with pointers built once."""
    rng = np.random.default_rng(n)
    T, pos0 = (1, n - 1) if mode == "decode" else (n, 0)
    q = rng.standard_normal((T, H, HD)).astype(np.float32)
    out = np.empty_like(q)
    P = lambda a, t="float *": K.ffi.cast(t, K.ffi.from_buffer(a))   # noqa: E731
    keep = [q, out]
    if kv == "f32":
        k, v = (rng.standard_normal((KV, n, HD)).astype(np.float32) for _ in range(2))
        keep += [k, v]
        args = (P(q), P(k), P(v), n, T, H, KV, HD, pos0, HD ** -0.5, 0.0, 0, K.ffi.NULL, P(out))
        fn = K.lib.pt_attention
    else:
        k, v = (rng.integers(-127, 128, (KV, n, HD)).astype(np.int8) for _ in range(2))
        ks, vs = (rng.uniform(0.005, 0.03, (KV, n)).astype(np.float32) for _ in range(2))
        keep += [k, v, ks, vs]
        args = (P(q), P(k, "int8_t *"), P(ks), P(v, "int8_t *"), P(vs), n, T, H, KV, HD, pos0, HD ** -0.5, 0.0, 0,
                K.ffi.NULL, P(out))
        fn = K.lib.pt_attention_q8

    def call():
        assert fn(*args) == 0, keep is not None
    return call


def model_call(path: str, n: int, kv: str):
    import petit
    model = getattr(model_call, "models", {}).get(path)
    if model is None:
        model = petit.load(path)
        model_call.models = {path: model}
    cache = model.new_cache(n + 1, kv_type=kv)
    ids = np.random.default_rng(n).integers(0, model.vocab_size, n).tolist()

    def call():
        cache.rewind(0)
        model.forward(ids, cache)
    return call


def worker() -> None:
    """Child: answers JSON lines {case, inner} with the seconds per call, for the petit first on sys.path."""
    from petit import native as K
    calls = {}
    print(json.dumps({"petit": os.path.dirname(K.__file__)}), flush=True)
    for line in sys.stdin:
        c = json.loads(line)
        if K.lib.pt_n_threads() != c["threads"]:
            K.configure(threads=c["threads"])
        key = json.dumps(c["case"])
        if key not in calls:
            calls.clear()        # one case's buffers at a time: a 4,000-token model cache is large
            what, kv, n, mode = c["case"]
            calls[key] = kernel_call(K, kv, n, mode) if what == "kernel" else model_call(mode, n, kv)
        print(timed(calls[key], c["inner"]), flush=True)


class Side:
    def __init__(self, root: str):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root)
        self.info = json.loads(self.p.stdout.readline())

    def time(self, case, threads: int, inner: int) -> float:
        self.p.stdin.write(json.dumps({"case": case, "threads": threads, "inner": inner}) + "\n")
        self.p.stdin.flush()
        return float(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait()


def row(sides: dict, case, threads: int, rounds: int, target: float) -> dict:
    first = {name: s.time(case, threads, 1) for name, s in sides.items()}
    inner = {name: max(1, round(target / t)) for name, t in first.items()}
    samples = {name: [] for name in sides}
    for _ in range(rounds):
        for name, s in sides.items():
            samples[name].append(s.time(case, threads, inner[name]))
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", metavar="DIR", required=True, help="root of the petit checkout to compare against")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--contexts", default="512,1500,4000")
    ap.add_argument("--kv", default="f32,int8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target", type=float, default=0.2, help="seconds per sample (default 0.2)")
    ap.add_argument("--model", help="a .petit file of the 0.5B shape: also time whole prefills")
    ap.add_argument("--model-only", action="store_true", help="only the model rows")
    ap.add_argument("--model-contexts", default="1500,4000")
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.baseline, "petit")):
        ap.error(f"--baseline {a.baseline!r} holds no petit package (give the root of a built checkout)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"new": Side(root), "base": Side(a.baseline)}
    threads = [int(t) for t in a.threads.split(",")]
    print(f"new: {sides['new'].info['petit']}\nbase: {sides['base'].info['petit']}\nload average: "
          f"{os.getloadavg()[0]:.2f}; {a.rounds} rounds, alternating; shape {H} heads / {KV} kv heads / head_dim {HD}")
    cases = []
    if not a.model_only:
        cases += [("kernel", kv, int(n), mode) for kv in a.kv.split(",") for mode in ("decode", "prefill")
                  for n in a.contexts.split(",")]
    if a.model:
        cases += [("model", kv, int(n), a.model) for kv in a.kv.split(",") for n in a.model_contexts.split(",")]
    print(f"{'case':<34}{'thr':>4}{'new ms':>11}{'base ms':>11}{'new tok/s':>11}{'base tok/s':>11}{'new/base':>9}")
    try:
        for case in cases:
            for t in threads:
                what, kv, n, mode = case
                r = row(sides, list(case), t, a.rounds if what == "kernel" else max(1, a.rounds // 2), a.target)
                tok = lambda s: f"{n / r[s]:11.1f}" if what == "model" or mode == "prefill" else f"{'':>11}"  # noqa
                label = f"{what} {kv} {'prefill' if what == 'model' else mode} {n}"
                print(f"{label:<34}{t:>4}{r['new'] * 1e3:11.2f}{r['base'] * 1e3:11.2f}{tok('new')}{tok('base')}"
                      f"{r['base'] / r['new']:9.2f}", flush=True)
    finally:
        for s in sides.values():
            s.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker()
    else:
        main()
