"""bench_spec.py's llama.cpp peer (issue 32, dev-only): the random-weight shape's weights written as a GGUF file
(Petit's own exporter, the weights Petit's child runs: f16 as stored, q8_0 as petit.load quantizes them), and a child
process that runs it with llama-cpp-python, greedy, from Petit's prompt token ids, plain and with its prompt-lookup
draft class (LlamaPromptLookupDecoding). llama-cpp-python is imported only in that child, by --llama-python.
"""
import json
import os
import subprocess

CHILD = r"""
import json, sys, time
import numpy as np
import llama_cpp
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
spec = json.loads(sys.argv[1])
ids, n = spec["ids"], spec["tokens"]
calls = []                     # (tokens generated when asked, the draft): each call is followed by one target pass


class Counted(LlamaPromptLookupDecoding):
    def __call__(self, input_ids, /, **kwargs):
        d = super().__call__(input_ids, **kwargs)
        calls.append((len(input_ids) - len(ids), [int(t) for t in d]))
        return d


draft = Counted(max_ngram_size=spec["ngram"], num_pred_tokens=spec["draft_max"]) if spec["ngram"] else None
llm = llama_cpp.Llama(spec["path"], n_ctx=len(ids) + n + spec["draft_max"] + 8, n_threads=spec["threads"],
                      n_threads_batch=spec["threads"], logits_all=False, verbose=False, draft_model=draft)
tokens, t_first = [], None
for token in llm.generate(ids, temp=0.0, repeat_penalty=1.0, reset=True):   # temp 0: greedy
    if t_first is None:
        t_first = time.perf_counter()
    tokens.append(int(token))
    if len(tokens) == n:
        break
t1 = time.perf_counter()
# a draft made after k tokens is checked against the tokens that followed them: greedy verification accepts its
# longest prefix equal to them
accepted = 0
for k, d in calls:
    while d and k < len(tokens) and tokens[k] == d[0]:
        accepted, k, d = accepted + 1, k + 1, d[1:]
print(json.dumps(dict(rate=(len(tokens) - 1) / (t1 - t_first), tokens=tokens, prompt=len(ids),
                      drafted=sum(len(d) for _, d in calls), accepted=accepted,
                      passes=(1 + len(calls)) if draft else 0)))
"""


def gguf_of(petit_path: str, weights: str | None) -> str:
    """The GGUF file of `petit_path` at `weights` (None: f16, as the shapes are stored), written once beside it
    (to a temporary name, then renamed); Petit's exporter checks the written file gives the model's logits."""
    w = weights or "f16"
    out = os.path.splitext(petit_path)[0].removesuffix("-f16") + f"-{w}.gguf"
    if os.path.exists(out):
        return out
    import petit
    from petit.loading.gguf_export import write_model_gguf
    model = petit.load(petit_path, weights=weights, repack=False)
    tmp = out + ".part.gguf"
    try:
        write_model_gguf(model, tmp, petit_path, w)
    finally:
        model.close()
    os.replace(tmp, out)
    return out


def run_llama(python: str, spec: dict, passive: bool = False) -> dict:
    """One llama.cpp child: spec holds path (GGUF), ids (the prompt), tokens, ngram (0: plain), draft_max, threads.
    passive: OMP_WAIT_POLICY=PASSIVE, its OpenMP threads sleep at a barrier instead of spinning (on a busy machine
    a spinning thread waits for one that is not running: 15 decode steps of the 0.5b took 24-27 s spinning, 1.7 s
    passive, with one core taken by a compiler)."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE") if passive else None
    p = subprocess.run([python, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=1800,
                       env=env)
    if p.returncode != 0:
        raise SystemExit(f"llama.cpp child failed ({spec['path']}, ngram {spec['ngram']}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])
