"""Decode speed on a busy machine: one thread against the default thread count, with and without another process
keeping one core busy (a laptop always has a browser running). Issue 14's floor: with a busy neighbour, the default
thread count is never slower than one thread ("no collapse").

    python bench/bench_busy.py                            # the bundled model and a SmolLM2-135M-shaped one
    python bench/bench_busy.py --model /path/model.petit  # another model as well
    python bench/bench_busy.py --petit-root /tmp/old      # the children import petit from another checkout (A/B)

Every measurement runs in its own child process (the thread count is set before the first kernel call); the
rows are interleaved over --rounds rounds and the table shows medians, the ratio as the median of each round's
ratio of its two adjacent runs. The busy neighbour is a separate process
spinning in a loop, started before the child and ended after it; the operating system places it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOLLM2_135M = dict(model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
                    num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                    rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=2048, tie_word_embeddings=True)

CHILD = r"""
import json, statistics, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["root"])
import petit
from petit import native
native.configure(threads=spec["threads"])
model = petit.load(spec["path"])
gen = min(spec["gen"], model.context_length - spec["prompt"])   # the bundled model's context is 128
cache = model.new_cache(spec["prompt"] + gen)
ids = [(7 * i + 3) % model.vocab_size for i in range(spec["prompt"])]
rates = []
t_end = time.perf_counter() + spec["seconds"]
while len(rates) < spec["reps"] + 1 or time.perf_counter() < t_end:   # the first pass warms up, uncounted
    cache.rewind(0)
    logits = model.forward(ids, cache)
    tok = int(np.argmax(logits[-1] if logits.ndim == 2 else logits))
    t0 = time.perf_counter()
    for _ in range(gen):
        logits = model.forward([tok], cache)
        tok = int(np.argmax(logits[-1] if logits.ndim == 2 else logits))
    rates.append(gen / (time.perf_counter() - t0))
stats = native.pool_stats() if hasattr(native, "pool_stats") else {}
print(json.dumps({"tok_s": statistics.median(rates[1:]), "passes": len(rates) - 1, "gen": gen, "threads": native.info()["threads"], "petit": petit.__file__, "pool": stats}))
"""


def cpu_facts() -> str:
    model, flags = "?", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    have = set(line.split(":", 1)[1].split())
                    flags = " ".join(f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni",
                                                 "amx_tile", "amx_int8") if f in have)
    except OSError:
        pass
    return f"CPU: {model}; {os.cpu_count()} logical CPUs; flags: {flags}"


def smollm2_shaped(work: str) -> str:
    """A SmolLM2-135M-shaped llama with random weights, q8_0, written once into `work`."""
    path = os.path.join(work, "smollm2-135m-shape-q8_0.petit")
    if not os.path.exists(path):
        sys.path.insert(0, ROOT)
        from tests.models import write_model
        tmp = path + ".tmp"
        write_model(tmp, SMOLLM2_135M, dtype="q8_0", seed=1)
        os.replace(tmp, path)
    return path


def run_one(root: str, path: str, threads: int, busy: bool, prompt: int, gen: int, reps: int, seconds: float) -> dict:
    spec = dict(root=root, path=path, threads=threads, prompt=prompt, gen=gen, reps=reps, seconds=seconds)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        if hog:
            time.sleep(0.2)
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                           timeout=1800)
    finally:
        if hog:
            hog.kill()
            hog.wait()
    if p.returncode != 0:
        raise SystemExit(f"child failed ({path}, {threads} threads):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", default=[], help="another .petit file or folder (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--gen", type=int, default=128, help="tokens to decode (fewer when the model's context is shorter)")
    ap.add_argument("--reps", type=int, default=2, help="decode passes per child at least; the median counts")
    ap.add_argument("--seconds", type=float, default=2.0, help="a child decodes passes for this long at least "
                                                                "(the pool settles on pooling or not within it)")
    ap.add_argument("--petit-root", default=ROOT, help="the checkout the children import petit from")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "petit-bench-busy"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sys.path.insert(0, a.petit_root)
    from petit.native import info
    default = info()["default_threads"]
    models = [("bundled (q8_0)", os.path.join(ROOT, "assets", "default-q8_0.petit")),
              ("SmolLM2-135M shape (q8_0)", smollm2_shaped(a.work))] + [(m, m) for m in a.model]
    print(cpu_facts())
    print(f"petit from {a.petit_root}; default threads {default}; decode {a.gen} tokens after {a.prompt}; "
          f"{a.rounds} rounds, medians\n")
    cells, ratios, alone = {}, {}, {}
    for _ in range(a.rounds):
        for label, path in models:
            for busy in (False, True):
                # the two thread counts back to back, so each round gives a ratio taken under the same conditions
                # (this kind of VM drifts by 10-20 % over minutes, more than the effect measured)
                rate = {}
                for threads in sorted({1, default}):
                    r = run_one(a.petit_root, path, threads, busy, a.prompt, a.gen, a.reps, a.seconds)
                    rate[threads] = r["tok_s"]
                    pool = r.get("pool") or {}
                    if threads == default and pool.get("jobs_pooled", 0) + pool.get("jobs_alone", 0):
                        alone.setdefault((label, busy), []).append(
                            pool["jobs_alone"] / (pool["jobs_pooled"] + pool["jobs_alone"]))
                    cells.setdefault((label, busy, threads), []).append(r["tok_s"])
                ratios.setdefault((label, busy), []).append(rate[default] / rate[1])
    print(f"| model | neighbour | 1 thread tok/s | {default} threads tok/s | default / 1 (median of the rounds' "
          "ratios) | rounds' ratios, lowest - highest | jobs big enough to share that ran alone |")
    print("|---|---|---|---|---|---|---|")
    for label, _ in models:
        for busy in (False, True):
            one = statistics.median(cells[(label, busy, 1)])
            dflt = statistics.median(cells[(label, busy, default)])
            rs = ratios[(label, busy)]
            shares = alone.get((label, busy))
            share = f"{100 * statistics.median(shares):.0f} %" if shares else "none pooled"
            print(f"| {label} | {'one core busy' if busy else 'quiet'} | {one:.1f} | {dflt:.1f} | "
                  f"{statistics.median(rs):.2f} | {min(rs):.2f} - {max(rs):.2f} | {share} |")


if __name__ == "__main__":
    main()
