#!/usr/bin/env python3
"""Prefill and decode tokens/s with the OpenCL offload (`--gpu`, petit.gpu) against the CPU path, and against
llama.cpp's GPU backend on the same GGUF file where llama-cpp-python is installed with one (issue 34's goals:
prefill >= 5x the CPU path, decode at >= 70 % of the device's memory bandwidth).

Method. The model loads once (a .petit or GGUF file as stored, or a Hugging Face folder at q8_0; --weights converts); each
mode runs --rounds times and the best round counts: prefill is one forward step over a --prompt-token prompt from a
fresh cache, decode is --decode single-token steps after a 32-token prompt (greedy argmax, the logits of the last
position only). The GPU mode attaches the offload (all the layers that fit, or --gpu-layers) with the device the
flags pick and prints it; the weights on the device and the GB/s that decode reads of them are printed beside.
llama.cpp's row runs its Python binding with n_gpu_layers=-1 on a GGUF model (--gguf, default the model itself when
it is one) and is skipped, saying why, when the binding or its GPU backend is missing.

On a machine without a GPU the device is PoCL's CPU device (pip install pocl-binary-distribution): the script runs
and checks the plumbing, but its figures say nothing about a GPU (the kernels then compete with the CPU path for the
same cores); the table says so.

The kernel rows time one --kernel ROWS COLS matrix alone (q8_0 and q4_0, one token and 64), on the device and on
the CPU path: what a product costs without the rest of the step.

Usage: python bench/bench_gpu.py MODEL [--weights TYPE] [--prompt-tokens 512] [--decode 64] [--rounds 3]
       [--gpu-platform N] [--gpu-device N] [--gpu-layers N] [--gguf FILE] [--kernel ROWS COLS]
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)          # this checkout's petit, whatever is installed

import petit                      # noqa: E402
from petit.gpu import GpuUnavailable, attach, detach  # noqa: E402


def _prompt(model, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, model.vocab_size, n).astype(np.int32)


def prefill(model, ids, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        cache = model.new_cache(len(ids) + 1)
        t0 = time.perf_counter()
        model.forward(ids, cache)
        best = min(best, time.perf_counter() - t0)
    return len(ids) / best


def decode(model, n: int, rounds: int) -> float:
    ids = _prompt(model, 32)
    best = float("inf")
    for _ in range(rounds):
        cache = model.new_cache(len(ids) + n + 1)
        logits = model.forward(ids, cache)
        t0 = time.perf_counter()
        for _ in range(n):
            logits = model.forward([int(np.argmax(logits))], cache)
        best = min(best, time.perf_counter() - t0)
    return n / best


def llama_cpp_row(path: str, n_prompt: int, n_decode: int) -> str:
    try:
        import llama_cpp
    except ImportError:
        return "llama.cpp GPU: skipped (llama-cpp-python is not installed)"
    if not llama_cpp.llama_supports_gpu_offload():
        return "llama.cpp GPU: skipped (this llama-cpp-python build has no GPU backend)"
    llm = llama_cpp.Llama(path, n_gpu_layers=-1, n_ctx=n_prompt + n_decode + 8, verbose=False)
    ids = [int(t) for t in _prompt(type("M", (), {"vocab_size": llm.n_vocab()})(), n_prompt)]
    t0 = time.perf_counter()
    llm.eval(ids)
    pre = n_prompt / (time.perf_counter() - t0)
    llm.reset()
    llm.eval(ids[:32])
    t0 = time.perf_counter()
    for _ in range(n_decode):
        llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
    dec = n_decode / (time.perf_counter() - t0)
    return f"llama.cpp GPU  prefill {pre:9.1f} tok/s   decode {dec:7.1f} tok/s"


def kernel_rows(kernels, rows: int, cols: int, rounds: int) -> None:
    """One rows x cols matrix, q8_0, q4_0, Q4_K and Q6_K, at T = 1 (decode) and T = 64 (a prefill slice): the
    device's time per product (input sent, output read back) and the GB/s of the matrix it reads, against the CPU
    path's time."""
    from petit.gpu.kernels import KQUANT_BYTES
    from petit.native import Weight, matmul, quantize
    rng = np.random.default_rng(1)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    for dtype in ("q8_0", "q4_0", "q4_k", "q6_k"):
        if dtype in KQUANT_BYTES and cols % 256:
            continue                    # a K-quant's rows are whole super-blocks of 256 values
        raw = quantize(w, dtype)
        W, buf = Weight(raw, dtype, (rows, cols)), kernels.upload(raw)
        for T in (1, 64):
            x = rng.standard_normal((T, cols)).astype(np.float32)
            out = np.empty((T, rows), np.float32)
            dev = cpu = float("inf")
            for _ in range(rounds):
                t0 = time.perf_counter()
                kernels.matmul(dtype, buf, rows, kernels.put_act(x, kq=dtype in KQUANT_BYTES), out)
                dev = min(dev, time.perf_counter() - t0)
                t0 = time.perf_counter()
                matmul(W, x)
                cpu = min(cpu, time.perf_counter() - t0)
            print(f"kernel {dtype} {rows}x{cols} T={T:<3d} device {dev * 1e6:9.0f} us ({raw.nbytes / dev / 1e9:6.1f} GB/s)"
                  f"   CPU path {cpu * 1e6:9.0f} us   ({cpu / dev:.2f}x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--weights", help="convert at load (default: as stored; a Hugging Face folder: q8_0)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpu-platform", type=int)
    ap.add_argument("--gpu-device", type=int)
    ap.add_argument("--gpu-layers", type=int)
    ap.add_argument("--gguf", help="the GGUF file llama.cpp's row runs (default: MODEL when it is one)")
    ap.add_argument("--kernel", type=int, nargs=2, metavar=("ROWS", "COLS"), default=(4096, 4096),
                    help="the size of the matrix of the kernel rows (default 4096 4096; 0 0: none)")
    a = ap.parse_args()
    model = petit.load(a.model, weights=a.weights)
    ids = _prompt(model, min(a.prompt_tokens, model.context_length - 1))
    print(f"model: {a.model} ({model.n_layers} layers, {model.weight_type} weights); prompt {len(ids)} tokens, "
          f"decode {a.decode} steps, best of {a.rounds}")
    cpu_pre, cpu_dec = prefill(model, ids, a.rounds), decode(model, a.decode, a.rounds)
    print(f"CPU path       prefill {cpu_pre:9.1f} tok/s   decode {cpu_dec:7.1f} tok/s")
    try:
        off = attach(model, a.gpu_platform, a.gpu_device, a.gpu_layers)
    except GpuUnavailable as e:
        print(f"--gpu: skipped ({e})")
        return 0
    print(f"device: {off.describe()}")
    if a.kernel[0] > 0:
        kernel_rows(off.kernels, a.kernel[0], a.kernel[1], a.rounds)
    for s in off.skipped:
        print(f"  on the CPU: {s}")
    gpu_pre, gpu_dec = prefill(model, ids, a.rounds), decode(model, a.decode, a.rounds)
    print(f"--gpu          prefill {gpu_pre:9.1f} tok/s   decode {gpu_dec:7.1f} tok/s   "
          f"(prefill {gpu_pre / cpu_pre:.2f}x, decode {gpu_dec / cpu_dec:.2f}x the CPU path; decode reads "
          f"{off.nbytes * gpu_dec / 1e9:.1f} GB/s of the device's matrices)")
    if not off.device.is_gpu:
        print(f"note: {off.device.name} is not a GPU (PoCL's CPU device?): these figures check that the offload "
              "runs, they say nothing about a GPU")
    detach(model)
    gguf = a.gguf or (a.model if a.model.endswith(".gguf") else None)
    print(llama_cpp_row(gguf, len(ids), a.decode) if gguf else "llama.cpp GPU: skipped (no GGUF file: --gguf FILE)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
