#!/usr/bin/env python3
"""Petit beside llama.cpp and transformers on a model with exactly the shape of Qwen2.5-0.5B-Instruct, in one run.

What it builds (once, cached under --work, default /tmp/petit-bench-hf):
  * hf/          a random-weight Qwen2ForCausalLM (vocab 151936, hidden 896, intermediate 4864, 24 layers, 14 heads,
                 2 KV heads, tied embeddings, rope_theta 1e6, q/k/v biases; normal init, std 0.02) saved by
                 transformers' save_pretrained as bf16 safetensors. No tokenizer: every engine is fed token ids.
  * petit-q8_0.petit, petit-q4_0.petit   `petit convert hf -o ... --q8 | --q4`
  * gguf-bf16.gguf   the same bf16 tensors under llama.cpp's qwen2 names, written with gguf.GGUFWriter (tokenizer
                 keys copied from the vocab-only ggml-vocab-qwen2.gguf llama.cpp ships: 151936 tokens, as the model);
    gguf-q8_0.gguf, gguf-q4_0-pure.gguf, gguf-q4_0.gguf   quantized from it by llama.cpp's own
                 llama_model_quantize (q8_0; q4_0 on every matrix, like Petit's q4_0; q4_0 with llama.cpp's default
                 mix, which keeps the tied embedding / LM head in q8_0).

What it measures, every engine/config in a fresh child process (clean RSS), the children interleaved round by round:
  * load s      the load call: petit.load + new_cache; llama_cpp.Llama(...) (model and context); transformers'
                from_pretrained. Files are in the page cache (warm); imports are not counted.
  * peak MB     the child's VmHWM at the end (weights, KV cache for prompt + gen, activations, the interpreter).
  * load MB     VmHWM right after the load call (for a Hugging Face folder: the peak while quantizing).
  * cold pf s   the first prefill after load (memory-mapped weights are paged in here, one-off setup happens here;
                for transformers, after its probe).
  * prefill     tokens/s of one --prompt-token prompt (default 512) into an empty cache, logits of the last position
                only (Petit forward(all_logits=False); llama.cpp eval with logits_all=False; transformers
                logits_to_keep=1).
  * decode      tokens/s of --gen (default 128) greedy tokens right after that prefill: argmax of the logits in
                NumPy (torch for transformers), then one forward of that token. Petit: model.forward([tok], cache);
                llama.cpp: Llama.eval([tok]) and llama_get_logits_ith; transformers: model(tok, past_key_values).
  Each child runs 1 + --reps prefill+decode passes on a rewound cache; prefill takes the median of the warm passes,
  decode the median of all (the cold pass's decode is warm). A row reports the median over --rounds children.
  A decode that has run --budget seconds (default 30) stops early and counts the tokens it did. transformers first
  probes a 64-token prefill: if the whole prompt would take over half the budget, it prefills a prompt cut to fit
  (marked * in the table; a cold pass only) instead of stalling the run. bf16 prefill on a CPU without native bf16
  (no AVX-512 BF16 / AMX) is that slow, and then transformers fp32 is measured too.
  pf/llama, dec/llama: Petit / llama.cpp at the same weight type (q4_0 against the pure q4_0 file; Petit's rows
  on llama.cpp's Q4_K_M and Q6_K files against llama.cpp on the same files);
  pf/torch, dec/torch: Petit / transformers bf16 (Petit / fp32 is under Details). Above 1 Petit is faster.
  logit r: correlation of the last-position logits of the prompt's first 16 tokens with transformers (fp32 when
  run, else bf16) on the same weights: a check that every engine runs the same model (q4_0 is well below 1 on these
  random weights; q8_0 is ~0.999).

Peers that are not installed are reported as such. Install them with
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON" pip install llama-cpp-python gguf    # builds llama.cpp (~10+ min)
    pip install torch transformers

Usage: python bench/bench_hf.py [--only petit,llama.cpp,transformers] [--threads 2] [--prompt 512] [--gen 128]
                                [--rounds 2] [--reps 1] [--budget 30] [--work DIR] [--rebuild] [--torch-fp32]
                                [--flash-attn]
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import threading
import time

QWEN25_05B = dict(                      # Qwen/Qwen2.5-0.5B-Instruct's config.json, shape and numerics
    vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, max_position_embeddings=32768, max_window_layers=21, rms_norm_eps=1e-6,
    rope_theta=1000000.0, sliding_window=32768, use_sliding_window=False, tie_word_embeddings=True,
    hidden_act="silu", initializer_range=0.02, attention_dropout=0.0, bos_token_id=151643, eos_token_id=151645,
    use_cache=True,
)
ENGINES = ("petit", "llama.cpp", "transformers")
MB = 1 << 20


# ------------------------------------------------------------------------------------------------ child helpers

def proc_status() -> dict:
    """VmRSS, VmHWM, RssAnon, RssFile, RssShmem of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0]) * 1024
    return out


