"""The `petit` command line: run, chat, serve, info, convert, train, export and verify (`petit --version`; also
`python -m petit`).

Exit codes, the same for every command: 0 success; 1 a runtime error (a missing, unreadable or corrupt file, a
model that refuses the input, training that diverged); 2 a usage error (an unknown flag, a value out of range,
flags that contradict each other: petit.argtypes.UsageError, or argparse's own); 130 stopped by Ctrl+C.
`petit verify` answers a question, so it follows diff(1): 0 VERIFY PASS, 1 VERIFY FAIL, 2 any error. Errors are one
line on stderr, never a traceback.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

from petit.argtypes import UsageError, non_negative_int, number, positive_int, thread_count, weight_type

WEIGHT_CHOICES = ["f32", "f16", "bf16", "q8_0", "q4_0"]      # petit.model.WEIGHT_TYPES, without loading the kernels


def _add_sampling_flags(p) -> None:
    # None = not given: the setting then comes from the model's generation defaults, else sample.FALLBACK
    p.add_argument("-t", "--temperature", type=number, help="0 = greedy (default: the model's, else 0.8)")
    p.add_argument("--greedy", action="store_true", help="the same as -t 0")
    p.add_argument("-k", "--top-k", type=non_negative_int, help="keep the k likeliest tokens (0 = off)")
    p.add_argument("-s", "--top-p", type=number, help="nucleus sampling mass (1 = off)")
    p.add_argument("--min-p", type=number, help="drop tokens below min-p x the top probability (0 = off)")
    p.add_argument("--repeat-penalty", "--repetition-penalty", dest="repeat_penalty", type=number,
                   help="CTRL repetition penalty (1 = off)")
    p.add_argument("--frequency-penalty", type=number, help="OpenAI frequency penalty (0 = off)")
    p.add_argument("--presence-penalty", type=number, help="OpenAI presence penalty (0 = off)")
    p.add_argument("--seed", type=non_negative_int, default=None, help="random seed (default: a fresh one)")


def _explicit_sampling(args) -> dict:
    return {"temperature": 0.0 if args.greedy else args.temperature, "top_k": args.top_k, "top_p": args.top_p,
            "min_p": args.min_p, "repetition_penalty": args.repeat_penalty,
            "frequency_penalty": args.frequency_penalty, "presence_penalty": args.presence_penalty, "seed": args.seed}


def check_sampling_flags(args) -> None:
    """A sampling flag out of range, or too many or too long --stop strings, is a usage error, found before the
    model loads (not a runtime one after)."""
    from petit.generation.sample import Sampler, resolve
    from petit.generation.stop import check_stop_strings
    try:
        Sampler(**resolve(_explicit_sampling(args)))
        check_stop_strings(getattr(args, "stop", None) or [])
    except ValueError as e:
        raise UsageError(str(e)) from None


def _sampler(args, model):
    from petit.generation.sample import Sampler, resolve
    return Sampler(**resolve(_explicit_sampling(args), model.metadata.get("generation")))


def _add_model_args(p) -> None:
    p.add_argument("model_arg", nargs="?", metavar="MODEL",
                   help="a .petit model file or a Hugging Face model folder (default: the bundled model)")
    p.add_argument("-m", "--model", help="the same as MODEL")


def model_path(args) -> str:
    """MODEL or -m MODEL (not both), else the bundled model."""
    from petit.assets import default_model_path
    if args.model and args.model_arg:
        raise UsageError("give the model once: as MODEL or with -m, not both")
    return args.model or args.model_arg or default_model_path()


def configure_threads(args) -> None:
    if args.threads is not None:
        from petit.kernels import configure
        configure(threads=args.threads)


def _add_weights_flag(p) -> None:
    p.add_argument("--weights", type=weight_type, choices=WEIGHT_CHOICES,
                   help="convert the weights at load (default: as stored in the file; fp32 = f32)")


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="generate a completion of a prompt (no chat template)",
                       description="Stream a completion of PROMPT from MODEL (default: the bundled model) to stdout.")
    _add_model_args(p)
    p.add_argument("-v", "--vocab", help="vocabulary file, one token per line (default: the model's own)")
    p.add_argument("-g", "--merges", help="BPE merges file, one 'left right' pair per line (needs -v)")
    p.add_argument("-p", "--prompt", default="", help="the text to continue")
    p.add_argument("-n", "--tokens", type=non_negative_int, default=64, help="tokens to generate (default 64)")
    _add_sampling_flags(p)
    _add_weights_flag(p)
    p.add_argument("--dump-logits", metavar="FILE",
                   help="write the logits of every position of prompt + output as a float32 .npy [positions, vocab]")
    p.set_defaults(func=cmd_run)


def _add_chat(sub, drop_old_turns: bool = True) -> None:
    """`petit chat`; `petit serve` takes its options from here, with drop_old_turns=False (an API client that sends
    too long a conversation gets an error, as from OpenAI, rather than a reply to part of it)."""
    p = sub.add_parser("chat", help="chat with a model in the terminal (its own chat template)",
                       description="Chat with MODEL: each line you type is a user message; the reply streams back. "
                                   "/help lists the commands: /reset starts over, /system shows the system prompt "
                                   "and /system MSG sets it (and starts over), /exit or /quit (or Ctrl+D) leaves; "
                                   "Ctrl+C stops the reply in progress. When the context is full the oldest turns "
                                   "are forgotten, and a line on stderr says so.")
    _add_model_args(p)
    p.add_argument("--system", help="a system prompt")
    p.add_argument("-n", "--max-tokens", "--max-new-tokens", dest="max_tokens", type=non_negative_int, default=256,
                   help="longest reply (default 256)")
    p.add_argument("--format", choices=["chatml", "llama3", "llama2", "mistral", "zephyr", "gemma", "phi3", "raw"],
                   help="chat format instead of the model's own template; raw = the completion notebook "
                        "(default: the model's template, or raw when it has none)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="end a reply at TEXT (not shown); may be given several times")
    p.add_argument("--ctx", type=positive_int, help="context size in tokens (default: the model's)")
    p.add_argument("--kv", choices=["int8", "f32"],
                   help="KV cache type (default: int8 for q8_0 / q4_0 weights, else f32)")
    turns = p.add_mutually_exclusive_group()
    turns.add_argument("--drop-old-turns", action="store_true",
                       help="when the context is full, forget the oldest turns, never the system prompt"
                            + (" (the default)" if drop_old_turns else ""))
    turns.add_argument("--keep-old-turns", dest="drop_old_turns", action="store_false",
                       help="when the context is full, refuse the message instead"
                            + (" (/reset starts over)" if drop_old_turns else " (the default)"))
    p.set_defaults(drop_old_turns=drop_old_turns)
    p.add_argument("--threads", type=thread_count, help="kernel threads (default: every CPU this process may use)")
    p.add_argument("--stats", action="store_true", help="print each turn's timing and token counts on stderr")
    p.add_argument("--no-cache-reuse", action="store_true", help="re-prefill the whole conversation every turn")
    _add_sampling_flags(p)
    _add_weights_flag(p)
    p.set_defaults(func=cmd_chat)


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def cmd_chat(args) -> int:
    import petit
    from petit.generation.session import Params, Session
    from petit.repl import ChatLoop

    args.model = model_path(args)
    check_sampling_flags(args)
    from petit.formats import get_format
    configure_threads(args)
    model = petit.load(args.model, weights=args.weights)
    sampler = _sampler(args, model)
    fmt = args.format or ("model's template" if model.metadata.get("chat_template") else "raw")
    if fmt == "raw" and args.format is None:
        print("petit chat: this model has no chat template: raw mode (each line continues one transcript; "
              "--format picks a chat format)", file=sys.stderr)
    template = get_format(args.format) if args.format and fmt != "raw" else None
    session = Session(model, template=template, n_ctx=args.ctx, kv_type=args.kv,
                      reuse_cache=not args.no_cache_reuse)
    params = Params(sampler=sampler, max_tokens=args.max_tokens, stop=args.stop, drop_old_turns=args.drop_old_turns)
    print(f"petit chat: {args.model} ({_count(model.n_params)} parameters, {model.n_layers} layers, "
          f"{model.weight_type} weights, {session.cache.kv_type} KV cache, context {session.n_ctx}, format: {fmt}); "
          f"{sampler.describe()}. /help lists the commands, /exit leaves.", file=sys.stderr)
    return ChatLoop(session, params, raw=fmt == "raw", system=None if fmt == "raw" else args.system,
                    stats=args.stats).run()


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="show the CPU features, the kernel path and the thread count")
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    from petit import __version__
    from petit.kernels import info
    i = info()
    print(f"petit {__version__}")
    print(f"cpu features:   {i['cpu_features']}")
    print(f"kernel paths:   {', '.join(i['supported'])} (supported)")
    print(f"chosen path:    {i['isa']}   (force one with PETIT_ISA=scalar|avx2|avx512|neon)")
    print(f"threads:        {i['threads']}   (CPUs available: {i['default_threads']}; set PETIT_THREADS=N)")
    return 0


def _write_npy_atomic(path: str, arr: np.ndarray) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            np.save(f, arr)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def cmd_run(args) -> int:
    import petit
    from petit.generation.loop import stream_text
    from petit.tokenizer import Tokenizer

    if args.merges and not args.vocab:
        raise UsageError("-g/--merges needs -v/--vocab")
    args.model = model_path(args)
    check_sampling_flags(args)
    tokenizer = Tokenizer.from_files(args.vocab, args.merges) if args.vocab else None
    model = petit.load(args.model, weights=args.weights, tokenizer=tokenizer)
    sampler = _sampler(args, model)
    tok = model.tokenizer
    if tok is None:
        raise ValueError(f"{args.model}: the file has no tokenizer; give one with -v VOCAB [-g MERGES]")
    ids = tok.encode(args.prompt, add_bos=tok.adds_bos)      # a BOS if the tokenizer adds one to plain text
    if not ids:
        if tok.bos_id is None:
            raise ValueError("the prompt is empty and the model has no BOS token to start from: give -p TEXT")
        ids = [tok.bos_id]
    n_ctx = min(model.context_length, len(ids) + args.tokens + 1)
    cache = model.new_cache(n_ctx)
    rows = [] if args.dump_logits else None
    stop = [tok.eos_id] if tok.eos_id is not None else []
    out = sys.stdout
    out.write(args.prompt)
    out.flush()
    t0, n, t_first, last = time.perf_counter(), 0, None, None
    for step in stream_text(model, ids, max_tokens=args.tokens, sampler=sampler, stop_ids=stop, cache=cache,
                            on_logits=rows.append if rows is not None else None):
        if t_first is None:
            t_first = time.perf_counter()
        n += 1
        last = step
        if step.text:
            out.write(step.text)
            out.flush()
    out.write("\n")
    out.flush()
    t1 = time.perf_counter()
    if rows is not None:
        if last is not None and last.finish_reason is not None and cache.pos < cache.n_ctx:
            rows.append(model.forward([last.token], cache)[None, :])     # the row after the last token too
        logits = np.concatenate(rows, axis=0)
        _write_npy_atomic(args.dump_logits, logits)
        print(f"wrote logits {logits.shape[0]} x {logits.shape[1]} to {args.dump_logits}", file=sys.stderr)
    if n and t_first is not None:
        rate = f", {(n - 1) / (t1 - t_first):.1f} tok/s" if n > 1 and t1 > t_first else ""
        print(f"[{len(ids)} prompt tokens, {n} generated, prefill+first {1000 * (t_first - t0):.0f} ms{rate}]",
              file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from petit import __version__
    parser = argparse.ArgumentParser(prog="petit", description="Run, train, quantize and verify small language "
                                                               "models on your CPU.")
    parser.add_argument("--version", action="version", version=f"petit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_run(sub)
    _add_chat(sub)
    from petit.server.cli import add_serve_parser       # `petit serve`: petit/server/ (needs starlette, uvicorn)
    add_serve_parser(sub)
    _add_info(sub)
    from petit.convert import add_convert_parser
    add_convert_parser(sub)
    _add_trainer_commands(sub)
    return parser


def _add_trainer_commands(sub) -> None:
    """train / export / verify live in the trainer package, installed beside petit."""
    from trainer.cli import add_train_parser
    from trainer.export import add_export_parser
    from trainer.verify import add_verify_parser
    add_train_parser(sub)
    add_export_parser(sub)
    add_verify_parser(sub)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"petit: warning: {message}", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)       # wrong flags: usage on stderr, exit 2
    warnings.showwarning = _one_line_warning
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except UsageError as e:              # as argparse reports a bad flag, with its exit code
        print(f"petit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        print(f"petit {args.command}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:               # a bug of ours: still one line, with what a bug report needs
        print(f"petit {args.command}: internal error: {type(e).__name__}: {e} (please report this)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
