#!/usr/bin/env python3
"""LoRA fine-tuning speed and memory (issue 33): tokens/s of one epoch and peak RSS, Petit (`trainer.lora`, the base
as loaded: f32 and q8_0) against PyTorch + PEFT on the CPU (dev-only peer: torch, transformers, peft), the same model,
examples, rank, alpha, targets, batch, sequence length and threads.

    python bench/bench_finetune.py                      # SmolLM2-135M shape, 2 rounds
    python bench/bench_finetune.py --shape 0.5b --examples 4 --rounds 1

The model is a llama of the chosen shape with random weights, written once as a Hugging Face folder (float32
safetensors; the tokenizer of tests/fixtures/hf/llama, unused: the examples are token ids drawn at random, the loss
on every position, so both sides train on exactly the same ids). Each (engine, round) runs in its own process,
the engines alternating inside a round; the first example of a run is a warm-up not timed. Printed: the median
tokens/s (trained positions per second of the timed steps: forward, backward, optimizer), the ratio to PyTorch,
peak RSS (VmHWM) and the loss after the epoch (the two sides start from different adapter draws: a sanity check
that both learn, not a parity test). Nothing here asserts a timing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                 num_attention_heads=9, num_key_value_heads=3, head_dim=64),
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, head_dim=64),
}
TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
HF_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

PETIT = r"""
import json, resource, sys, time
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["root"])
import numpy as np
import petit
from petit import native
from trainer.lora.data import Example
from trainer.lora.train import FinetuneConfig, Hooks, finetune
native.configure(threads=spec["threads"])
model = petit.load(spec["folder"], weights=spec["weights"])
ids = np.load(spec["ids"])
examples = [Example(row, np.ones(len(row), np.float32), i + 1) for i, row in enumerate(ids)]
times = []
hooks = Hooks(on_step=lambda info: times.append(time.perf_counter()))
cfg = FinetuneConfig(rank=spec["rank"], alpha=2.0 * spec["rank"], epochs=1, lr=1e-3, ctx=ids.shape[1],
                     val_fraction=0.0, warmup=1, batch=1)
