#!/usr/bin/env python3
"""Petit beside llama.cpp on the files people download, at the sizes they run (issue 31): random-weight GGUF files
with exactly the shape of Qwen2.5-3B and Qwen2.5-7B, at Q8_0, Q4_K_M, Q5_K_M, Q6_K, IQ4_XS and Q4_0.

What it builds (once, cached by shape and type under --cache, default /work/bigcache or $PETIT_BIG_CACHE):
  * <shape>-q8_0.gguf   written directly from NumPy, tensor by tensor (random int8 blocks, fp16 scales of a
                        0.02-std weight): no float model is ever in memory, so a 7B file needs ~0.6 GB of RAM to make.
                        Tokenizer keys from the vocab-only ggml-vocab-qwen2.gguf llama.cpp ships (padded to the
                        shape's vocabulary as convert_hf_to_gguf.py pads); norms 1, q/k/v biases small.
  * <shape>-<type>.gguf  llama.cpp's own quantizer (llama_cpp.llama_model_quantize, requantizing from the Q8_0
                        file, llama.cpp's default mix for the _M types).
What it measures, each engine and file in its own child process (clean RSS), the engines alternating round by round:
  * open s       the load call from the page cache (petit.load + new_cache; llama_cpp.Llama with its context):
                 the parent reads the whole file just before, and the child reports the share of its pages then in
                 the page cache ("resident"); Petit's modules are byte-compiled first, as pip install leaves them
  * cold s       the same load call plus one token's logits, after the file was dropped from the page cache
                 (posix_fadvise DONTNEED; --cold), so a memory-mapped engine pays its reads where it makes them
  * dec@16       tokens/s of --gen greedy tokens after a 16-token prompt
  * pf512        tokens/s of one 512-token prompt into an empty cache (last position's logits only)
  * dec@1000     tokens/s of --gen tokens after the 512-token prompt was continued by 488 more (--long)
  * peak MiB     the child's VmHWM; `budget` = file + KV cache (f16 at Petit's/llama.cpp's context) + 150 MiB
Ratios are Petit / llama.cpp on the same file, median over --rounds. The CPU, its flags and the measured read
bandwidth and int8 peak (bench/bench_limits.py) are printed beside the table, with decode's GB/s (file bytes per
token x tokens/s) as a share of that bandwidth.

Usage: python bench/bench_big.py [--shapes 3b,7b] [--types q8_0,q4_k_m,q5_k_m,q6_k,iq4_xs,q4_0] [--rounds 2]
                                 [--threads 2] [--gen 16] [--long] [--cold] [--only petit,llama.cpp]
                                 [--cache DIR] [--build-only] [--flash-attn]
Needs llama-cpp-python (the peer and the quantizer) and gguf-py (PYTHONPATH=.../vendor/llama.cpp/gguf-py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_hf import RssSampler, proc_status, prompt_ids  # noqa: E402

MB = 1 << 20
SHAPES = {   # Qwen/Qwen2.5-3B-Instruct and Qwen/Qwen2.5-7B-Instruct's config.json, shape and numerics
    "3b": dict(vocab=151936, hidden=2048, inter=11008, layers=36, heads=16, kv=2, tied=True),
    "7b": dict(vocab=152064, hidden=3584, inter=18944, layers=28, heads=28, kv=4, tied=False),
}
FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
          "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M", "q6_k": "LLAMA_FTYPE_MOSTLY_Q6_K",
          "iq4_xs": "LLAMA_FTYPE_MOSTLY_IQ4_XS", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0"}
VOCAB_GGUF = "/tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf"


# ------------------------------------------------------------------------------------------------ building files

def tensor_list(s: dict) -> list:
    """(gguf name, shape as numpy (rows, cols) or (n,), kind) in the order convert_hf_to_gguf.py writes them."""
    h, hd = s["hidden"], s["hidden"] // s["heads"]
    kvd = hd * s["kv"]
    out = [("token_embd.weight", (s["vocab"], h), "q8")]
    for i in range(s["layers"]):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,), "one"),
                (b + "attn_q.weight", (h, h), "q8"), (b + "attn_q.bias", (h,), "bias"),
                (b + "attn_k.weight", (kvd, h), "q8"), (b + "attn_k.bias", (kvd,), "bias"),
                (b + "attn_v.weight", (kvd, h), "q8"), (b + "attn_v.bias", (kvd,), "bias"),
                (b + "attn_output.weight", (h, h), "q8"), (b + "ffn_norm.weight", (h,), "one"),
                (b + "ffn_gate.weight", (s["inter"], h), "q8"), (b + "ffn_up.weight", (s["inter"], h), "q8"),
                (b + "ffn_down.weight", (h, s["inter"]), "q8")]
    out.append(("output_norm.weight", (h,), "one"))
    if not s["tied"]:
        out.append(("output.weight", (s["vocab"], h), "q8"))
    return out


def random_q8_0(rng, rows: int, cols: int):
    """rows x cols Q8_0 bytes: per 32 values an fp16 scale (a 0.02-std weight's: ~0.02 * 2.5 / 127) and 32 int8."""
    import numpy as np
    nb = rows * cols // 32
    blocks = np.empty((nb, 34), np.uint8)
    blocks[:, 2:] = np.frombuffer(rng.bytes(nb * 32), np.uint8).reshape(nb, 32)
    blocks[:, :2] = rng.uniform(3.5e-4, 4.5e-4, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
    return blocks.reshape(rows, cols // 32 * 34)


def build_q8_0(shape: str, out: str) -> None:
    """Child: the shape's Q8_0 GGUF written tensor by tensor."""
    import numpy as np
    import gguf
    s = SHAPES[shape]
    rng = np.random.default_rng(31)
    vocab = gguf.GGUFReader(VOCAB_GGUF)
    w = gguf.GGUFWriter(out, "qwen2")
    w.add_name(f"random Qwen2.5-{shape.upper()}-shaped (petit bench_big)")
    w.add_context_length(32768)
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["inter"])
    w.add_block_count(s["layers"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    f = vocab.fields
    tokens = list(f["tokenizer.ggml.tokens"].contents())
    types = list(f["tokenizer.ggml.token_type"].contents())
    for i in range(len(tokens), s["vocab"]):          # as convert_hf_to_gguf.py pads a vocabulary to the matrix
        tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
    w.add_tokenizer_model(f["tokenizer.ggml.model"].contents())
    w.add_tokenizer_pre(f["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(list(f["tokenizer.ggml.merges"].contents()))
    w.add_bos_token_id(int(f["tokenizer.ggml.bos_token_id"].contents()))
    w.add_eos_token_id(int(f["tokenizer.ggml.eos_token_id"].contents()))
    w.add_pad_token_id(int(f["tokenizer.ggml.padding_token_id"].contents()))
    w.add_add_bos_token(False)
    plan = tensor_list(s)
    for name, shp, kind in plan:
        if kind == "q8":
            w.add_tensor_info(name, (shp[0], shp[1] // 32 * 34), np.dtype(np.uint8), shp[0] * shp[1] // 32 * 34,
                              raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor_info(name, shp, np.dtype(np.float32), shp[0] * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shp, kind in plan:
        if kind == "q8":
            t = random_q8_0(rng, *shp)
        elif kind == "one":
            t = np.ones(shp, np.float32)
        else:
            t = rng.normal(0, 0.02, shp).astype(np.float32)
        w.write_tensor_data(t)
        del t
    w.close()


def quantize(src: str, out: str, ftype: str, threads: int) -> None:
    """Child: llama.cpp's own quantizer, requantizing the Q8_0 file."""
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = getattr(llama_cpp, FTYPES[ftype])
    p.nthread = threads
    p.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(src.encode(), out.encode(), p)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> {out}, {ftype}) returned {rc}")


def run_py(args: list, what: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__)] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed: " + " | ".join(p.stderr.strip().splitlines()[-3:]))
    return time.perf_counter() - t0


def ensure_file(cache: str, shape: str, ftype: str, threads: int) -> str:
    path = os.path.join(cache, f"qwen2.5-{shape}-{ftype}.gguf")
    if os.path.exists(path):
        return path
    tmp = path + ".tmp"
    if ftype == "q8_0":
        s = run_py(["--task", json.dumps({"task": "q8_0", "shape": shape, "out": tmp})], f"{shape} q8_0")
    else:
        src = ensure_file(cache, shape, "q8_0", threads)
        s = run_py(["--task", json.dumps({"task": "quantize", "src": src, "out": tmp, "ftype": ftype,
                                          "threads": threads})], f"{shape} {ftype}")
    os.rename(tmp, path)
    print(f"  built {path} ({os.path.getsize(path) / MB:.0f} MiB) in {s:.0f} s", flush=True)
    return path


# ------------------------------------------------------------------------------------------------ children

def load_into_page_cache(path: str) -> None:
    """Read the whole file once, so that "open s" measures an open from the page cache (this VM's host pages out
    file pages no process maps: minutes after the last run, part of a file comes back from disk)."""
    buf = bytearray(1 << 24)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass


def resident_share(path: str) -> float | None:
    """The share of the file's pages in the page cache (mincore over a fresh mapping), None where that cannot be
    asked."""
    import ctypes
    import mmap
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        size = os.path.getsize(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            at = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        if at in (None, ctypes.c_void_p(-1).value):
            return None
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        ok = libc.mincore(ctypes.c_void_p(at), ctypes.c_size_t(size), vec) == 0
        libc.munmap(ctypes.c_void_p(at), ctypes.c_size_t(size))
        return sum(b & 1 for b in bytes(vec)) / pages if ok else None
    except (OSError, AttributeError):
        return None


def drop_from_page_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def child(spec: dict) -> dict:
    """Load, then the measured passes; returns the figures."""
    import numpy as np
    ids = prompt_ids(1000)
    n_ctx = 1000 + spec["gen"] + 8
    resident = resident_share(spec["path"])        # measured before the open, not counted in it
    sampler = RssSampler()
    t0 = time.perf_counter()
    if spec["engine"] == "petit":
        import petit
        from petit import native
        native.configure(threads=spec["threads"])
        model = petit.load(spec["path"])
        cache = model.new_cache(n_ctx)
        kv_bytes = cache.nbytes

        def reset():
            cache.rewind(0)

        def fwd(toks):
            return model.forward(toks, cache)
        info = dict(native.info())
    else:
        import llama_cpp
        llm = llama_cpp.Llama(spec["path"], n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=spec["threads"],
                              n_threads_batch=spec["threads"], logits_all=False, flash_attn=spec["flash_attn"],
                              verbose=False)
        n_vocab, ctx = llm.n_vocab(), llm.ctx
        kv_bytes = None

        def reset():
            llm.reset()

        def fwd(toks):
            llm.eval(toks)
            return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        info = {"llama_cpp": llama_cpp.__version__, "flash_attn": spec["flash_attn"]}
    open_s = time.perf_counter() - t0
    first = fwd(ids[:1])
    first_s = time.perf_counter() - t0
    split = sampler.stop()
    r = {"open_s": open_s, "resident": resident, "first_s": first_s, "load_split": split, "engine_info": info,
         "kv_bytes": kv_bytes,
         "first_argmax": int(np.argmax(first))}
    if spec.get("cold_only"):
        return r

    def decode(logits, n):
        tok = int(np.argmax(logits))
        t = time.perf_counter()
        for _ in range(n):
            tok = int(np.argmax(fwd([tok])))
        return n / (time.perf_counter() - t)

    reset()
    r["dec16"] = decode(fwd(ids[:16]), spec["gen"])
    reset()
    t = time.perf_counter()
    lg = fwd(ids[:512])
    r["pf512"] = 512 / (time.perf_counter() - t)
    if spec["long"]:
        lg = fwd(ids[512:1000])
        r["dec1000"] = decode(lg, spec["gen"])
    return r


def child_main(spec: dict) -> None:
    r = child(spec)
    r["peak"] = proc_status()["VmHWM"]
    print("RESULT " + json.dumps(r), flush=True)


def run_child(spec: dict, timeout: float = 1800) -> dict:
    env = dict(os.environ, PETIT_THREADS=str(spec["threads"]), OMP_NUM_THREADS=str(spec["threads"]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)     # an installed Petit has its bytecode: an open compiles nothing
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-2:]
    return {"error": f"exit {p.returncode}: " + " | ".join(tail)}


# ------------------------------------------------------------------------------------------------ parent

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def cpu_line() -> str:
    model, flags = "?", []
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                have = set(line.split(":", 1)[1].split())
                flags = [x for x in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                                     "avx_vnni", "amx_tile", "amx_int8", "amx_bf16") if x in have]
    return f"{model}; {os.cpu_count()} logical CPUs; {' '.join(flags)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="3b,7b")
    ap.add_argument("--types", default="q8_0,q4_k_m,q5_k_m,q6_k,iq4_xs,q4_0")
    ap.add_argument("--only", default="petit,llama.cpp")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=16)
    ap.add_argument("--long", action="store_true", help="also decode after 1000 tokens (prefills 488 more)")
    ap.add_argument("--cold", action="store_true", help="also a cold load (file dropped from the page cache)")
    ap.add_argument("--flash-attn", action="store_true")
    ap.add_argument("--cache", default=os.environ.get("PETIT_BIG_CACHE", "/work/bigcache"))
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--no-limits", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--task")
    a = ap.parse_args()
    if a.child:
        return child_main(json.loads(a.child))
    if a.task:
        t = json.loads(a.task)
        return build_q8_0(t["shape"], t["out"]) if t["task"] == "q8_0" else \
            quantize(t["src"], t["out"], t["ftype"], t["threads"])
    os.makedirs(a.cache, exist_ok=True)
    engines = a.only.split(",")
    print(cpu_line(), flush=True)
    # the bytecode a pip install writes, so that no child's open compiles Petit's modules
    import petit
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(petit.__file__)],
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, check=False)
    lim = None
    if not a.no_limits:
        from bench_limits import limits
        lim = limits(a.threads)
        print(f"measured, {a.threads} threads: read {lim['read_gbs']:.1f} GB/s, int8 {lim['int8_gops']:.0f} GOPS "
              f"({lim['int8_kernel']})", flush=True)
    rows = []
    for shape in a.shapes.split(","):
        for ftype in a.types.split(","):
            path = ensure_file(a.cache, shape, ftype, a.threads)
            if a.build_only:
                continue
            size = os.path.getsize(path)
            res = {e: [] for e in engines}
            cold = {e: [] for e in engines}
            for rnd in range(a.rounds):
                order = engines if rnd % 2 == 0 else engines[::-1]
                for e in order:
                    spec = dict(engine=e, path=path, threads=a.threads, gen=a.gen, long=a.long,
                                flash_attn=a.flash_attn)
                    if a.cold and rnd == 0:
                        drop_from_page_cache(path)
                        cold[e].append(run_child(dict(spec, cold_only=True)))
                    load_into_page_cache(path)
                    r = run_child(spec)
                    if "error" in r:
                        print(f"  {shape} {ftype} {e}: {r['error']}", flush=True)
                    res[e].append(r)
                    print(f"  {shape} {ftype} {e} round {rnd}: " + ", ".join(
                        f"{k} {r[k]:.2f}" for k in ("open_s", "resident", "dec16", "pf512", "dec1000")
                        if r.get(k) is not None), flush=True)
            rows.append((shape, ftype, size, res, cold))
    if a.build_only:
        return
    print()
    print(cpu_line())
    if lim:
        print(f"read bandwidth {lim['read_gbs']:.1f} GB/s, int8 peak {lim['int8_gops']:.0f} GOPS "
              f"({lim['int8_kernel']}), {a.threads} threads")
    hdr = "| shape | type | GiB | engine | dec@16 | dec@1000 | pf512 | open s | cold s | peak MiB | dec GB/s (% bw) |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for shape, ftype, size, res, cold in rows:
        m = {}
        for e in engines:
            ok = [r for r in res[e] if "error" not in r]
            m[e] = {k: med([r.get(k) for r in ok]) for k in ("dec16", "dec1000", "pf512", "open_s", "peak")}
            c = [r for r in cold[e] if "error" not in r]
            m[e]["cold"] = med([r["first_s"] for r in c])
            gbs = m[e]["dec16"] * size / 1e9 if m[e]["dec16"] else None
            share = f" ({100 * gbs / lim['read_gbs']:.0f} %)" if gbs and lim else ""
            print(f"| {shape} | {ftype} | {size / 2**30:.2f} | {e} | {f(m[e]['dec16'])} | {f(m[e]['dec1000'])} | "
                  f"{f(m[e]['pf512'])} | {f(m[e]['open_s'])} | {f(m[e]['cold'], '.1f')} | "
                  f"{f(m[e]['peak'] and m[e]['peak'] / MB, '.0f')} | {f(gbs, '.1f')}{share} |")
        if "petit" in m and "llama.cpp" in m:
            p, q = m["petit"], m["llama.cpp"]
            rat = [f(p[k] / q[k]) + "x" if p[k] and q[k] else "-" for k in ("dec16", "dec1000", "pf512")]
            print(f"| {shape} | {ftype} | | Petit/llama.cpp | {rat[0]} | {rat[1]} | {rat[2]} | | | | |")


if __name__ == "__main__":
    main()
