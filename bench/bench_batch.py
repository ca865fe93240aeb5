"""Several sequences in one step: decode tokens/s of 1, 2 and 4 concurrent sequences (`Model.forward_batch`, each
sequence its own KV cache, greedy, positions 16-144; the bundled model's context ends at 128) on the bundled model and a SmolLM2-135M-shaped one (random
weights, q8_0), at 1 and 2 threads. Issue 14's goal: four sequences >= 3x the tokens/s of one.

    python bench/bench_batch.py                     # both models, 1 and 2 threads, 3 rounds
    python bench/bench_batch.py --rounds 5 --model /path/model.petit

Each (model, threads) pair runs in its own child process per round (the thread count is set before the first
kernel call); inside a child the batch sizes run in a rotating order, and the rounds interleave the pairs. The
table shows medians over the rounds and the ratio to one sequence.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_busy import ROOT, cpu_facts, smollm2_shaped

SIZES = (1, 2, 4)

CHILD = r"""
import json, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["root"])
import petit
from petit import native
native.configure(threads=spec["threads"])
model = petit.load(spec["path"])
prompt = spec["prompt"]
gen = min(spec["gen"], model.context_length - prompt)   # the bundled model holds 128 positions
out = {}
sizes = spec["sizes"][spec["round"] % len(spec["sizes"]):] + spec["sizes"][:spec["round"] % len(spec["sizes"])]
for n in sizes:
    caches = [model.new_cache(prompt + gen) for _ in range(n)]
    prompts = [[(7 * i + 3 + 11 * s) % model.vocab_size for i in range(prompt)] for s in range(n)]
    logits = model.forward_batch(list(zip(prompts, caches)))
    toks = [int(np.argmax(l)) for l in logits]
    t0 = time.perf_counter()
    for _ in range(gen):
        logits = model.forward_batch([([t], c) for t, c in zip(toks, caches)])
        toks = [int(np.argmax(l)) for l in logits]
    out[n] = n * gen / (time.perf_counter() - t0)
print(json.dumps({"tok_s": out, "threads": native.info()["threads"], "gen": gen}))
"""


def run_one(root, path, threads, rnd, prompt, gen) -> dict:
    spec = dict(root=root, path=path, threads=threads, round=rnd, prompt=prompt, gen=gen, sizes=list(SIZES))
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return {int(k): v for k, v in json.loads(r.stdout)["tok_s"].items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", default=[], help="another .petit model to measure")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    from petit.assets import default_model_path
    work = os.path.join(tempfile.gettempdir(), "petit-bench")
    os.makedirs(work, exist_ok=True)
    models = [("bundled (q8_0)", str(default_model_path())), ("SmolLM2-135M shape (q8_0)", smollm2_shaped(work))]
    models += [(os.path.basename(m), m) for m in args.model]
    print(cpu_facts())
    rates = {(name, t): {n: [] for n in SIZES} for name, _ in models for t in args.threads}
    for rnd in range(args.rounds):
        for name, path in models:
            for t in args.threads:
                for n, v in run_one(ROOT, path, t, rnd, args.prompt, args.gen).items():
                    rates[(name, t)][n].append(v)
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    print(f"\ndecode, positions {args.prompt}-{args.prompt + args.gen} (at most the model's context: the bundled "
          f"model's ends at 128), tokens/s summed over the sequences (median of {args.rounds} rounds)\n")
    print("| model | threads | " + " | ".join(f"{n} seq" for n in SIZES) + " | " +
          " | ".join(f"{n} / 1" for n in SIZES[1:]) + " |")
    print("|---|---|" + "---|" * (2 * len(SIZES) - 1))
    for (name, t), by_n in rates.items():
        med = {n: statistics.median(v) for n, v in by_n.items()}
        print(f"| {name} | {t} | " + " | ".join(f"{med[n]:,.0f}" if med[n] >= 1000 else f"{med[n]:.1f}"
                                                for n in SIZES) +
              " | " + " | ".join(f"{med[n] / med[1]:.2f}" for n in SIZES[1:]) + " |")


if __name__ == "__main__":
    main()
