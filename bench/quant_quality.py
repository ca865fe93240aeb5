"""Quantization quality on trained weights: Petit's quantizers against llama.cpp's on the same f16 weights.

A model trained by Petit's own trainer (rows multiples of 256, as K-quants need) is written as f32, then quantized
by `petit convert` (q8_0, q4_0, q4_k, the q4_k_m recipe) and by llama.cpp's quantizer from the f16 GGUF
`petit convert` writes (Q8_0, Q4_0 pure and its default mix, Q4_K pure, Q4_K_M; dev-only llama-cpp-python). Every file is run by Petit on held-out text
(windows of the model's context) and scored by perplexity, and by how far its logits are from the f32 model's.
llama.cpp's own perplexity on its files is printed beside (`--llama-cpp-ppl`, slower).

    python bench/quant_quality.py --train               # trains the model first (~12 min on 2 cores)
    python bench/quant_quality.py --checkpoint CKPT --heldout TEXT

The training text: the paragraphs of /usr/share/common-licenses and /usr/share/doc/*/copyright (4.6 MB here),
deduplicated; the last 5 % held out (never trained on).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

WORK = "/tmp/petit-quality"
TRAIN = ["--vocab-size", "1024", "--layers", "4", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "768",
         "--context", "128", "--steps", "1500", "--batch", "16", "--seed", "1337"]


def corpus(out_dir: str) -> tuple[str, str]:
    import glob
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            texts.append(open(path, encoding="utf-8", errors="replace").read())
        except OSError:
            pass
    seen, paras = set(), []
    for p in re.split(r"\n\s*\n", "\n\n".join(texts)):
        p = p.strip()
        if len(p) >= 200 and p not in seen:
            seen.add(p)
            paras.append(p)
    text = "\n\n".join(paras)
    cut = int(len(text) * 0.95)
    train, held = os.path.join(out_dir, "train.txt"), os.path.join(out_dir, "heldout.txt")
    open(train, "w").write(text[:cut])
    open(held, "w").write(text[cut:])
    return train, held


def perplexity(model, ids: list, ctx: int, windows: int, f32=None) -> tuple[float, float]:
    """(perplexity, mean over windows of max |logit - f32 logit| / f32 logit range) over `windows` windows."""
    nll, n, drift = 0.0, 0, []
    for w in range(windows):
        seq = ids[w * ctx:(w + 1) * ctx]
        logits = model.logits(seq).astype(np.float64)
        lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
        nll += float((lse[:-1] - logits[np.arange(len(seq) - 1), seq[1:]]).sum())
        n += len(seq) - 1
        if f32 is not None:
            ref = f32[w]
            drift.append(np.abs(logits - ref).max() / np.ptp(ref))
    return float(np.exp(nll / n)), float(np.mean(drift)) if drift else 0.0


def llama_quantize(src: str, dst: str, ftype: str, pure: bool = False) -> None:
    """llama.cpp's quantizer as llama-quantize runs it (pure: every matrix of the type, no Q6_K head)."""
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    p.nthread = 2
    p.pure = pure
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p) != 0:
        raise SystemExit(f"llama.cpp could not quantize {src} to {ftype}")


