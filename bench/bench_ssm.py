#!/usr/bin/env python3
"""A state-space or hybrid model in Petit beside llama.cpp, on the same weights, in one run (issue 17's benchmark).

Builds once, cached under --work (default /tmp/petit-bench-ssm): a random-weight MambaForCausalLM with exactly
mamba-130m's shape (d_model 768, 24 layers, d_state 16, expand 2, conv 4, dt_rank 48, vocabulary 50280, tied),
transformers' own init, saved as float32 safetensors with the tiny test tokenizer (token ids are drawn directly);
Petit's q8_0 file (`petit convert --q8`) and llama.cpp's (its own converter to f32 GGUF, then its
llama_model_quantize to q8_0). Each engine in its own child process (bench/bench_hf.py's children), 2 threads by
default: prefill of a 16- and of a --long-token prompt (default 4000), then --gen greedy tokens (default 64) after
each. Decode at position 4000 against position 16 shows the state's fixed cost: a pure SSM should stay flat.
`--model lfm2` runs a small hybrid instead: LFM2-350M's shape (hidden 1024, 16 layers, 10 short-conv and 6
attention layers, 16 / 8 heads, a SwiGLU of 4608 after auto-adjust, vocabulary 65536, tied), transformers' own init.

    python bench/bench_ssm.py [--model mamba|lfm2] [--threads 1,2] [--long 4000] [--gen 64] [--rounds 1]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_hf  # noqa: E402

SHAPE = dict(vocab_size=50280, hidden_size=768, num_hidden_layers=24, state_size=16, expand=2, conv_kernel=4,
             time_step_rank=48, tie_word_embeddings=True)
LFM2 = dict(vocab_size=65536, hidden_size=1024, intermediate_size=6656, num_hidden_layers=16, num_attention_heads=16,
            num_key_value_heads=8, conv_L_cache=3, tie_word_embeddings=True, max_position_embeddings=128000,
            layer_types=["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "conv",
                         "full_attention", "conv", "full_attention", "conv", "full_attention", "conv",
                         "full_attention", "conv"])
LLAMA_CPP = os.environ.get("LLAMA_CPP_SRC", "/tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp")


def build_hf(out: str, kind: str = "mamba") -> None:
    import shutil
    import torch
    from transformers import AutoModelForCausalLM, Lfm2Config, MambaConfig
    torch.manual_seed(0)
    cfg = MambaConfig(**SHAPE) if kind == "mamba" else Lfm2Config(**LFM2)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    model.save_pretrained(out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(os.path.join(ROOT, "tests", "fixtures", "hf", "qwen3", f), os.path.join(out, f))


def build_gguf(hf: str, out: str) -> None:
    """llama.cpp's converter (its vocabulary check told that the tiny tokenizer is Qwen's), f32, then q8_0."""
    f32 = out.replace(".gguf", "-f32.gguf")
    code = ("import sys; sys.path[:0] = [%r, %r]; import conversion.base as b; "
            "b.TextModel.get_vocab_base_pre = lambda self, t: 'qwen2'; import convert_hf_to_gguf as c; "
            "sys.argv = ['c', %r, '--outfile', %r, '--outtype', 'f32']; c.main()"
            % (LLAMA_CPP, os.path.join(LLAMA_CPP, "gguf-py"), hf, f32))
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    bench_hf.quantize_gguf(f32, out, "q8_0", True, 2)
    os.unlink(f32)


def child(spec: dict) -> None:
    bench_hf.prompt_ids = lambda n: np.random.default_rng(1234).integers(5, 300, n).tolist()
    bench_hf.child_main(spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="2")
    ap.add_argument("--long", type=int, default=4000)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", default=None, help="where the models are built and cached (default "
                    "/tmp/petit-bench-ssm, or -lfm2)")
    ap.add_argument("--model", choices=("mamba", "lfm2"), default="mamba")
    args = ap.parse_args()
    args.work = args.work or "/tmp/petit-bench-ssm" + ("" if args.model == "mamba" else "-" + args.model)
    os.makedirs(args.work, exist_ok=True)
    flags = next((ln.split(":", 1)[1].split() for ln in open("/proc/cpuinfo") if ln.startswith("flags")), [])
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.processor())
    print(f"CPU: {cpu}, {os.cpu_count()} CPUs; {' '.join(f for f in flags if 'avx' in f or 'amx' in f)}")
    hf, pt, gg = (os.path.join(args.work, n) for n in ("hf", "petit-q8_0.petit", "gguf-q8_0.gguf"))
    if not os.path.isdir(hf):
        build_hf(hf, args.model)
    print(f"model: {args.model} ({'mamba-130m' if args.model == 'mamba' else 'LFM2-350M'} shape, random weights)")
    if not os.path.exists(pt):
        subprocess.run([sys.executable, "-m", "petit", "convert", hf, "-o", pt, "--q8"], check=True)
    if not os.path.exists(gg):
        build_gguf(hf, gg)
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for prompt in (16, args.long):
            got = {}
            for _ in range(args.rounds):
                for engine, path in (("petit", pt), ("llama.cpp", gg)):
                    spec = {"engine": engine, "path": path, "threads": threads, "prompt": prompt, "gen": args.gen,
                            "reps": 0, "budget": 60, "flash_attn": True, "logits_out": os.path.join(args.work, "l.npy")}
                    env = dict(os.environ, PETIT_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
                    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                                       capture_output=True, text=True, timeout=3600)
                    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
                    if line is None:
                        print(f"{engine} {threads}t {prompt}: failed: {p.stderr.strip().splitlines()[-3:]}")
                        continue
                    got.setdefault(engine, []).append(json.loads(line[7:]))
            med = {e: (statistics.median(statistics.median(r["prefill_tok_s"]) for r in rs),
                       statistics.median(statistics.median(r["decode_tok_s"]) for r in rs),
                       statistics.median(r["peak"] for r in rs) / 2 ** 20) for e, rs in got.items()}
            rows.append((threads, prompt, med))
            print(threads, prompt, med, flush=True)
    print("\n| threads | prompt | prefill tok/s Petit / llama.cpp | ratio | decode tok/s after it, Petit / llama.cpp "
          "| ratio | peak MB Petit / llama.cpp |")
    print("|---|---|---|---|---|---|---|")
    for threads, prompt, med in rows:
        p, q = med.get("petit"), med.get("llama.cpp")
        if p and q:
            print(f"| {threads} | {prompt} | {p[0]:.1f} / {q[0]:.1f} | {p[0] / q[0]:.2f} | {p[1]:.1f} / {q[1]:.1f} | "
                  f"{p[1] / q[1]:.2f} | {p[2]:.0f} / {q[2]:.0f} |")
    for threads in sorted({r[0] for r in rows}):
        by = {prompt: med for t, prompt, med in rows if t == threads}
        if 16 in by and args.long in by:
            for e in ("petit", "llama.cpp"):
                if e in by[16] and e in by[args.long]:
                    print(f"{threads} threads, {e}: decode at position {args.long} / at 16 = "
                          f"{by[args.long][e][1] / by[16][e][1]:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(json.loads(sys.argv[2]))
    else:
        main()
