"""The ``petit train`` subcommand.

``add_train_parser(subparsers)`` registers it on any argparse subparsers object and ``run_train(args)``
runs it and returns the exit code, as every `petit` command: 0 done, 1 a runtime failure (the gradient check
failed, training diverged, a corpus or checkpoint that cannot be read, an output directory in the way), 2 bad flags
(a value out of range, flags that contradict each other or the checkpoint), 130 stopped by Ctrl+C (after saving a
checkpoint). For testing without the main CLI:

    python -m trainer.cli train --corpus FILE -o CKPT_DIR --steps 200
    python -m trainer.cli train --check
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from trainer.train import TrainConfig

_DEFAULTS = TrainConfig()
# flag dest -> TrainConfig field
_FIELDS = {"tokenizer": "tokenizer", "vocab_size": "vocab_size", "layers": "n_layers", "dim": "dim",
           "heads": "n_heads", "kv_heads": "n_kv_heads", "ffn": "ffn_dim", "context": "context",
           "steps": "steps", "batch": "batch_size", "lr": "lr", "min_lr": "min_lr", "warmup": "warmup_steps",
           "weight_decay": "weight_decay", "seed": "seed", "val_fraction": "val_fraction",
           "eval_interval": "eval_interval", "checkpoint_interval": "checkpoint_interval"}
# fields that define the model or its data; they cannot change when resuming
_FIXED_ON_RESUME = ("tokenizer", "vocab_size", "n_layers", "dim", "n_heads", "n_kv_heads", "ffn_dim", "context",
                    "seed", "val_fraction")
DEFAULT_CHAT_EXAMPLES = 20000


class _UsageError(Exception):
    """Bad flags: reported as 'petit train: error: ...' with exit code 2."""


class _Failed(Exception):
    """A runtime failure (a file that cannot be read, an output in the way, data that does not suit the model):
    reported as 'petit train: error: ...' with exit code 1."""


def add_train_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``train`` on an argparse subparsers object; the parser's default ``func`` is run_train."""
    d = _DEFAULTS
    p = subparsers.add_parser(
        "train", help="train a small Llama-style model on a text corpus (pure NumPy)",
        description="Train a small Llama-style model on the CPU. The checkpoint directory holds the weights "
                    "(weights.npz, Hugging Face names), the optimizer state and config.json (model config, "
                    "tokenizer, chat template). Ctrl+C saves a checkpoint; continue with --resume.")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", metavar="FILE", help="UTF-8 text file to train on")
    src.add_argument("--chat-corpus", action="store_true",
                     help="train on the built-in generated chat corpus (ChatML, loss on the answers only)")
    p.add_argument("--loss-on-all", action="store_true",
                   help="with --chat-corpus, train on every token instead of only the assistant answers")
    p.add_argument("--chat-examples", type=int, metavar="N",
                   help=f"dialogues to generate for --chat-corpus (default {DEFAULT_CHAT_EXAMPLES})")
    p.add_argument("-o", "--output", metavar="CKPT_DIR", help="checkpoint directory to write")
    p.add_argument("--resume", metavar="CKPT_DIR", help="continue training from this checkpoint")
    p.add_argument("--check", action="store_true",
                   help="run the finite-difference gradient check of every parameter tensor and exit")
    # (flag, type, metavar, help); the default shown is TrainConfig's
    groups = {
        "tokenizer": [("--tokenizer", None, None, "tokenizer to train: bpe or char", d.tokenizer),
                      ("--vocab-size", int, "N", "BPE vocab size incl. special tokens", d.vocab_size)],
        "model": [("--layers", int, "N", "transformer layers", d.n_layers),
                  ("--dim", int, "N", "hidden size", d.dim),
                  ("--heads", int, "N", "attention heads", d.n_heads),
                  ("--kv-heads", int, "N", "key/value heads", d.n_kv_heads),
                  ("--ffn", int, "N", "MLP intermediate size", d.ffn_dim),
                  ("--context", int, "N", "context length", d.context)],
        "optimisation": [("--steps", int, "N", "optimizer steps", d.steps),
                         ("--batch", int, "N", "sequences per step", d.batch_size),
                         ("--lr", float, "LR", "peak learning rate", d.lr),
                         ("--min-lr", float, "LR", "final learning rate", d.min_lr),
                         ("--warmup", int, "N", "warmup steps (at most steps/10)", d.warmup_steps),
                         ("--weight-decay", float, "W", "AdamW weight decay", d.weight_decay),
                         ("--seed", int, "N", "random seed", d.seed),
                         ("--val-fraction", float, "F", "share of tokens held out for validation", d.val_fraction),
                         ("--eval-interval", int, "N", "steps between validation losses", d.eval_interval),
                         ("--checkpoint-interval", int, "N", "steps between checkpoints, 0 = at the end",
                          d.checkpoint_interval)],
    }
    for title, flags in groups.items():
        g = p.add_argument_group(title)
        for flag, kind, metavar, text, default in flags:
            if kind is None:
                g.add_argument(flag, choices=("bpe", "char"), help=f"{text} (default {default})")
            else:
                g.add_argument(flag, type=kind, metavar=metavar, help=f"{text} (default {default:g})")
    p.add_argument("--threads", type=int, metavar="N",
                   help="worker threads (default: 2 or the CPU count if smaller); changes speed, not results")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run_train)
    return p


