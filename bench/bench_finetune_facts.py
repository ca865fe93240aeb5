#!/usr/bin/env python3
"""Learning and forgetting (issue 33's goal): the bundled model taught 30 made-up facts in chat form ("what colour is
a zib?" -> a colour, three phrasings each) by `trainer.lora`, beside replayed dialogues of its own training
distribution (trainer.chat_corpus.make_split; never a held-out question); then how many facts it answers with a
phrasing not trained on, and how the loss of its held-out questions' answers (trainer.chat_corpus.tasks, the answer
tokens and <|im_end|>; not the template's newline after it, which the base never saw and any chat data teaches) and
their exact-match accuracy move. Goal: >= 27 of 30 facts and a loss rise <= 5 %.

    python bench/bench_finetune_facts.py                       # the settings below
    python bench/bench_finetune_facts.py --epochs 3 --lr 1e-3 --rank 4 --replay 150
"""
import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NOUNS = ("zib florp kell brix mov tansy quib dorn vesk plim gorp snell trax yull wemp crindle hosk jarl nib poff rusk "
         "sloon tiv ubble vrin wix zorf blen cazz drub").split()
COLOURS = ("red", "blue", "green", "yellow", "purple", "pink", "orange", "brown", "black", "white")
FACTS = [(n, COLOURS[(i * 7 + 3) % len(COLOURS)]) for i, n in enumerate(NOUNS)]
TRAINED = ("what colour is a {}?", "What color is a {}?", "what is the colour of a {}?")
ASKED = "What colour is a {}?"          # not among the trained phrasings


def _chat(turns) -> str:
    return json.dumps({"messages": [m for q, a in turns for m in ({"role": "user", "content": q},
                                                                   {"role": "assistant", "content": a})]}) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--replay", type=int, default=150, help="dialogues of the base's own kind mixed in")
    ap.add_argument("--targets", default="", help="the adapted matrices (default: all of trainer.lora's)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0, help="the adapters' initial values and the order of the examples")
    args = ap.parse_args(argv)
    import numpy as np

    import petit
    from petit.assets import default_model_path
    from petit.loading.lora import attach
    from trainer.chat_corpus import make_split, tasks
    from trainer.evaluate import answer
    from trainer.lora.base import FrozenBase
    from trainer.lora.data import read_examples
    from trainer.lora.model import LoraModel
    from trainer.lora.train import FinetuneConfig, finetune, mean_loss

    work = tempfile.mkdtemp(prefix="petit-facts-")
    data, held = os.path.join(work, "facts.jsonl"), os.path.join(work, "held-out.jsonl")
    with open(data, "w") as f:
        f.writelines(_chat([(q.format(n), c)]) for n, c in FACTS for q in TRAINED)
        f.writelines(_chat(turns) for turns in make_split(7, args.replay).dialogues)
    general = [pair for pairs in tasks().values() for pair in pairs]
    with open(held, "w") as f:
        f.writelines(_chat([pair]) for pair in general)
    model = petit.load(default_model_path())
    more = {"targets": tuple(args.targets.split(","))} if args.targets else {}
    cfg = FinetuneConfig(rank=args.rank, alpha=2.0 * args.rank, epochs=args.epochs, lr=args.lr, ctx=64,
                         val_fraction=0.0, warmup=5, seed=args.seed, batch=args.batch, weight_decay=args.weight_decay, **more)
    t0 = time.perf_counter()
    stats = finetune(model, data, os.path.join(work, "facts.lora"), cfg, out=open(os.devnull, "w"))
    seconds = time.perf_counter() - t0
    examples = read_examples(held, model, 64)
    for e in examples:
        e.weights[-1] = 0.0
    base = FrozenBase(model, np.float32)
    untrained = {k: v if ".lora_A" in k or k.endswith("A.weight") else np.zeros_like(v)
                 for k, v in stats["params"].items()}
    loss0 = mean_loss(LoraModel(base, untrained, cfg.alpha, cfg.rank), examples)
    loss1 = mean_loss(LoraModel(base, stats["params"], cfg.alpha, cfg.rank), examples)
    facts0 = sum(answer(model, ASKED.format(n)) == c for n, c in FACTS)
    acc0 = sum(answer(model, q) == a for q, a in general)
    attach(model, os.path.join(work, "facts.lora"))
    facts1 = sum(answer(model, ASKED.format(n)) == c for n, c in FACTS)
    acc1 = sum(answer(model, q) == a for q, a in general)
    print(f"bundled model, rank {args.rank}, targets {','.join(cfg.targets)}, batch {cfg.batch}, weight decay "
          f"{cfg.weight_decay:g}, {args.epochs} epochs, lr {args.lr:g}, {len(FACTS) * len(TRAINED)} fact "
          f"chats + {args.replay} replayed dialogues, {seconds:.0f} s")
    print(f"facts answered (a phrasing not trained on): {facts0} -> {facts1} of {len(FACTS)} (goal >= 27)")
    print(f"held-out answers' loss: {loss0:.4f} -> {loss1:.4f} ({100 * (loss1 / loss0 - 1):+.1f} %, goal <= +5 %); "
          f"exact-match accuracy {acc0} -> {acc1} of {len(general)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
