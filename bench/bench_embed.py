#!/usr/bin/env python3
"""Embedding throughput (issue 35): Petit against sentence-transformers (torch, CPU) and llama.cpp's embedding mode.

Method. A random-weight BERT of bge-small-en-v1.5's shape (hidden 384, 12 layers, 12 heads, intermediate 1536,
vocab 30522; --shape base: bge-base's 768 / 12 / 12 / 3072) is saved by sentence-transformers (mean pooling +
Normalize) into --work, and converted there by llama.cpp's convert_hf_to_gguf.py (--llama-cpp, run in a child
process with its gguf-py) to GGUF files at f32 and q8_0 (the folder's mean pooling kept as `bert.pooling_type` 1,
checked with gguf-py; the random vocabulary's hash is unknown to the converter, so its tokenizer.ggml.pre is
"default", which llama.cpp's WordPiece tokenizer does not read: the ids below are given, not tokenized).
--batch texts of exactly --tokens tokens each (random word-piece ids, [CLS] ... [SEP]) are embedded --rounds times
by each engine, on the same token ids: Petit's `Embedder.embed_ids` (the folder at f32 and q8_0, and the q8_0 GGUF
file), sentence-transformers' forward on the padded batch of equal lengths (no padding), llama-cpp-python's
`llama_decode` of one batch holding every text as its own sequence (as `Llama.embed` fills it, from ids) with mean
pooling, then `llama_get_embeddings_seq`. torch and llama.cpp run Petit's thread count. The table gives the best
round's texts / s of each, its ratios to torch and llama.cpp (f32 and q8_0), and the minimum over the texts of the
cosine to sentence-transformers' vector. All in one process. --llama-group N gives llama.cpp N texts a
llama_decode (its attention spans a decode's tokens: 32 x 128 in one costs it more than 32 of 128).
Dev-only: needs /tmp/tf5's torch, transformers and llama-cpp-python, and sentence-transformers (6.3, not in
/tmp/tf5: installed beside it with `pip install --no-deps --target /tmp/st_helper sentence-transformers
scikit-learn joblib threadpoolctl cloudpickle narwhals`); run it with that python, petit and /tmp/st_helper on
PYTHONPATH.

Usage: PYTHONPATH=.:/tmp/st_helper /tmp/tf5/bin/python bench/bench_embed.py [--batch 32] [--tokens 128] [--rounds 3]
       [--llama-group 0]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"small": (384, 12, 12, 1536), "base": (768, 12, 12, 3072)}
LLAMA_CPP = "/tmp/lcpp/llama_cpp_python-0.3.36/vendor/llama.cpp"


def make(folder: str, shape: str) -> None:
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    D, L, H, F = SHAPES[shape]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(30517)]
    tok = Tokenizer(models.WordPiece({p: i for i, p in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", sep_token="[SEP]",
                                                pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                                                model_max_length=512)
    tmp = folder + ".hf"
    fast.save_pretrained(tmp)
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=D, num_hidden_layers=L, num_attention_heads=H,
                                  intermediate_size=F)
    transformers.BertModel(cfg).save_pretrained(tmp)
    SentenceTransformer(modules=[Transformer(tmp), Pooling(D, pooling_mode="mean"), Normalize()],
                        device="cpu").save(folder)


def child_convert(llama_cpp_dir: str, folder: str, out: str, outtype: str) -> None:
    """Run llama.cpp's convert_hf_to_gguf.py in this (child) process, the random WordPiece vocabulary's unknown
    hash answered with tokenizer.ggml.pre "default" (as tests/fixtures/gguf5_gemb35 does)."""
    import runpy
    sys.path[:0] = [llama_cpp_dir, os.path.join(llama_cpp_dir, "gguf-py")]
    import conversion.base as cb
    orig = cb.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return orig(self, tokenizer)
        except NotImplementedError:
            tj = json.loads((self.dir_model / "tokenizer.json").read_text(encoding="utf-8"))
            if tj["model"]["type"] != "WordPiece":
                raise
            return "default"

    cb.TextModel.get_vocab_base_pre = get_vocab_base_pre
    script = os.path.join(llama_cpp_dir, "convert_hf_to_gguf.py")
    sys.argv = [script, folder, "--outfile", out, "--outtype", outtype]
    runpy.run_path(script, run_name="__main__")


def gguf_file(folder: str, outtype: str, llama_cpp_dir: str) -> str:
    """The folder's GGUF file at `outtype` (f32 / q8_0), converted once and kept beside it; its pooling checked."""
    path = f"{folder}-{outtype}.gguf"
    if not os.path.isfile(path):
        tmp = path + ".part"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(llama_cpp_dir, "gguf-py"), os.environ.get("PYTHONPATH", "")]))
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-convert", llama_cpp_dir, folder, tmp,
                            outtype], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise SystemExit(f"convert_hf_to_gguf.py {outtype} failed:\n{p.stdout[-3000:]}")
        os.replace(tmp, path)
    sys.path.insert(0, os.path.join(llama_cpp_dir, "gguf-py"))
    import gguf
    field = gguf.GGUFReader(path).get_field("bert.pooling_type")
    pooling = None if field is None else int(field.parts[field.data[0]][0])
    if pooling != int(gguf.PoolingType.MEAN):
        raise SystemExit(f"{path}: bert.pooling_type is {pooling}, not mean ({int(gguf.PoolingType.MEAN)})")
    return path