t0 = time.perf_counter()
stats = finetune(model, None, spec["out"], cfg, out=open("/dev/null", "w"), examples=examples, hooks=hooks)
timed = (len(times) - 1) * (ids.shape[1] - 1)
print(json.dumps({"tokens_per_s": timed / (times[-1] - times[0]), "loss": stats["history"][-1]["train_loss"],
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

TORCH = r"""
import json, resource, sys, time
spec = json.loads(sys.argv[1])
import numpy as np
import torch
torch.set_num_threads(spec["threads"])
torch.manual_seed(0)
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(spec["folder"], dtype=torch.float32)
model = get_peft_model(model, LoraConfig(r=spec["rank"], lora_alpha=2 * spec["rank"], lora_dropout=0.0,
                                         target_modules=spec["modules"], bias="none"))
model.train()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3, betas=(0.9, 0.999),
                        weight_decay=0.0)
ids = torch.from_numpy(np.load(spec["ids"]).astype(np.int64))
times, losses = [], []
for row in ids:
    x = row[None, :]
    out = model(input_ids=x, labels=x)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(float(out.loss))
    times.append(time.perf_counter())
timed = (len(times) - 1) * (ids.shape[1] - 1)
print(json.dumps({"tokens_per_s": timed / (times[-1] - times[0]), "loss": float(np.mean(losses)),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def cpu_line() -> str:
    info = open("/proc/cpuinfo").read().splitlines()
    model = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("flags")), [])
    keep = [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")) or f in ("sse4_2", "asimd")]
    return f"{model}; {os.cpu_count()} CPUs; {' '.join(keep)}"


def _save_f32(tensors: dict, path: str) -> None:
    """float32 safetensors (no dependency: a JSON header, then the raw little-endian arrays)."""
    import struct

    import numpy as np
    header, offset = {}, 0
    for name, a in tensors.items():
        n = a.size * 4
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + n]}
        offset += n
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, "<f4").tobytes())


def make_folder(work: str, shape: str) -> str:
    """The random-weight llama of `shape` as a Hugging Face folder (float32 safetensors), written once."""
    folder = os.path.join(work, f"lora-bench-{shape}")
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return folder
    sys.path.insert(0, ROOT)
    import shutil

    from tests.models import random_weights
    cfg = dict(model_type="llama", rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=2048,
               tie_word_embeddings=True, **SHAPES[shape])
    weights = {k: v for k, v in random_weights(dict(cfg), seed=1).items() if k != "lm_head.weight"}
    tmp = folder + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    _save_f32(weights, os.path.join(tmp, "model.safetensors"))
    hf = dict(cfg, architectures=["LlamaForCausalLM"], hidden_act="silu", attention_bias=False, mlp_bias=False,
              torch_dtype="float32", bos_token_id=1, eos_token_id=2)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(hf, f, indent=1)
    src = os.path.join(ROOT, "tests", "fixtures", "hf", "llama")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(src, name), tmp)
    os.replace(tmp, folder)
    return folder


def run(code: str, spec: dict, python: str) -> dict:
    p = subprocess.run([python, "-c", code, json.dumps(spec)], capture_output=True, text=True, timeout=7200)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="135m")
    ap.add_argument("--examples", type=int, default=6, help="examples in the epoch (the first one a warm-up)")
    ap.add_argument("--seq", type=int, default=256, help="tokens an example")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=os.environ.get("PETIT_BIG_CACHE", "/work/bigcache"))
    ap.add_argument("--torch-python", default=os.environ.get("PETIT_TORCH_PYTHON", "/tmp/tf5/bin/python"),
                    help="a Python with torch, transformers and peft (dev-only)")
    args = ap.parse_args(argv)
    import numpy as np
    folder = make_folder(args.work, args.shape)
    ids_path = os.path.join(args.work, f"lora-bench-{args.shape}-{args.examples}x{args.seq}.npy")
    rng = np.random.default_rng(0)
    np.save(ids_path, rng.integers(3, SHAPES[args.shape]["vocab_size"], (args.examples, args.seq), dtype=np.int32))
    base = {"root": ROOT, "folder": folder, "ids": ids_path, "rank": args.rank, "threads": args.threads}
    engines = {"Petit f32 base": (PETIT, dict(base, weights="f32", out=os.path.join(args.work, "bench.lora")),
                                  sys.executable),
               "Petit q8_0 base": (PETIT, dict(base, weights="q8_0", out=os.path.join(args.work, "bench.lora")),
                                   sys.executable),
               "PyTorch + PEFT (f32)": (TORCH, dict(base, modules=HF_MODULES), args.torch_python)}
    results = {name: [] for name in engines}
    for r in range(args.rounds):
        order = list(engines)[r % len(engines):] + list(engines)[:r % len(engines)]
        for name in order:
            code, spec, python = engines[name]
            res = run(code, spec, python)
            print(f"round {r + 1} {name}: {res}", flush=True)
            results[name].append(res)
    print(f"\nCPU: {cpu_line()}")
    print(f"{args.shape} shape, {args.examples} examples of {args.seq} tokens (the first a warm-up), rank {args.rank}, "
          f"alpha {2 * args.rank}, targets {','.join(TARGETS)}, batch 1, {args.threads} threads; medians of "
          f"{args.rounds} rounds\n")
    print("| engine | tokens/s | vs PyTorch + PEFT | peak RSS MiB | loss after the epoch |")
    print("|---|---|---|---|---|")
    ok = {n: [x for x in rs if "error" not in x] for n, rs in results.items()}
    ref = statistics.median(x["tokens_per_s"] for x in ok["PyTorch + PEFT (f32)"]) \
        if ok["PyTorch + PEFT (f32)"] else None
    for name, rs in ok.items():
        if not rs:
            print(f"| {name} | failed: {results[name][-1].get('error')} | | | |")
            continue
        tps = statistics.median(x["tokens_per_s"] for x in rs)
        ratio = f"{tps / ref:.2f}x" if ref else "-"
        print(f"| {name} | {tps:.1f} | {ratio} | {statistics.median(x['peak_mib'] for x in rs):,.0f} | "
              f"{statistics.median(x['loss'] for x in rs):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
