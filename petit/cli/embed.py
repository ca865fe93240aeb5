"""`petit embed MODEL TEXT... [--query | --prompt-name NAME] [--json]`: the embeddings of texts by an embedding
model's Hugging Face folder (sentence-transformers' pooling, normalization and prompts, petit/generation/embed.py).
Without --json: one line a text, its vector's values separated by spaces; with --json: {"model", "dimension",
"prompt", "tokens", "embeddings"}. Texts may also come on stdin, one a line (TEXT `-`)."""
import sys

from petit.cli.argtypes import UsageError, weight_type
from petit.cli.options import WEIGHT_CHOICES


def add_embed_parser(sub) -> None:
    p = sub.add_parser("embed", help="embed texts with an embedding model (a sentence-transformers folder or a GGUF "
                                     "file with a pooling key)",
                       description="Print the embeddings of TEXT... by MODEL, a Hugging Face folder saved by "
                                   "sentence-transformers (BERT: bge, e5, MiniLM; Qwen3-Embedding) or llama.cpp's "
                                   "GGUF file of one (bert, nomic-bert, qwen3 with a pooling key).")
    p.add_argument("model", help="the embedding model's folder or GGUF file")
    p.add_argument("texts", nargs="+", metavar="TEXT", help="texts to embed; - reads them from stdin, one a line")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--query", action="store_true",
                   help="embed the texts as search queries (the folder's 'query' prompt before each)")
    g.add_argument("--prompt-name", metavar="NAME", help="put the folder's prompt NAME before each text")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--weights", type=weight_type, choices=WEIGHT_CHOICES,
                   help="convert the weights at load (default: q8_0, as petit.load)")
    p.set_defaults(func=cmd_embed)


def _texts(args) -> list[str]:
    out = []
    for t in args.texts:
        out.extend(line.rstrip("\n") for line in sys.stdin if line.strip()) if t == "-" else out.append(t)
    if not out:
        raise UsageError("no text to embed")
    return out


def cmd_embed(args) -> int:
    import json

    from petit.generation.embed import Embedder
    texts = _texts(args)
    emb = Embedder.open(args.model, weights=args.weights)
    name = "query" if args.query else args.prompt_name
    vectors = emb.embed(texts, prompt_name=name)
    if args.json:
        print(json.dumps({"model": args.model, "dimension": int(vectors.shape[1]), "prompt": emb.prompt(name),
                          "tokens": emb.count_tokens(texts, prompt_name=name),
                          "embeddings": [[float(x) for x in v] for v in vectors]}))
    else:
        for v in vectors:
            print(" ".join(f"{float(x):.7g}" for x in v))
    return 0
