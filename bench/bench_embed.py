#!/usr/bin/env python3
"""Embedding throughput (issue 35): Petit against sentence-transformers (torch, CPU) on the same model folder.

Method. A random-weight BERT of bge-small-en-v1.5's shape (hidden 384, 12 layers, 12 heads, intermediate 1536,
vocab 30522; --shape base: bge-base's 768 / 12 / 12 / 3072) is saved by sentence-transformers (mean pooling +
Normalize) into --work; --batch texts of exactly --tokens tokens each (random word-piece ids, [CLS] ... [SEP]) are
embedded --rounds times by both, each on the same token ids (Petit's `Embedder.embed_ids`, sentence-transformers'
forward on the padded batch of equal lengths: no padding), torch with its own thread count set to Petit's. The
table gives the best round's texts / s of each, Petit at f32 and q8_0, and the cosine between the two results.
Dev-only: needs /tmp/tf5's torch, transformers and sentence-transformers (run it with that python, petit on
PYTHONPATH). llama.cpp's embedding mode (the issue's other peer) needs GGUF embedding files: not read yet.

Usage: PYTHONPATH=. /tmp/tf5/bin/python bench/bench_embed.py [--batch 32] [--tokens 128] [--rounds 3]
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"small": (384, 12, 12, 1536), "base": (768, 12, 12, 3072)}


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


def best(fn, rounds: int) -> tuple[float, object]:
    out, times = None, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--work", default="/tmp/petit_bench_embed")
    args = ap.parse_args()
    folder = os.path.join(args.work, f"bert-{args.shape}")
    if not os.path.isfile(os.path.join(folder, "modules.json")):
        make(folder, args.shape)
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
    for w in ("f32", "q8_0"):
        emb = Embedder.open(folder, weights=w)
        seqs = [list(map(int, r)) for r in ids]
        t, got = best(lambda: emb.embed_ids(seqs), args.rounds)
        cos = float(((got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)).min())
        rows.append((f"petit {w}", t, cos))
    print(f"{args.batch} texts x {args.tokens} tokens, bert-{args.shape}, {threads} threads, best of {args.rounds}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| engine | texts / s | x torch | min cosine to torch |\n|---|---|---|---|")
    for name, t, cos in rows:
        print(f"| {name} | {args.batch / t:.1f} | {t_st / t:.2f} | {cos:.6f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