def _read_corpus(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Failed(f"corpus file {path} does not exist") from None
    except IsADirectoryError:
        raise _Failed(f"corpus file {path} is a directory, not a text file") from None
    except UnicodeDecodeError as e:
        raise _Failed(f"corpus file {path} is not UTF-8 text (bad byte at offset {e.start})") from None
    except OSError as e:
        raise _Failed(f"cannot read corpus file {path}: {e.strerror or e}") from None


def _build_config(args, ckpt):
    given = {field: getattr(args, dest) for dest, field in _FIELDS.items()
             if getattr(args, dest, None) is not None}
    if ckpt is None:
        return TrainConfig(**given)
    saved = dict(ckpt.train_config or {})
    changed = [f for f in _FIXED_ON_RESUME if f in given and given[f] != saved.get(f)]
    if changed:
        flags = ", ".join(f"--{next(k for k, v in _FIELDS.items() if v == f).replace('_', '-')}" for f in changed)
        raise _UsageError(f"{flags} cannot change when resuming from {ckpt.path} (the checkpoint fixes the "
                          f"model and data); drop the flag or start a new run")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{**{k: v for k, v in saved.items() if k in known}, **given})


def _load_data(args, ckpt, config):
    """-> (text, chat, data_info). Without --corpus/--chat-corpus a resumed run reuses the checkpoint's source."""
    source = (ckpt.data or {}) if ckpt is not None else {}
    if args.corpus is None and not args.chat_corpus and source.get("source") in ("chat", "file"):
        if source["source"] == "chat":
            args.chat_corpus = True
            args.chat_examples = args.chat_examples or source.get("chat_examples")
            args.loss_on_all = args.loss_on_all or source.get("chat_loss") == "all"
        else:
            args.corpus = source.get("path")
    if args.chat_corpus:
        from trainer.chat_corpus import make_split

        n = args.chat_examples if args.chat_examples is not None else DEFAULT_CHAT_EXAMPLES
        if n <= 0:
            raise _UsageError(f"--chat-examples must be a positive integer, got {n}")
        info = {"source": "chat", "chat_examples": n, "chat_loss": "all" if args.loss_on_all else "answers"}
        return make_split(config.seed, n).train_text, True, info
    if args.corpus is None:
        raise _UsageError("nothing to train on: give --corpus FILE or --chat-corpus (or --check for the "
                          "gradient check)")
    return _read_corpus(args.corpus), False, {"source": "file", "path": str(Path(args.corpus).resolve())}


def run_train(args) -> int:
    """Run ``petit train`` with parsed arguments; returns the process exit code."""
    if args.check:
        from trainer.gradcheck import run_check

        return 0 if run_check() else 1
    try:
        return _run(args)
    except (_UsageError, _Failed) as e:
        print(f"petit train: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, _UsageError) else 1


def _run(args) -> int:
    from trainer.checkpoint import CONFIG_FILE, load_checkpoint
    from trainer.train import TrainingDiverged, train

    if args.chat_examples is not None and args.chat_examples <= 0:     # bad flags first: exit 2 whatever the files
        raise _UsageError(f"--chat-examples must be a positive integer, got {args.chat_examples}")
    if args.threads is not None and args.threads <= 0:
        raise _UsageError(f"--threads must be a positive integer, got {args.threads}")
    ckpt = None
    if args.resume is not None:
        try:
            ckpt = load_checkpoint(args.resume)
        except ValueError as e:
            raise _Failed(str(e)) from None
    out = args.output or args.resume
    if out is None:
        raise _UsageError("give an output directory with -o CKPT_DIR")
    if Path(out).exists() and not Path(out).is_dir():
        raise _Failed(f"output {out} exists and is not a directory")
    resuming_in_place = ckpt is not None and Path(out).resolve() == Path(args.resume).resolve()
    if not resuming_in_place and (Path(out) / CONFIG_FILE).exists():
        raise _Failed(f"{out} already holds a checkpoint; continue it with --resume {out} or choose "
                      f"another -o directory")
    try:
        config = _build_config(args, ckpt).validate()
    except (ValueError, TypeError) as e:
        raise _UsageError(str(e)) from None
    text, chat, data_info = _load_data(args, ckpt, config)
    try:
        result = train(config, text, chat=chat, chat_loss="all" if args.loss_on_all else "answers", out_dir=out,
                       resume=args.resume, progress=not args.quiet, data_info=data_info, threads=args.threads)
    except TrainingDiverged as e:
        print(f"petit train: error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:              # the corpus or the checkpoint does not suit the model
        raise _Failed(str(e)) from None
    except OSError as e:
        print(f"petit train: error: cannot write the checkpoint in {out}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\npetit train: aborted; nothing more was saved (a checkpoint already in {out} is intact)",
              file=sys.stderr)
        return 130
    val = f" | val loss {result.val_losses[-1][1]:.4f}" if result.val_losses else ""
    last = result.losses[-1] if result.losses else float("nan")
    print(f"final loss {last:.4f}{val} after {result.step} steps ({result.tokens_per_s:,.0f} tokens/s)")
    print(f"checkpoint: {result.checkpoint}")
    return 130 if result.interrupted else 0


def main(argv=None) -> int:
    """Entry point for ``python -m trainer.cli``: a parser with just the train subcommand."""
    parser = argparse.ArgumentParser(prog="petit", description="Petit trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
