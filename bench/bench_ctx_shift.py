#!/usr/bin/env python3
"""Context shift (issue 32 item 5): a 100-turn chat in a 512-token context, old turns dropped to fit, with
`ctx_shift` (the kept turns moved inside the KV cache, keys re-rotated) and without (the shortened conversation
prefilled again). The model is a SmolLM2-135M-shaped llama with random weights (q8_0) and the bundled model's
tokenizer and ChatML template; each turn asks a ~25-token question and takes a 16-token greedy reply.

    python bench/bench_ctx_shift.py [--turns 100] [--ctx 512]

Each mode runs in its own child process. The table shows, over the turns after the context first fills: the most
tokens prefilled in one turn, the median and largest time to first token against the first turn's, and the whole
run's time. A random model's replies do not always re-encode to the tokens it generated (BPE): where they do not,
the kept block ends there and the rest of that reply is prefilled too, which the prefilled column shows. Nothing
here asserts a timing.
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
from petit.chat.formats import get_format
from petit.generation.session import Params, Session
model = petit.load(spec["path"])
session = Session(model, n_ctx=spec["ctx"], template=get_format("chatml"))
messages = [{"role": "system", "content": "You are a helpful assistant. Answer briefly."}]
words = "apple river stone cloud paper garden window silver orange violet marble candle forest".split()
out = []
t0 = time.perf_counter()
for turn in range(spec["turns"]):
    q = f"Question {turn}: " + " ".join(words[(turn + i) % len(words)] for i in range(8)) + "?"
    messages.append({"role": "user", "content": q})
    steps = list(session.reply(messages, Params(max_tokens=16, drop_old_turns=True, ctx_shift=spec["shift"])))
    st = steps[-1].stats
    messages = messages[:1] + messages[1 + st.dropped_messages:] + [
        {"role": "assistant", "content": "".join(s.text for s in steps)}]
    out.append({"prefilled": st.prompt_tokens - st.reused_tokens, "ttft": st.time_to_first_token,
                "dropped": st.dropped_messages, "shifted": st.shifted_tokens, "prompt": st.prompt_tokens})
print(json.dumps({"turns": out, "total": time.perf_counter() - t0}))
"""


def model_path(work: str) -> str:
    """The random SmolLM2-135M-shaped model with the bundled tokenizer, written once into `work`."""
    from bench_busy import SMOLLM2_135M
    path = os.path.join(work, "smollm2-135m-shape-q8_0-bundled-tok.petit")
    if not os.path.exists(path):
        sys.path.insert(0, ROOT)
        from petit.assets import default_model_path
        from petit.formats.petit_file import read_petit
        from tests.models import write_model
        with read_petit(default_model_path()) as f:        # (plain JSON: the reader hands some lists as arrays)
            tok = json.loads(json.dumps(f.metadata["tokenizer"], default=lambda o: o.tolist()))
        cfg = dict(SMOLLM2_135M, vocab_size=len(tok["vocab"]))
        write_model(path + ".tmp", cfg, dtype="q8_0", seed=1, tokenizer=tok)
        os.replace(path + ".tmp", path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "petit-bench"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    path = model_path(args.work)
    print(f"{args.turns}-turn chat, context {args.ctx}, {os.path.basename(path)}")
    print("| mode | turns dropping | most prefilled in a turn (after the first drop) | first turn's TTFT | median / max "
          "TTFT after | x first turn (max) | total s |")
    print("|---|---|---|---|---|---|---|")
    for shift in (True, False):
        spec = {"root": ROOT, "path": path, "ctx": args.ctx, "turns": args.turns, "shift": shift}
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                           timeout=3600)
        if p.returncode != 0:
            raise SystemExit(p.stderr[-3000:])
        r = json.loads(p.stdout.strip().splitlines()[-1])
        turns = r["turns"]
        first_drop = next((i for i, t in enumerate(turns) if t["dropped"]), len(turns))
        after = turns[first_drop:]
        ttfts = [t["ttft"] for t in after] or [0.0]
        print(f"| {'ctx_shift' if shift else 'drop + re-prefill'} | {sum(bool(t['dropped']) for t in turns)} | "
              f"{max((t['prefilled'] for t in after), default=0)} | {1000 * turns[0]['ttft']:.1f} ms | "
              f"{1000 * statistics.median(ttfts):.1f} / {1000 * max(ttfts):.1f} ms | "
              f"{max(ttfts) / turns[0]['ttft']:.2f} | {r['total']:.1f} |")


if __name__ == "__main__":
    main()
