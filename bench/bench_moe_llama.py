#!/usr/bin/env python3
"""Mixture-of-experts models in Petit beside llama.cpp, on the same GGUF file, in one run (issue 16's benchmark).

Shapes (random weights, generated and quantized tensor by tensor: the experts never exist as floats, their blocks
are drawn directly, with scales giving rows of about unit norm):
  * qwen3-30b-a3b  Qwen3-30B-A3B's layer (hidden 2048, 32 query / 4 key-value heads of 128 with per-head q / k
                   norms, 128 experts of 768, top-8, renormalised), only --layers of them (default 2), vocabulary
                   --vocab (default 4096: the head is not what is compared)
  * olmoe-1b-7b    OLMoE-1B-7B in full: 16 layers, hidden 2048, 16 heads of 128, q / k norms over the whole rows, 64
                   experts of 1024, top-8 (not renormalised), vocabulary 50304: 6.9B parameters
written as llama.cpp's qwen3moe / olmoe GGUF (Petit's writer: petit/loading/gguf_export.py's keys and names; the tiny
test tokenizer padded to the vocabulary), in q8_0 and q4_0, cached under --work (default /tmp/petit-bench-moe).

Each engine runs in its own child process (bench/bench_hf.py's children: fresh RSS, the same prefill / decode
passes): a --prompt-token prefill (default 128) and --gen greedy tokens (default 64), at 1 and 2 threads, rounds
interleaved (--rounds, medians). llama.cpp: llama-cpp-python built natively, flash attention as bench_hf.py.
Petit loads the GGUF file as any user would (petit.load: q8_0 / q4_0 experts are slices of the mapped file, repacked
for this CPU). Columns: tokens/s, peak resident MB, and Petit / llama.cpp (above 1: Petit is faster / smaller).

    python bench/bench_moe_llama.py [--shape qwen3-30b-a3b,olmoe-1b-7b] [--types q8_0,q4_0] [--threads 1,2]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_hf  # noqa: E402

SHAPES = {
    "qwen3-30b-a3b": dict(arch="qwen3moe", model_type="qwen3_moe", hidden_size=2048, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
                          moe_intermediate_size=768, intermediate_size=6144, norm_topk_prob=True, layers=2,
                          vocab=4096, qk_norm="head", rope_theta=1e6),
    "olmoe-1b-7b": dict(arch="olmoe", model_type="olmoe", hidden_size=2048, num_attention_heads=16,
                        num_key_value_heads=16, head_dim=128, num_experts=64, num_experts_per_tok=8,
                        intermediate_size=1024, norm_topk_prob=False, layers=16, vocab=50304, qk_norm="full",
                        rope_theta=10000.0),
}
BLOCK = {"q8_0": 34, "q4_0": 18}


def random_blocks(rng, rows: int, cols: int, dtype: str) -> np.ndarray:
    """rows x cols weights as q8_0 / q4_0 blocks drawn directly: uniform quants, an f16 scale per block such that
    a row has about unit norm (x ~ U(-1, 1) * s has variance s^2 / 3)."""
    nb = cols // 32
    out = np.empty((rows, nb, BLOCK[dtype]), np.uint8)
    if dtype == "q8_0":
        scale = np.float16(np.sqrt(3.0 / cols) / 127)
        out[:, :, 2:] = rng.integers(-127, 128, (rows, nb, 32), dtype=np.int8).view(np.uint8)
    else:
        scale = np.float16(np.sqrt(3.0 / cols) / 8)
        out[:, :, 2:] = rng.integers(0, 256, (rows, nb, 16), dtype=np.uint8)
    out[:, :, :2] = np.frombuffer(scale.tobytes(), np.uint8)
    return out.reshape(rows, -1)


def f32(rng, shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).view(np.uint8)


def build_gguf(path: str, shape: str, dtype: str) -> None:
    from petit.formats.gguf import write_gguf
    from petit.hf.tokenizer import HFTokenizer
    from petit.hf.gguf_tokenizer_export import tokenizer_metadata
    from petit.loading.gguf_export import _hparams
    s = SHAPES[shape]
    D, H, KV, HD, E, V = (s["hidden_size"], s["num_attention_heads"], s["num_key_value_heads"], s["head_dim"],
                          s["num_experts"], s["vocab"])
    F = s.get("moe_intermediate_size") or s["intermediate_size"]
    cfg = {k: v for k, v in s.items() if k not in ("arch", "layers", "vocab", "qk_norm")}
    cfg.update(num_hidden_layers=s["layers"], vocab_size=V, max_position_embeddings=4096, rms_norm_eps=1e-6)
    gt = dtype.upper()
    rng = np.random.default_rng(0)
    t = {"token_embd.weight": (gt, (V, D), random_blocks(rng, V, D, dtype))}
    qn, kn = (HD, HD) if s["qk_norm"] == "head" else (H * HD, KV * HD)
    for i in range(s["layers"]):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = ("F32", (D,), np.ones(D, np.float32).view(np.uint8))
        for name, rows, cols in (("attn_q", H * HD, D), ("attn_k", KV * HD, D), ("attn_v", KV * HD, D),
                                 ("attn_output", D, H * HD)):
            t[p + name + ".weight"] = (gt, (rows, cols), random_blocks(rng, rows, cols, dtype))
        t[p + "attn_q_norm.weight"] = ("F32", (qn,), np.ones(qn, np.float32).view(np.uint8))
        t[p + "attn_k_norm.weight"] = ("F32", (kn,), np.ones(kn, np.float32).view(np.uint8))
        t[p + "ffn_norm.weight"] = ("F32", (D,), np.ones(D, np.float32).view(np.uint8))
        t[p + "ffn_gate_inp.weight"] = ("F32", (E, D), f32(rng, (E, D), 3.0 / np.sqrt(D)))
        for name, rows, cols in (("ffn_gate_exps", F, D), ("ffn_up_exps", F, D), ("ffn_down_exps", D, F)):
            t[p + name + ".weight"] = (gt, (E, rows, cols), np.stack([random_blocks(rng, rows, cols, dtype)
                                                                       for _ in range(E)]))
    t["output_norm.weight"] = ("F32", (D,), np.ones(D, np.float32).view(np.uint8))
    t["output.weight"] = (gt, (V, D), random_blocks(rng, V, D, dtype))
    tok = HFTokenizer.from_folder(os.path.join(HERE, "..", "tests", "fixtures", "hf", "qwen3"))
    meta = {"general.architecture": s["arch"], "general.name": f"random {shape}",
            "general.quantization_version": np.uint32(2), **_hparams(s["arch"], cfg, path),
            **tokenizer_metadata(tok, path, V)}
    tmp = path + ".part"
    write_gguf(tmp, meta, t)
    os.replace(tmp, path)


def child(spec: dict) -> None:
    vocab = spec["vocab"]
    bench_hf.prompt_ids = lambda n: np.random.default_rng(1234).integers(5, min(vocab, 300), n).tolist()
    bench_hf.child_main(spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="qwen3-30b-a3b,olmoe-1b-7b")
    ap.add_argument("--types", default="q8_0,q4_0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--layers", type=int, default=2, help="layers of the qwen3-30b-a3b shape")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default="/tmp/petit-bench-moe")
    args = ap.parse_args()
    SHAPES["qwen3-30b-a3b"]["layers"] = args.layers
    os.makedirs(args.work, exist_ok=True)
    flags = next((ln.split(":", 1)[1].split() for ln in open("/proc/cpuinfo") if ln.startswith("flags")), [])
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
               platform.processor())
    print(f"CPU: {cpu}, {os.cpu_count()} CPUs; {' '.join(f for f in flags if 'avx' in f or 'amx' in f)}")
    rows = []
    for shape in args.shape.split(","):
        for dtype in args.types.split(","):
            path = os.path.join(args.work, f"{shape}-{dtype}{'-%dl' % args.layers if 'qwen3' in shape else ''}.gguf")
            if not os.path.exists(path):
                t0 = time.perf_counter()
                build_gguf(path, shape, dtype)
                print(f"built {path} ({os.path.getsize(path) / 2**30:.2f} GiB) in {time.perf_counter() - t0:.0f} s",
                      flush=True)
            for threads in (int(x) for x in args.threads.split(",")):
                got = {"petit": [], "llama.cpp": []}
                for _ in range(args.rounds):
                    for engine in got:
                        spec = {"engine": engine, "path": path, "threads": threads, "prompt": args.prompt,
                                "gen": args.gen, "reps": 1, "budget": 60, "flash_attn": True,
                                "vocab": SHAPES[shape]["vocab"], "logits_out": os.path.join(args.work, "l.npy")}
                        r = run_child(spec)
                        if "error" in r:
                            print(f"{shape} {dtype} {engine} {threads}t: {r['error']}", flush=True)
                            continue
                        got[engine].append(r)
                rows.append((shape, dtype, threads, got))
                report(rows[-1])
    print()
    print("| shape | type | threads | prefill tok/s Petit / llama.cpp | ratio | decode tok/s Petit / llama.cpp | ratio "
          "| peak MB Petit / llama.cpp | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        report(r, table=True)


def run_child(spec: dict) -> dict:
    import subprocess
    env = dict(os.environ, PETIT_THREADS=str(spec["threads"]), OMP_NUM_THREADS=str(spec["threads"]))
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-3:]
    return {"error": f"exit {p.returncode}: " + " | ".join(tail)}


def report(row, table: bool = False) -> None:
    shape, dtype, threads, got = row
    med = {e: {k: statistics.median(statistics.median(r[k]) if isinstance(r[k], list) else r[k] for r in rs)
               for k in ("prefill_tok_s", "decode_tok_s", "peak")} if rs else None for e, rs in got.items()}
    p, q = med["petit"], med["llama.cpp"]
    if p is None or q is None:
        return
    pf, dc, pk = (p["prefill_tok_s"], q["prefill_tok_s"]), (p["decode_tok_s"], q["decode_tok_s"]), \
        (p["peak"] / 2**20, q["peak"] / 2**20)
    if table:
        print(f"| {shape} | {dtype} | {threads} | {pf[0]:.1f} / {pf[1]:.1f} | {pf[0] / pf[1]:.2f} | {dc[0]:.1f} / "
              f"{dc[1]:.1f} | {dc[0] / dc[1]:.2f} | {pk[0]:.0f} / {pk[1]:.0f} | {pk[1] / pk[0]:.2f} |")
    else:
        print(f"{shape} {dtype} {threads}t: prefill {pf[0]:.1f} / {pf[1]:.1f} tok/s ({pf[0] / pf[1]:.2f}), decode "
              f"{dc[0]:.1f} / {dc[1]:.1f} ({dc[0] / dc[1]:.2f}), peak {pk[0]:.0f} / {pk[1]:.0f} MB", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(json.loads(sys.argv[2]))
    else:
        main()
