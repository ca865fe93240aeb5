#!/usr/bin/env python3
"""Speculative decoding (issue 32): decode tokens/s of the plain loop, prompt lookup (--lookup) and a draft model
(--draft), greedy, on the bundled model (q8_0 target, the bundled q4_0 file as draft) and a SmolLM2-135M-shaped
llama with random weights (f16 and q8_0 targets, self:q4_0 draft: the same file at q4_0), or --model PATH; and, to
show the cut-off, "all rejected": the same draft model, its every token shifted by one (its full cost, no gain).

    python bench/bench_spec.py                          # both models, 3 rounds
    python bench/bench_spec.py --rounds 5 --tokens 96 --model /path/model.petit --weights f16
    python bench/bench_spec.py --shape 0.5b                # a Qwen2.5-0.5B-shaped llama, f16 and q8_0, self:q4_0
    PYTHONPATH=.:/tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py /tmp/tf5/bin/python \
        bench/bench_spec.py --llama --rounds 1             # and llama.cpp (llama-cpp-python 0.3.36), dev-only

Each (model, mode) runs in its own child process per round, the modes in a rotating order inside a round, the rounds
interleaving them. The prompt is an "edit this text" one: a stretch of text, then the same text again up to a
point (where a model that copies would go on copying). The table shows the median decode tokens/s (first
token to last, greedy, --tokens tokens, no stop token; the draft model's prompt prefill counted), the ratio to plain,
drafted / accepted tokens, tokens per target pass, and whether the tokens equal the plain run's (they must). Random
weights do not copy text, so lookup drafts are accepted only where the greedy output repeats itself; nothing here
asserts a timing.

--llama (the random shapes only; bench/spec_llama.py): their weights written as GGUF by Petit's exporter (f16, and
q8_0 as Petit quantizes them at load), cached beside the .petit file, run by llama-cpp-python (--llama-python; not
a Petit dependency) with 2 threads, greedy, from Petit's prompt token ids, as many tokens as Petit's plain run,
timed the same way: "llama plain", and "llama lookup ngram N" (its LlamaPromptLookupDecoding, num_pred_tokens
--draft-max, max_ngram_size N of --llama-ngram). "x llama" is Petit's plain over llama.cpp's plain and Petit's
lookup over llama.cpp's fastest lookup (the goal's figure: >= 1.0); llama.cpp's "same" says whether its tokens
equal Petit's plain ones (random f16 weights may round differently: a report, not an error). llama-cpp-python's
build here runs OpenMP threads that spin at every barrier: measure on a quiet machine, or give --llama-passive on a
busy one (one core taken by a compiler made its 0.5b decode 10-25x slower spinning; its rows then mean nothing).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

CHILD = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["root"])
import petit
from petit.generation.loop import generate_tokens
from petit.generation.session import Stats
from petit.generation.speculative import LookupDrafter, Speculation, generate_speculative, load_draft
model = petit.load(spec["path"], weights=spec["weights"])
text = spec["text"]
gen = min(spec["tokens"], model.context_length // 2)          # the bundled model holds 128 positions
ids = model.tokenizer.encode(text + " " + text[: len(text) * 2 // 3])
ids = ids[len(ids) - min(len(ids), spec["prompt_max"], model.context_length - gen - 1):]
cache = model.new_cache(len(ids) + gen + 1)
stats = Stats()
if spec["mode"] == "plain":
    steps = generate_tokens(model, ids, max_tokens=gen, cache=cache)
else:
    drafter = LookupDrafter() if spec["mode"] == "lookup" else load_draft(spec["draft"], model, spec["path"],
                                                                          len(ids) + gen + 1)
    if spec["mode"] == "rejected":               # a draft model's full cost, every token it drafts wrong
        draft = drafter.draft
        drafter.draft = lambda *a: [(t + 1) % drafter.n_vocab for t in draft(*a)]
    steps = generate_speculative(model, ids, Speculation(drafter, draft_max=spec["draft_max"]), max_tokens=gen,
                                 cache=cache, stats=stats)
tokens, t_first = [], None
for step in steps:
    if t_first is None:
        t_first = time.perf_counter()
    tokens.append(step.token)
t1 = time.perf_counter()
print(json.dumps(dict(rate=(len(tokens) - 1) / (t1 - t_first), tokens=tokens, prompt=len(ids), ids=ids,
                      drafted=stats.drafted_tokens, accepted=stats.accepted_tokens,
                      passes=stats.target_passes)))
"""

TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
        "friends. One day, she found a small red ball under a big tree. She picked it up and showed it to her mom. "
        "Her mom smiled and said, you can keep it if nobody comes back for it. Lily was very happy and played "
        "with the ball all day long.")


SHAPES = {   # random-weight llamas of these models' shapes (the 0.5B / 3B: Qwen2.5's, tied heads)
    "135m": None,   # bench_busy.SMOLLM2_135M
    "0.5b": dict(model_type="llama", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                 num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, head_dim=64,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=4096, tie_word_embeddings=True),
    "3b": dict(model_type="llama", vocab_size=151936, hidden_size=2048, intermediate_size=11008,
               num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2, head_dim=128,
               rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=4096, tie_word_embeddings=True),
}


def shaped(work: str, shape: str = "135m") -> str:
    """A llama of `shape` (SHAPES) with random weights, f16, written once into `work`."""
    cfg = SHAPES[shape]
    if cfg is None:
        from bench_busy import SMOLLM2_135M as cfg
    name = "smollm2-135m" if shape == "135m" else f"qwen2.5-{shape}"
    path = os.path.join(work, f"{name}-shape-f16.petit")
    if not os.path.exists(path):
        sys.path.insert(0, ROOT)
        from tests.models import write_model
        write_model(path + ".tmp", cfg, dtype="f16", seed=1)
        os.replace(path + ".tmp", path)
    return path


def run(spec: dict) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"child failed ({spec['path']}, {spec['mode']}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def llama_spec(args, results: dict, path: str, weights: str | None, mode: str) -> dict:
    """A llama.cpp child's spec: Petit's prompt ids (every Petit child of this file tokenized the same) and as
    many tokens as Petit's plain run gave."""
    from spec_llama import gguf_of
    ngram = 0 if mode == "llama plain" else int(mode.removeprefix("llama lookup"))
    petit_runs = [x for (p, _, m), rs in results.items() if p == path and not m.startswith("llama") for x in rs]
    if any(x["ids"] != petit_runs[0]["ids"] for x in petit_runs):
        raise SystemExit(f"{path}: Petit's children tokenized the prompt differently")
    n = len(results[(path, weights, "plain")][0]["tokens"])
    return dict(path=gguf_of(path, weights), ids=petit_runs[0]["ids"], tokens=n, ngram=ngram,
                draft_max=args.draft_max, threads=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=80)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--model", help="a model file or folder instead of the two defaults")
    ap.add_argument("--weights", help="--model's weight type (default: as stored)")
    ap.add_argument("--draft", default="self:q4_0", help="--model's draft (default self:q4_0)")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="only a random llama of this shape, at f16 and q8_0, "
                    "drafting with self:q4_0 (default: the bundled model and the 135m shape)")
    ap.add_argument("--llama", action="store_true", help="llama.cpp's plain and prompt-lookup decode too, on the "
                    "random shapes' weights as GGUF (bench/spec_llama.py)")
    ap.add_argument("--llama-python", default=sys.executable, help="the interpreter with llama_cpp (default: this)")
    ap.add_argument("--llama-passive", action="store_true", help="llama.cpp's OpenMP threads sleep at barriers "
                    "(OMP_WAIT_POLICY=PASSIVE) instead of spinning: on a busy machine, where spinning collapses")
    ap.add_argument("--llama-ngram", default="2,3", help="LlamaPromptLookupDecoding's max_ngram_size, each a row")
    args = ap.parse_args()
    from petit.assets import default_model_path
    work = os.path.join(tempfile.gettempdir(), "petit-bench")
    os.makedirs(work, exist_ok=True)
    bundled = default_model_path()
    if args.model and args.llama:
        raise SystemExit("--llama runs on the random shapes' weights only (the defaults or --shape), not --model")
    if args.model:
        models = [(args.model, args.weights, args.draft)]
    elif args.shape:
        models = [(shaped(work, args.shape), None, "self:q4_0"), (shaped(work, args.shape), "q8_0", "self:q4_0")]
    else:
        models = [(bundled, None, os.path.join(os.path.dirname(bundled), "default-q4_0.petit")),
                  (shaped(work), None, "self:q4_0"), (shaped(work), "q8_0", "self:q4_0")]
    modes = ["plain", "lookup", "draft", "rejected"]
    llama_modes = ["llama plain"] + [f"llama lookup{int(n)}" for n in args.llama_ngram.split(",")] if args.llama else []
    results = {}
    for r in range(args.rounds):
        for path, weights, draft in models:
            own = modes + (llama_modes if path != bundled else [])    # llama.cpp: the random shapes only
            for mode in own[r % len(own):] + own[:r % len(own)]:
                if mode.startswith("llama"):       # after Petit's plain run (round 0 starts with it)
                    from spec_llama import run_llama
                    out = run_llama(args.llama_python, llama_spec(args, results, path, weights, mode), args.llama_passive)
                else:
                    out = run(dict(root=ROOT, path=path, weights=weights, draft=draft, mode=mode, text=TEXT,
                                   tokens=args.tokens, prompt_max=100, draft_max=args.draft_max))
                results.setdefault((path, weights, mode), []).append(out)
    table(models, modes + llama_modes, results)