def llama_runner(path: str, ids: np.ndarray, threads: int, group: int):
    """A function embedding every row of `ids` with llama.cpp, `group` rows (0: all) in one llama_decode, each row
    its own sequence (Llama.embed's batch, filled with ids), mean pooled (unnormalized). llama.cpp runs a batch's
    sequences as one ubatch (an encoder needs n_ubatch >= the batch's tokens), its attention over all of the
    batch's tokens, masked to each sequence."""
    import llama_cpp
    if group < 0:
        raise SystemExit(f"--llama-group {group}: give 0 (the whole batch) or a number of texts")
    group = group or len(ids)
    n = group * ids.shape[1]
    if group > llama_cpp.llama_max_parallel_sequences():
        raise SystemExit(f"{group} texts in one llama_decode: llama.cpp runs at most "
                         f"{llama_cpp.llama_max_parallel_sequences()} sequences (set --llama-group)")
    llm = llama_cpp.Llama(path, embedding=True, n_ctx=n, n_batch=n, n_ubatch=n, n_threads=threads,
                          n_threads_batch=threads, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, verbose=False)
    seqs = [list(map(int, r)) for r in ids]
    dim = llm.n_embd()

    def run() -> np.ndarray:
        out = np.empty((len(seqs), dim), np.float32)
        for start in range(0, len(seqs), group):
            part = seqs[start:start + group]
            llm._batch.reset()
            for i, seq in enumerate(part):
                llm._batch.add_sequence(seq, i, True)
            llm._ctx.kv_cache_clear()
            llm._ctx.decode(llm._batch)
            for i in range(len(part)):
                out[start + i] = np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, i), (dim,))
        llm._batch.reset()
        return out
    return llm, run


def cpu_line() -> str:
    info = open("/proc/cpuinfo").read().splitlines()
    model = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("flags")), [])
    return f"CPU: {model}, {os.cpu_count()} CPUs; {' '.join(f for f in flags if 'avx' in f or 'amx' in f)}"


def cosine(got: np.ndarray, ref: np.ndarray) -> float:
    return float(((got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)).min())


def best(fn, rounds: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    if sys.argv[1:2] == ["--child-convert"]:
        child_convert(*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--work", default="/tmp/petit_bench_embed")
    ap.add_argument("--llama-cpp", default=LLAMA_CPP, help="llama.cpp's source folder (convert_hf_to_gguf.py)")
    ap.add_argument("--llama-group", type=int, default=0,
                    help="texts per llama_decode (0: the whole batch in one, as Llama.embed fills n_batch)")
    args = ap.parse_args()
    folder = os.path.join(args.work, f"bert-{args.shape}")
    if not os.path.isfile(os.path.join(folder, "modules.json")):
        make(folder, args.shape)
    ggufs = {w: gguf_file(folder, w, args.llama_cpp) for w in ("f32", "q8_0")}
    import torch
    from sentence_transformers import SentenceTransformer

    from petit.generation.embed import Embedder
    from petit.native import info
    threads = info()["threads"]
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    ids = np.concatenate([np.full((args.batch, 1), 2), rng.integers(5, 30522, (args.batch, args.tokens - 2)),
                          np.full((args.batch, 1), 3)], axis=1)
    st = SentenceTransformer(folder, device="cpu")
    feats = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones_like(torch.tensor(ids)),
             "token_type_ids": torch.zeros_like(torch.tensor(ids))}

    def run_st():
        with torch.inference_mode():
            return st(dict(feats))["sentence_embedding"].numpy()
    t_st, ref = best(run_st, args.rounds)
    rows = [("sentence-transformers (torch)", t_st, 1.0)]
    seqs = [list(map(int, r)) for r in ids]
    for name, path, w in (("petit f32", folder, "f32"), ("petit q8_0", folder, "q8_0"),
                          ("petit q8_0 (gguf)", ggufs["q8_0"], None)):
        emb = Embedder.open(path, weights=w)
        t, got = best(lambda e=emb: e.embed_ids(seqs), args.rounds)
        rows.append((name, t, cosine(got, ref)))
    t_ll = {}
    for w, path in ggufs.items():
        llm, run = llama_runner(path, ids, threads, args.llama_group)
        t, got = best(run, args.rounds)
        t_ll[w] = t
        rows.append((f"llama.cpp {w} (gguf)", t, cosine(got, ref)))
        llm.close()
    print(cpu_line())
    print(f"{args.batch} texts x {args.tokens} tokens, bert-{args.shape}, {threads} threads, best of {args.rounds}, "
          f"llama.cpp {args.llama_group or args.batch} texts a decode; load average {os.getloadavg()[0]:.1f}")
    print("| engine | texts / s | x torch | x llama.cpp f32 | x llama.cpp q8_0 | min cosine to torch |\n"
          "|---|---|---|---|---|---|")
    for name, t, cos in rows:
        print(f"| {name} | {args.batch / t:.1f} | {t_st / t:.2f} | {t_ll['f32'] / t:.2f} | {t_ll['q8_0'] / t:.2f} "
              f"| {cos:.6f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
