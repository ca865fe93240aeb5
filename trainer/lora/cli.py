"""`petit finetune MODEL --data FILE.jsonl -o OUT.lora`: LoRA adapters on a frozen base (issue 33, first slice);
`--check` runs the gradient check on MODEL instead (PASS: exit 0, FAIL: exit 1)."""
from __future__ import annotations

import sys

from petit.cli.argtypes import UsageError, weight_type
from trainer.lora import TARGETS


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        v = 0
    if v < 1:
        raise UsageError(f"expected a positive integer, got {s!r}")
    return v


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        v = 0.0
    if not v > 0 or v == float("inf"):
        raise UsageError(f"expected a positive number, got {s!r}")
    return v


def add_finetune_parser(sub) -> None:
    p = sub.add_parser("finetune", help="train LoRA adapters on a model, the base frozen (GGUF adapter out)",
                       description="Fine-tune MODEL (a llama, mistral, qwen2 or qwen3 model: HF folder, GGUF or "
                                   ".petit, its weights kept as loaded) with LoRA adapters on --data, a JSONL file of "
                                   "chats {\"messages\": [...]} (loss on the assistant turns only) or texts, or plain "
                                   "text lines. Writes a GGUF LoRA adapter that `petit run/chat --lora` and "
                                   "llama.cpp load.")
    p.add_argument("model", metavar="MODEL", help="the base model")
    p.add_argument("--data", metavar="FILE", help="the training data (.jsonl or text lines)")
    p.add_argument("-o", "--output", metavar="OUT", help="the adapter file to write (GGUF)")
    p.add_argument("--rank", default="8", help="adapter rank (default 8)")
    p.add_argument("--alpha", default="16", help="LoRA alpha: the adapters' product is scaled by alpha / rank "
                                                 "(default 16)")
    p.add_argument("--targets", default=",".join(TARGETS),
                   help=f"the matrices adapted, comma-separated (default {','.join(TARGETS)})")
    p.add_argument("--epochs", default="1", help="passes over the training examples (default 1)")
    p.add_argument("--batch", default="1", help="examples a step, their gradients summed (default 1)")
    p.add_argument("--lr", default="2e-4", help="peak learning rate of AdamW (default 2e-4)")
    p.add_argument("--ctx", default="512", help="the most tokens of an example trained on (default 512)")
    p.add_argument("--seed", default="0", help="the seed of the adapters' init, the split and the order")
    p.add_argument("--held-out", default="0.1", help="the share of examples held out and scored each epoch")
    p.add_argument("--weights", type=weight_type, choices=("f32", "f16", "bf16", "q8_0", "q4_0"),
                   help="convert the base's weights at load (default: as stored, a folder to q8_0)")
    p.add_argument("--checkpoint", metavar="DIR", help="save the run to DIR every 50 steps, after every epoch and when "
                                                        "stopped (Ctrl+C), so that --resume can continue it")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint DIR (the same "
                                                         "model, data and settings; --epochs may be more)")
    p.add_argument("--check", action="store_true", help="check every LoRA gradient against float64 finite "
                                                        "differences on MODEL (a tiny one) and exit")
    p.set_defaults(func=run_finetune)


def run_finetune(args) -> int:
    import petit
    from trainer.lora.train import FinetuneConfig, finetune

    if not args.check and (not args.data or not args.output):
        raise UsageError("--data FILE and -o OUT are needed (or --check)")
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint DIR, the run to continue")
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    bad = [t for t in targets if t not in TARGETS]
    if bad or not targets:
        raise UsageError(f"--targets takes some of {','.join(TARGETS)}, got {args.targets!r}")
    try:
        seed = int(args.seed)
        held = float(args.held_out)
    except ValueError:
        raise UsageError("--seed takes an integer and --held-out a number") from None
    if not 0 <= held < 1:
        raise UsageError(f"--held-out must be in [0, 1), got {args.held_out}")
    cfg = FinetuneConfig(rank=_positive_int(args.rank), alpha=_positive_float(args.alpha), targets=targets,
                         epochs=_positive_int(args.epochs), lr=_positive_float(args.lr), ctx=_positive_int(args.ctx),
                         seed=seed, val_fraction=held, batch=_positive_int(args.batch))
    if cfg.ctx < 2:
        raise UsageError("--ctx must be at least 2")
    model = petit.load(args.model, weights=args.weights)
    if args.check:
        from trainer.lora.gradcheck import run_check
        return 0 if run_check(model) else 1
    from trainer.lora.base import check_supported
    check_supported(model)
    result = finetune(model, args.data, args.output, cfg, out=sys.stdout, checkpoint=args.checkpoint,
                      resume=args.resume)
    return 130 if result["interrupted"] else 0