class RssSampler:
    """Samples RssAnon / RssFile every few ms in a thread: the split of the peak VmHWM alone does not give."""

    def __init__(self, period: float = 0.005):
        self.period, self.peak, self.at_peak = period, 0, {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            s = proc_status()
            if s["VmRSS"] > self.peak:
                self.peak, self.at_peak = s["VmRSS"], s
            self._stop.wait(self.period)

    def stop(self) -> dict:
        self._stop.set()
        self._t.join()
        return {"sampled_peak": self.peak, "anon_at_peak": self.at_peak.get("RssAnon", 0),
                "file_at_peak": self.at_peak.get("RssFile", 0)}


def prompt_ids(n: int) -> list:
    import numpy as np
    return np.random.default_rng(1234).integers(0, 151643, n).tolist()


CHECK_TOKENS = 16        # the logits check: last-position logits of the first 16 prompt tokens, in every engine
PROBE_TOKENS = 64        # the speed probe of engines that may be pathologically slow


def run_passes(prefill, step, argmax, reset, ids, gen: int, reps: int, budget: float, probe: bool) -> dict:
    """1 + reps passes of (reset, prefill ids, gen greedy steps), then the logits of the check prompt.

    A decode stops early once it has run `budget` seconds (and at least 8 tokens); the rate counts the tokens done.
    With `probe` (engines that may be pathologically slow), a PROBE_TOKENS prefill comes first; if the full prompt
    would then take over budget / 2 seconds, the prompt is cut to fit that and only the cold pass runs (the result
    says so in prompt_used)."""
    used = ids
    if probe:
        reset()
        t0 = time.perf_counter()
        prefill(ids[:PROBE_TOKENS])
        rate = min(PROBE_TOKENS, len(ids)) / (time.perf_counter() - t0)
        if len(ids) / rate > budget / 2:
            used, reps = ids[:max(min(PROBE_TOKENS, len(ids)), int(rate * budget / 2) // 16 * 16)], 0
    pf, dec, n_dec = [], [], []
    for rep in range(1 + reps):
        reset()
        t0 = time.perf_counter()
        logits = prefill(used)
        t1 = time.perf_counter()
        tok = argmax(logits)
        done = 0
        t2 = time.perf_counter()
        while done < gen:
            tok = argmax(step(tok))
            done += 1
            if done >= 8 and time.perf_counter() - t2 > budget:
                break
        t3 = time.perf_counter()
        pf.append(t1 - t0)
        dec.append((t3 - t2) / done)
        n_dec.append(done)
    reset()
    check = prefill(ids[:CHECK_TOKENS])
    return {"cold_prefill_s": pf[0], "prefill_tok_s": [len(used) / t for t in (pf[1:] or pf)],
            "decode_tok_s": [1 / t for t in dec], "prompt_used": len(used), "gen_used": min(n_dec),
            "first_logits": check}


def child_petit(spec: dict) -> dict:
    import numpy as np
    import petit
    from petit import native
    native.configure(threads=spec["threads"])
    base = proc_status()
    n_ctx = spec["prompt"] + spec["gen"] + 1
    sampler = RssSampler()
    t0 = time.perf_counter()
    # the random model has no tokenizer.json (token ids are drawn directly): a folder loads without one when asked
    model = petit.load(spec["path"], weights=spec.get("weights"),
                       tokenizer=False if os.path.isdir(spec["path"]) else None, repack=spec.get("repack"))
    cache = model.new_cache(n_ctx)
    load_s = time.perf_counter() - t0
    at_load = proc_status()
    split = sampler.stop()
    from math import prod
    quant_bytes = sum(native.row_bytes(dtype, shape[-1]) * prod(shape[:-1]) for dtype, shape, _ in model.tensors.values())
    largest_f32 = max(int(np.prod(shape)) * 4 for _, shape, _ in model.tensors.values())

    def reset():
        cache.rewind(0)

    r = run_passes(lambda ids: model.forward(ids, cache), lambda tok: model.forward([tok], cache),
                   lambda lg: int(np.argmax(lg)), reset, prompt_ids(spec["prompt"]), spec["gen"], spec["reps"],
                   spec["budget"], False)
    return dict(r, load_s=load_s, base=base, at_load=at_load, load_split=split, quant_bytes=quant_bytes,
                largest_f32=largest_f32, kv_bytes=cache.nbytes, engine_info=dict(native.info()),
                weight_type=model.weight_type)


def child_llama(spec: dict) -> dict:
    import numpy as np
    import llama_cpp
    base = proc_status()
    n_ctx = max(640, spec["prompt"] + spec["gen"] + 8)
    sampler = RssSampler()
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(spec["path"], n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=spec["threads"],
                          n_threads_batch=spec["threads"], logits_all=False, flash_attn=spec["flash_attn"],
                          verbose=False)
    load_s = time.perf_counter() - t0
    at_load = proc_status()
    split = sampler.stop()
    n_vocab, ctx = llm.n_vocab(), llm.ctx

    def logits():
        ptr = llama_cpp.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(n_vocab,))

    def prefill(ids):
        llm.eval(ids)
        return logits()

    def step(tok):
        llm.eval([tok])
        return logits()

    r = run_passes(prefill, step, lambda lg: int(np.argmax(lg)), llm.reset, prompt_ids(spec["prompt"]),
                   spec["gen"], spec["reps"], spec["budget"], False)
    r["first_logits"] = np.array(r["first_logits"])      # a copy: the buffer is reused
    return dict(r, load_s=load_s, base=base, at_load=at_load, load_split=split,
                engine_info={"llama_cpp": llama_cpp.__version__, "flash_attn": spec["flash_attn"],
                             "system": llama_cpp.llama_print_system_info().decode(errors="replace")})


def child_torch(spec: dict) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, DynamicCache
    torch.set_num_threads(spec["threads"])
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[spec["weights"]]
    base = proc_status()
    sampler = RssSampler()
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(spec["path"], dtype=dtype).eval()
    load_s = time.perf_counter() - t0
    at_load = proc_status()
    split = sampler.stop()
    state = {}

    def reset():
        state["cache"] = DynamicCache()

    def run(ids):
        out = model(input_ids=torch.tensor([ids]), past_key_values=state["cache"], use_cache=True, logits_to_keep=1)
        state["cache"] = out.past_key_values
        return out.logits[0, -1]

    with torch.inference_mode():
        r = run_passes(run, lambda tok: run([tok]), lambda lg: int(lg.argmax()), reset,
                       prompt_ids(spec["prompt"]), spec["gen"], spec["reps"], spec["budget"], True)
    r["first_logits"] = r["first_logits"].float().numpy()
    return dict(r, load_s=load_s, base=base, at_load=at_load, load_split=split,
                engine_info={"torch": torch.__version__, "transformers": transformers.__version__,
                             "threads": torch.get_num_threads(), "attn": model.config._attn_implementation})


def child_main(spec: dict) -> None:
    import numpy as np
    fn = {"petit": child_petit, "llama.cpp": child_llama, "transformers": child_torch}[spec["engine"]]
    r = fn(spec)
    r["peak"] = proc_status()["VmHWM"]
    np.save(spec["logits_out"], np.asarray(r.pop("first_logits"), np.float32))
    print("RESULT " + json.dumps(r), flush=True)


# ------------------------------------------------------------------------------------------------ building models

def build_hf(out_dir: str) -> None:
    """Child: a random-weight Qwen2.5-0.5B-shaped model saved as bf16 safetensors in out_dir."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(**QWEN25_05B)
    model = Qwen2ForCausalLM(cfg)                     # fp32, normal(0, 0.02) init; q/k/v biases are zero
    with torch.no_grad():                             # give the biases values too (they are real in the checkpoint)
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0.0, 0.02)
    model = model.to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.save_pretrained(out_dir, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    print(f"  saved {n:,} parameters (tied embedding counted once) to {out_dir}", flush=True)


def read_safetensors(path: str) -> dict:
    """name -> (dtype, shape, memmap'd bytes) of a safetensors file (a reader independent of petit's)."""
    import numpy as np
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    data = np.memmap(path, np.uint8, "r", offset=8 + n)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def build_gguf_bf16(hf_dir: str, vocab_gguf: str, out: str) -> None:
    """Child: the HF folder's bf16 tensors as a llama.cpp qwen2 GGUF (bf16 matrices, f32 norms and biases)."""
    import numpy as np
    import gguf
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    tensors = read_safetensors(os.path.join(hf_dir, "model.safetensors"))
    vocab = gguf.GGUFReader(vocab_gguf)
    w = gguf.GGUFWriter(out, "qwen2")
    w.add_name("random Qwen2.5-0.5B-shaped (petit bench)")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    # transformers 5 saves the base under rope_parameters, 4.x at the top level
    w.add_rope_freq_base(cfg["rope_theta"] if "rope_theta" in cfg else cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    f = vocab.fields
    tokens = list(f["tokenizer.ggml.tokens"].contents())
    types = list(f["tokenizer.ggml.token_type"].contents())
    if len(tokens) != cfg["vocab_size"]:
        raise ValueError(f"{vocab_gguf}: {len(tokens)} tokens, the model has {cfg['vocab_size']}")
    w.add_tokenizer_model(f["tokenizer.ggml.model"].contents())
    w.add_tokenizer_pre(f["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(list(f["tokenizer.ggml.merges"].contents()))
    w.add_bos_token_id(int(f["tokenizer.ggml.bos_token_id"].contents()))
    w.add_eos_token_id(int(f["tokenizer.ggml.eos_token_id"].contents()))
    w.add_pad_token_id(int(f["tokenizer.ggml.padding_token_id"].contents()))
    w.add_add_bos_token(False)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
                 "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
                 "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    for i in range(cfg["num_hidden_layers"]):
        names.update({f"model.layers.{i}.{k}": f"blk.{i}.{v}" for k, v in per_layer.items()})
    missing = sorted(set(tensors) - set(names))
    if missing:
        raise ValueError(f"unmapped checkpoint tensors: {missing[:5]}")
    for name, (dtype, shape, raw) in tensors.items():
        if dtype != "BF16":
            raise ValueError(f"{name}: expected BF16, found {dtype}")
        bits = raw.view(np.uint16).reshape(shape)
        if len(shape) == 1:               # norms and biases: f32, as convert_hf_to_gguf.py writes them
            w.add_tensor(names[name], (bits.astype(np.uint32) << 16).view(np.float32))
        else:
            w.add_tensor(names[name], np.ascontiguousarray(bits), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize_gguf(src: str, out: str, ftype: str, pure: bool, threads: int) -> None:
    """Child: llama.cpp's own quantizer (llama_model_quantize) from the bf16 GGUF."""
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
               "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "q6_k": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K}[ftype]
    p.nthread = threads
    p.pure = pure
    rc = llama_cpp.llama_model_quantize(src.encode(), out.encode(), p)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> {out}, {ftype}) returned {rc}")


def task_main(task: dict) -> None:
    kind = task["task"]
    if kind == "build_hf":
        build_hf(task["out"])
    elif kind == "gguf_bf16":
        build_gguf_bf16(task["hf"], task["vocab"], task["out"])
    elif kind == "quantize":
        quantize_gguf(task["src"], task["out"], task["ftype"], task["pure"], task["threads"])
    elif kind == "petit_convert":
        from petit.loading.convert import convert
        convert(task["hf"], task["out"], task["weights"], tokenizer=False)
    else:
        raise ValueError(kind)


# ------------------------------------------------------------------------------------------------ parent

def run_task(task: dict, what: str, env=None) -> float:
    """Run a build step in a child process; returns its seconds. Raises RuntimeError with the child's stderr tail."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--task", json.dumps(task)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.stdout.strip():
        print(p.stdout.rstrip(), flush=True)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed: " + " | ".join(p.stderr.strip().splitlines()[-3:]))
    return time.perf_counter() - t0


def build_once(path: str, task: dict, what: str, rebuild: bool) -> None:
    """Build `path` (a file or folder) through a temporary name, unless it exists."""
    if os.path.exists(path) and not rebuild:
        print(f"  {what}: cached {path}", flush=True)
        return
    tmp = path + ".tmp"
    subprocess.run(["rm", "-rf", tmp], check=True)
    s = run_task(dict(task, out=tmp), what)
    subprocess.run(["rm", "-rf", path], check=True)
    os.rename(tmp, path)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs) \
        if os.path.isdir(path) else os.path.getsize(path)
    print(f"  {what}: built {path} ({size / MB:.0f} MiB) in {s:.1f} s", flush=True)


def find_vocab_gguf(work: str) -> str | None:
    """ggml-vocab-qwen2.gguf from $LLAMA_VOCAB_QWEN2 or the work folder, if there."""
    for c in (os.environ.get("LLAMA_VOCAB_QWEN2", ""), os.path.join(work, "ggml-vocab-qwen2.gguf")):
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    return None


def extract_vocab_gguf(work: str) -> str | None:
    """Fetch llama-cpp-python's sdist with pip (no build) and take models/ggml-vocab-qwen2.gguf out of it."""
    import tarfile
    dest = os.path.join(work, "ggml-vocab-qwen2.gguf")
    if os.path.isfile(dest):
        return dest
    import llama_cpp
    dl = os.path.join(work, "sdist")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={llama_cpp.__version__}", "-d", dl], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for name in os.listdir(dl):
        if name.endswith(".tar.gz"):
            with tarfile.open(os.path.join(dl, name)) as t:
                for m in t.getmembers():
                    if m.name.endswith("vendor/llama.cpp/models/ggml-vocab-qwen2.gguf"):
                        with open(dest + ".tmp", "wb") as f:
                            f.write(t.extractfile(m).read())
                        os.rename(dest + ".tmp", dest)
                        return dest
    return None


def run_child(spec: dict, timeout: float = 900) -> dict:
    env = dict(os.environ, PETIT_THREADS=str(spec["threads"]), OMP_NUM_THREADS=str(spec["threads"]),
               MKL_NUM_THREADS=str(spec["threads"]))
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


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(v, spec=".1f", width=9):
    return f"{'-' if v is None else format(v, spec):>{width}}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(ENGINES), help=f"comma-separated engines (default {','.join(ENGINES)})")
    ap.add_argument("--threads", type=int, default=2, help="threads for every engine (default 2)")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens to prefill (default 512)")
    ap.add_argument("--gen", type=int, default=128, help="greedy tokens to decode after the prompt (default 128)")
    ap.add_argument("--rounds", type=int, default=2, help="child processes per row, interleaved (default 2)")
    ap.add_argument("--reps", type=int, default=1, help="warm prefill+decode passes per child after the cold one "
                                                         "(default 1)")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds a decode may run before it stops early; a "
                                                               "transformers prompt projected over half of it is cut (default 30)")
    ap.add_argument("--work", default="/tmp/petit-bench-hf", help="where the models are built and cached")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached .petit and GGUF files (not the HF model)")
    ap.add_argument("--torch-fp32", action="store_true", help="also run transformers in fp32 (done anyway when bf16 "
                                                              "is pathologically slow)")
    ap.add_argument("--flash-attn", action="store_true", help="llama.cpp with flash attention")
    ap.add_argument("--no-repack-rows", action="store_true",
                    help="also run the .petit files with their matrices as stored (petit.load(repack=False))")
    a = ap.parse_args()
    only = a.only.split(",")
    for e in only:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r} (choose from {', '.join(ENGINES)})")
    if a.threads < 1 or a.prompt < 1 or a.gen < 1 or a.rounds < 1 or a.reps < 0:
        ap.error("--threads, --prompt, --gen and --rounds must be positive, --reps non-negative")
    if a.prompt + a.gen + 1 > QWEN25_05B["max_position_embeddings"]:
        ap.error("--prompt + --gen exceed the model's context")

    t_start = time.perf_counter()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    hf = os.path.join(work, "hf")
    have = {m: importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "llama_cpp", "gguf")}
    print(f"Work folder {work}; threads {a.threads}; prompt {a.prompt} tokens, then {a.gen} greedy tokens; "
          f"{a.rounds} round(s) x (1 cold + {a.reps} warm) passes", flush=True)
    print(f"Load average (1/5/15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    print("Building (cached) ...", flush=True)
    if not os.path.isdir(hf):
        if not (have["torch"] and have["transformers"]):
            sys.exit(f"building {hf} needs torch and transformers (pip install torch transformers)")
    build_once(hf, {"task": "build_hf"}, "HF model (transformers, bf16 safetensors)", False)

    rows = []            # (label, engine, group, spec or None, note)
    notes = {}
    if "petit" in only:
        for q in ("q8_0", "q4_0"):
            rows.append((f"Petit {q} (HF folder)", "petit", q, {"path": hf, "weights": q}))
        for q in ("q8_0", "q4_0"):
            path = os.path.join(work, f"petit-{q}.petit")
            try:
                build_once(path, {"task": "petit_convert", "hf": hf, "weights": q}, f"petit convert --{q[:2]}",
                           a.rebuild)
                rows.append((f"Petit {q} (.petit)", "petit", q, {"path": path}))
                if a.no_repack_rows:
                    rows.append((f"Petit {q} (.petit, no repack)", "petit", q, {"path": path, "repack": False}))
            except RuntimeError as e:
                rows.append((f"Petit {q} (.petit)", "petit", q, None))
                notes[f"Petit {q} (.petit)"] = str(e)
    llama_rows = [("llama.cpp q8_0", "q8_0", "gguf-q8_0.gguf", "q8_0", False),
                  ("llama.cpp q4_0 pure", "q4_0", "gguf-q4_0-pure.gguf", "q4_0", True),
                  ("llama.cpp q4_0 default mix", "q4_0 mix", "gguf-q4_0.gguf", "q4_0", False),
                  ("llama.cpp Q4_K_M", "q4_k_m", "gguf-q4_k_m.gguf", "q4_k_m", False),
                  ("llama.cpp Q6_K", "q6_k", "gguf-q6_k.gguf", "q6_k", False)]
    if "llama.cpp" in only:
        why = None
        if not have["llama_cpp"]:
            why = "not installed (pip install llama-cpp-python)"
        elif not have["gguf"]:
            why = "gguf not installed (pip install gguf), cannot convert"
        else:
            try:
                vocab = find_vocab_gguf(work) or extract_vocab_gguf(work)
                if vocab is None:
                    raise RuntimeError("ggml-vocab-qwen2.gguf not found (set LLAMA_VOCAB_QWEN2)")
                bf16 = os.path.join(work, "gguf-bf16.gguf")
                build_once(bf16, {"task": "gguf_bf16", "hf": hf, "vocab": vocab}, "GGUF bf16 (gguf.GGUFWriter)",
                           a.rebuild)
                for label, group, name, ftype, pure in llama_rows:
                    build_once(os.path.join(work, name), {"task": "quantize", "src": bf16, "ftype": ftype,
                                                          "pure": pure, "threads": a.threads},
                               f"llama_model_quantize {ftype}{' --pure' if pure else ''}", a.rebuild)
            except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                why = f"conversion failed: {e}"
        for label, group, name, ftype, pure in llama_rows:
            rows.append((label, "llama.cpp", group, None if why else {"path": os.path.join(work, name)}))
            if why:
                notes[label] = why
        if "petit" in only and not why:        # Petit reading llama.cpp's own files (issue 15's benchmark)
            for q, name in (("q8_0", "gguf-q8_0.gguf"), ("q4_0", "gguf-q4_0-pure.gguf"), ("q4_k_m", "gguf-q4_k_m.gguf"),
                            ("q6_k", "gguf-q6_k.gguf")):
                rows.append((f"Petit {q} (llama.cpp's GGUF)", "petit", q, {"path": os.path.join(work, name)}))
    torch_rows = [("transformers bf16", "bf16")] + ([("transformers fp32", "fp32")] if a.torch_fp32 else [])
    if "transformers" in only:
        why = None if have["torch"] and have["transformers"] else "not installed (pip install torch transformers)"
        for label, dt in torch_rows:
            rows.append((label, "transformers", dt, None if why else {"path": hf, "weights": dt}))
            if why:
                notes[label] = why
    print(f"  built in {time.perf_counter() - t_start:.0f} s", flush=True)

    results = {r[0]: [] for r in rows}
    errors = {}
    common = {"threads": a.threads, "prompt": a.prompt, "gen": a.gen, "reps": a.reps, "flash_attn": a.flash_attn,
              "budget": a.budget}
    for rnd in range(a.rounds):
        runnable = [r for r in rows if r[3] is not None and r[0] not in errors]
        order = runnable[rnd % len(runnable):] + runnable[:rnd % len(runnable)] if runnable else []
        print(f"\nRound {rnd + 1}/{a.rounds}:", flush=True)
        while order:
            label, engine, group, spec = order.pop(0)
            logits_out = os.path.join(work, f"logits-{label.replace(' ', '_').replace('/', '')}.npy")
            r = run_child(dict(common, **spec, engine=engine, logits_out=logits_out))
            if "error" in r:
                errors[label] = r["error"]
                print(f"  {label:<28} FAILED: {r['error']}", flush=True)
                continue
            r["logits_out"] = logits_out
            results[label].append(r)
            cut = r["prompt_used"] < a.prompt or r["gen_used"] < a.gen
            print(f"  {label:<28} load {r['load_s']:6.2f} s  peak {r['peak'] / MB:6.0f} MiB  prefill "
                  f"{med(r['prefill_tok_s']):7.1f} tok/s  decode {med(r['decode_tok_s']):6.1f} tok/s"
                  + (f"  (cut to a {r['prompt_used']}-token prompt, {r['gen_used']} tokens)" if cut else ""),
                  flush=True)
            if label == "transformers bf16" and "transformers fp32" not in results and \
                    (cut or med(r["decode_tok_s"]) < 2):
                print("  transformers bf16 is pathologically slow here: adding transformers fp32", flush=True)
                fp32 = ("transformers fp32", "transformers", "fp32", {"path": hf, "weights": "fp32"})
                rows.append(fp32)
                results["transformers fp32"] = []
                order.append(fp32)

    # ---- summarise
    import numpy as np
    summary = {}
    for label, engine, group, spec in rows:
        rs = results.get(label) or []
        if not rs:
            continue
        summary[label] = {
            "load": med([r["load_s"] for r in rs]), "peak": med([r["peak"] for r in rs]) / MB,
            "load_peak": med([r["at_load"]["VmHWM"] for r in rs]) / MB,
            "cold": med([r["cold_prefill_s"] for r in rs]),
            "prefill": med([med(r["prefill_tok_s"]) for r in rs]),
            "decode": med([med(r["decode_tok_s"]) for r in rs]),
            "decode_range": (min(x for r in rs for x in r["decode_tok_s"]),
                             max(x for r in rs for x in r["decode_tok_s"])),
            "cut": min(r["prompt_used"] for r in rs) < a.prompt or min(r["gen_used"] for r in rs) < a.gen,
            "runs": rs,
        }
    ref_label = next((x for x in ("transformers fp32", "transformers bf16") if x in summary), None)
    ref = np.load(summary[ref_label]["runs"][0]["logits_out"]) if ref_label else None
    for label, s in summary.items():
        lg = np.load(s["runs"][0]["logits_out"])
        s["r"] = float(np.corrcoef(lg, ref)[0, 1]) if ref is not None else None

    peer_of = {"q8_0": "llama.cpp q8_0", "q4_0": "llama.cpp q4_0 pure", "q4_k_m": "llama.cpp Q4_K_M",
               "q6_k": "llama.cpp Q6_K"}
    head = (f"{'engine / config':<28}{'load s':>8}{'peak MB':>9}{'load MB':>9}{'cold pf s':>10}{'prefill':>9}"
            f"{'decode':>8}{'pf/llama':>9}{'dec/llama':>10}{'pf/torch':>9}{'dec/torch':>10}{'logit r':>9}")
    print(f"\nQwen2.5-0.5B shape, random bf16 weights; {a.threads} threads; prefill = tok/s of a {a.prompt}-token "
          f"prompt, decode = tok/s of {a.gen} greedy tokens after it;\nmedians of {a.rounds} child process(es) per "
          f"row; MB = MiB of VmHWM (load MB: right after the load call); ratios = Petit / peer (above 1: Petit "
          f"faster);\nlogit r = correlation of the last-position logits of a {CHECK_TOKENS}-token prompt with "
          f"{ref_label or 'transformers (not run)'}\n")
    print(head + "\n" + "-" * len(head))
    for label, engine, group, spec in rows:
        if label not in summary:
            why = notes.get(label) or errors.get(label) or "not run"
            print(f"{label:<28}{why}")
            continue
        s = summary[label]
        ratios = ""
        if engine == "petit":
            for peer in (peer_of[group], "transformers bf16"):
                p = summary.get(peer)
                ratios += (fmt(s["prefill"] / p["prefill"], ".2f", 9) + fmt(s["decode"] / p["decode"], ".2f", 10)) \
                    if p else fmt(None, "", 9) + fmt(None, "", 10)
        else:
            ratios = fmt(None, "", 9) + fmt(None, "", 10) + fmt(None, "", 9) + fmt(None, "", 10)
        print(f"{label + (' *' if s['cut'] else ''):<28}{fmt(s['load'], '.2f', 8)}{fmt(s['peak'], '.0f')}"
              f"{fmt(s['load_peak'], '.0f')}{fmt(s['cold'], '.2f', 10)}{fmt(s['prefill'], '.1f')}"
              f"{fmt(s['decode'], '.1f', 8)}{ratios}{fmt(s['r'], '.4f')}")
    for label, s in summary.items():
        if s["cut"]:
            pu, gu = sorted({r["prompt_used"] for r in s["runs"]}), sorted({r["gen_used"] for r in s["runs"]})
            print(f"* {label}: cut to fit --budget {a.budget:.0f} s: prompt of {'/'.join(map(str, pu))} tokens, "
                  f"decode of {'/'.join(map(str, gu))} tokens (per child){', cold pass only' if a.prompt not in pu else ''}")
    print("\nDetails:")
    for label, s in summary.items():
        r0 = s["runs"][0]
        lo, hi = s["decode_range"]
        line = f"  {label}: decode min-max {lo:.1f}-{hi:.1f} tok/s; RSS after imports {r0['base']['VmRSS'] / MB:.0f} MiB"
        if "quant_bytes" in r0:
            split = r0["load_split"]
            bound = (r0["quant_bytes"] + r0["largest_f32"]) / MB
            line += (f"; weights {r0['quant_bytes'] / MB:.0f} MiB ({r0['weight_type']}), KV cache "
                     f"{r0['kv_bytes'] / MB:.0f} MiB")
            if spec_is_folder(label):
                line += (f"\n    load peak {s['load_peak']:.0f} MiB vs quantized + largest fp32 tensor = "
                         f"{r0['quant_bytes'] / MB:.0f} + {r0['largest_f32'] / MB:.0f} = {bound:.0f} MiB "
                         f"({s['load_peak'] - bound:+.0f} MiB; the interpreter and imports are "
                         f"{r0['base']['VmRSS'] / MB:.0f}); at the sampled peak RSS {split['sampled_peak'] / MB:.0f} "
                         f"MiB: anonymous {split['anon_at_peak'] / MB:.0f} MiB, file-backed (mmap'd safetensors) "
                         f"{split['file_at_peak'] / MB:.0f} MiB")
            else:
                line += (f"; after load: anonymous {r0['at_load']['RssAnon'] / MB:.0f} MiB, file-backed "
                         f"{r0['at_load']['RssFile'] / MB:.0f} MiB")
        print(line)
        if engine_of(rows, label) == "petit" and label.startswith("Petit"):
            for peer in ("transformers fp32",):
                if peer in summary:
                    print(f"    vs {peer}: prefill {s['prefill'] / summary[peer]['prefill']:.2f}x, decode "
                          f"{s['decode'] / summary[peer]['decode']:.2f}x")
        if label in ("Petit q8_0 (HF folder)", "llama.cpp q8_0", "transformers bf16"):
            print(f"    engine: {r0['engine_info']}")
    for label, why in {**notes, **errors}.items():
        print(f"  {label}: {why}")
    print(f"\nTotal time {time.perf_counter() - t_start:.0f} s; load average now "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}.")


def engine_of(rows, label):
    return next((r[1] for r in rows if r[0] == label), None)


def spec_is_folder(label: str) -> bool:
    return "(HF folder)" in label


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_main(json.loads(sys.argv[2]))
    elif sys.argv[1:2] == ["--task"]:
        task_main(json.loads(sys.argv[2]))
    else:
        main()
