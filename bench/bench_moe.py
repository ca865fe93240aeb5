"""Mixture-of-experts decode against a dense model of the same active size, in Petit (issue 16's "how decode speed
compares with a dense model of the same active size").

Both are built in memory with random q8_0 weights (rows interleaved for the CPU, as a load does), with
Qwen3-30B-A3B's layer shape: hidden 2048, 32 query / 4 key-value heads of 128, and either 128 experts of 768 with
8 chosen per token, or one dense MLP of 8 x 768 = 6144 (the same multiply-adds per token). Only a few layers
(--layers, default 2: 1.3 GB of q8_0 experts), a small vocabulary (the head is not what is compared). Decode: 32
greedy steps after a 16-token prompt, best of 3, at 1 and 2 threads. A MoE step reads 8 experts' matrices of 128
(the test suite counts them); the rest of the gap to the dense model is the routing and the gathers.

Petit beside llama.cpp on MoE GGUF files (Qwen3-30B-A3B's layers, OLMoE-1B-7B in full): bench/bench_moe_llama.py.

    python bench/bench_moe.py [--layers 2]
"""
import argparse
import os
import platform
import time

import numpy as np

from petit.cache import KVCache
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm, Vec
from petit.models.blocks.moe import Moe
from petit.models.blocks.rope import Rope
from petit.native import Weight, configure, info, quantize

D, H, KV, HD, E, K, F, VOCAB = 2048, 32, 4, 128, 128, 8, 768, 2048


def q8(rng, rows: int, cols: int) -> Weight:
    w = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(cols ** -0.5)
    return Weight(quantize(w, "q8_0"), "q8_0", (rows, cols))


def f32(rng, rows: int, cols: int) -> Weight:
    w = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(cols ** -0.5)
    return Weight(np.ascontiguousarray(w).view(np.uint8).reshape(rows, -1), "f32", (rows, cols))


def build(n_layers: int, moe: bool, seed: int = 0) -> Decoder:
    rng = np.random.default_rng(seed)
    rope = Rope(HD, 1e6, None, 4096, None, False)
    ones = lambda n: Norm("rms", 1e-6, Vec(np.ones(n, np.float32)))      # noqa: E731
    layers = []
    for _ in range(n_layers):
        L = Layer(q=q8(rng, H * HD, D), k=q8(rng, KV * HD, D), v=q8(rng, KV * HD, D), o=q8(rng, D, H * HD),
                  attn_norm=ones(D), mlp_norm=ones(D), q_norm=ones(HD), k_norm=ones(HD), rope=rope)
        if moe:
            L.moe = Moe(f32(rng, E, D), [q8(rng, F, D) for _ in range(E)], [q8(rng, F, D) for _ in range(E)],
                        [q8(rng, D, F) for _ in range(E)], K, True)
        else:
            L.gate, L.up, L.down = q8(rng, K * F, D), q8(rng, K * F, D), q8(rng, D, K * F)
        layers.append(L)
    arch = Arch(vocab_size=VOCAB, hidden_size=D, intermediate_size=K * F, num_attention_heads=H,
                num_key_value_heads=KV, head_dim=HD, context_length=4096)
    head = q8(rng, VOCAB, D)
    net = Decoder(arch, head, layers, ones(D), head)
    if info()["isa"] != "scalar":                   # interleaved rows, as petit.load repacks them for x86
        net.replace_matrices({id(W): W.interleave() for W in net.matrices() if W.dtype == "q8_0"})
    return net


def decode_rate(net: Decoder, n_layers: int) -> float:
    best = float("inf")
    logits = np.empty((1, VOCAB), np.float32)
    for _ in range(3):
        cache = KVCache(n_layers, KV, 256, HD, "f32")
        net.forward(list(range(1, 17)), cache, logits)
        tok = int(logits.argmax())
        t0 = time.perf_counter()
        for _ in range(32):
            net.forward([tok], cache, logits)
            tok = int(logits.argmax())
        best = min(best, (time.perf_counter() - t0) / 32)
    return 1.0 / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo") if line.startswith("flags")), [])
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    print(f"CPU: {model}, {os.cpu_count()} CPUs; {' '.join(f for f in flags if 'avx' in f or 'amx' in f)}")
    t0 = time.perf_counter()
    moe, dense = build(args.layers, True), build(args.layers, False)
    print(f"built in {time.perf_counter() - t0:.0f} s; kernels {info()['isa']}; {args.layers} layers of "
          f"Qwen3-30B-A3B's shape")
    print("| threads | MoE (128 experts, top-8) tok/s | dense (6144) tok/s | MoE / dense |")
    print("|---|---|---|---|")
    for threads in (1, 2):
        configure(threads=threads)
        m, d = decode_rate(moe, args.layers), decode_rate(dense, args.layers)
        print(f"| {threads} | {m:.1f} | {d:.1f} | {m / d:.2f} |")


if __name__ == "__main__":
    main()