def table(models: list, modes: list, results: dict) -> None:
    """Median tok/s per (model, mode); "x llama": Petit's plain and lookup over llama.cpp's plain and its fastest
    lookup; llama.cpp's rows: "x plain" over its own plain, "same" its tokens against Petit's plain ones."""
    print(f"load average {os.getloadavg()[0]:.1f} (on a busy machine llama.cpp's spinning OpenMP threads slow down "
          f"many times: see --llama-passive)")
    print(f"{'model':36} {'mode':22} {'tok/s':>8} {'x plain':>8} {'drafted':>8} {'accepted':>9} "
          f"{'tok/pass':>9} {'x llama':>8} same")
    for path, weights, draft in models:
        rate = {m: statistics.median(x["rate"] for x in results[(path, weights, m)]) for m in modes
                if (path, weights, m) in results}
        peer = {"plain": rate.get("llama plain"),
                "lookup": max((v for m, v in rate.items() if m.startswith("llama lookup")), default=None)}
        plain = results[(path, weights, "plain")]
        for mode in rate:
            rs = results[(path, weights, mode)]
            last = rs[-1]
            per_pass = len(last["tokens"]) / last["passes"] if last["passes"] else 1.0
            if mode.startswith("llama"):
                base = rate["llama plain"]
                same = "same" if all(x["tokens"] == plain[0]["tokens"] for x in rs) else "differs"
            else:
                base = rate["plain"]
                same = "yes" if all(x["tokens"] == plain[0]["tokens"] for x in rs) else "NO"
            vs = f"{rate[mode] / peer[mode]:8.2f}" if peer.get(mode) else " " * 8
            label = {"draft": f"draft {os.path.basename(draft)}", "rejected": "draft, all rejected"}.get(mode, mode)
            label = label.replace("llama lookup", "llama lookup ngram ")
            name = os.path.basename(path) + (f" @{weights}" if weights else "")
            print(f"{name[:36]:36} {label[:22]:22} {rate[mode]:8.1f} {rate[mode] / base:8.2f} "
                  f"{last['drafted']:8d} {last['accepted']:9d} {per_pass:9.2f} {vs} {same}")

if __name__ == "__main__":
    main()