def llama_cpp_ppl(path: str, ids: list, ctx: int, windows: int) -> float:
    import llama_cpp
    llm = llama_cpp.Llama(path, logits_all=True, n_ctx=ctx, n_threads=2, verbose=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    nll, n = 0.0, 0
    for w in range(windows):
        seq = ids[w * ctx:(w + 1) * ctx]
        llm.reset()
        llm.eval(seq)
        logits = np.array(llm.scores[:len(seq)], np.float64)
        lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
        nll += float((lse[:-1] - logits[np.arange(len(seq) - 1), seq[1:]]).sum())
        n += len(seq) - 1
    return float(np.exp(nll / n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", action="store_true", help="train the model first")
    ap.add_argument("--checkpoint", default=os.path.join(WORK, "ckpt"))
    ap.add_argument("--heldout", default=os.path.join(WORK, "heldout.txt"))
    ap.add_argument("--windows", type=int, default=200, help="held-out windows of the context length")
    ap.add_argument("--llama-cpp-ppl", action="store_true", help="llama.cpp's own perplexity on its files too")
    args = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    if args.train:
        train, args.heldout = corpus(WORK)
        subprocess.run([sys.executable, "-m", "petit", "train", "--corpus", train, "-o", args.checkpoint, *TRAIN,
                        "-q"], check=True)
    import petit
    f32 = os.path.join(WORK, "f32.petit")
    subprocess.run([sys.executable, "-m", "petit", "export", args.checkpoint, "--f32", "-o", f32], check=True,
                   capture_output=True)
    files = {"f32": f32}
    for kind in ("q8_0", "q4_0", "q4_k", "q4_k_m"):
        files[f"petit {kind}"] = os.path.join(WORK, f"petit-{kind}.petit")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "petit", "convert", f32, "-o", files[f"petit {kind}"], f"--{kind}"],
                       check=True, capture_output=True)
        print(f"petit convert --{kind}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    files["petit q4_k_m (gguf)"] = os.path.join(WORK, "petit-q4_k_m.gguf")
    subprocess.run([sys.executable, "-m", "petit", "convert", f32, "-o", files["petit q4_k_m (gguf)"], "--q4_k_m"],
                   check=True, capture_output=True)
    f16 = os.path.join(WORK, "f16.gguf")
    subprocess.run([sys.executable, "-m", "petit", "convert", f32, "-o", f16, "--f16"], check=True,
                   capture_output=True)
    for kind, pure in (("Q8_0", False), ("Q4_0", True), ("Q4_0", False), ("Q4_K_S", True), ("Q4_K_M", False)):
        label = f"llama.cpp {kind.replace('_S', '') if pure else kind}{' (pure)' if pure else ''}"
        files[label] = os.path.join(WORK, f"llama-{kind}{'-pure' if pure else ''}.gguf")
        llama_quantize(f16, files[label], kind, pure)

    ref = petit.load(f32)
    ctx = ref.context_length
    ids = ref.tokenizer.encode(open(args.heldout, encoding="utf-8").read())
    windows = min(args.windows, len(ids) // ctx)
    f32_logits = [ref.logits(ids[w * ctx:(w + 1) * ctx]).astype(np.float64) for w in range(windows)]
    base = os.path.getsize(files["llama.cpp Q4_K_M"])         # Q4_K (pure) below: Q4_K_S with pure, all Q4_K
    print(f"held-out: {windows} windows of {ctx} tokens ({windows * (ctx - 1)} scored), vocab {ref.vocab_size}, "
          f"{ref.n_params / 1e6:.2f}M parameters")
    print("| file | size (bytes) | size / llama.cpp Q4_K_M | perplexity (Petit runs it) | / f32 | mean max logit "
          "error / range |" + (" llama.cpp's perplexity |" if args.llama_cpp_ppl else ""))
    print("|---|---|---|---|---|---|" + ("---|" if args.llama_cpp_ppl else ""))
    f32_ppl = None
    for label, path in files.items():
        m = petit.load(path)
        ppl, drift = perplexity(m, ids, ctx, windows, None if label == "f32" else f32_logits)
        m.close()
        f32_ppl = f32_ppl or ppl
        extra = ""
        if args.llama_cpp_ppl and path.endswith(".gguf"):
            extra = f" {llama_cpp_ppl(path, ids, ctx, windows):.4f} |"
        elif args.llama_cpp_ppl:
            extra = " |"
        size = os.path.getsize(path)
        print(f"| {label} | {size:,} | {size / base:.3f} | {ppl:.4f} | {ppl / f32_ppl:.4f} | {drift:.4f} |{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
