"""`petit run`: stream a completion of a prompt (no chat template) to stdout, with timing on stderr and, on request,
every position's logits written to a .npy file."""
import os
import sys
import time

import numpy as np

from petit.cli.argtypes import UsageError, non_negative_int
from petit.cli.options import (add_gpu_flags, add_lora_flags, add_model_args, add_sampling_flags, add_speculation_flags,
                               add_weights_flag, apply_gpu, apply_lora, check_sampling_flags, check_speculation_flags,
                               gpu_wanted, make_sampler, make_speculation, model_path, warn_if_sampling)


def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="generate a completion of a prompt (no chat template)",
                       description="Stream a completion of PROMPT from MODEL (default: the bundled model) to stdout.")
    add_model_args(p)
    p.add_argument("-v", "--vocab", help="vocabulary file, one token per line (default: the model's own)")
    p.add_argument("-g", "--merges", help="BPE merges file, one 'left right' pair per line (needs -v)")
    p.add_argument("-p", "--prompt", default="", help="the text to continue")
    p.add_argument("-n", "--tokens", type=non_negative_int, default=64, help="tokens to generate (default 64)")
    add_sampling_flags(p)
    add_weights_flag(p)
    add_gpu_flags(p)
    p.add_argument("--dump-logits", metavar="FILE",
                   help="write the logits of every position of prompt + output as a float32 .npy [positions, vocab]")
    add_speculation_flags(p)
    add_lora_flags(p)
    p.set_defaults(func=cmd_run)


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
    from petit.generation.detokenize import TextStream
    from petit.generation.loop import generate_tokens
    from petit.generation.session import Stats
    from petit.generation.speculative import generate_speculative
    from petit.tokenizer import Tokenizer

    if args.merges and not args.vocab:
        raise UsageError("-g/--merges needs -v/--vocab")
    args.model = model_path(args)
    check_sampling_flags(args)
    check_speculation_flags(args)
    gpu_wanted(args)
    if args.dump_logits and (args.draft is not None or args.lookup):
        raise UsageError("--dump-logits cannot be combined with --draft / --lookup (speculation skips rows)")
    tokenizer = Tokenizer.from_files(args.vocab, args.merges) if args.vocab else None
    model = petit.load(args.model, weights=args.weights, tokenizer=tokenizer, mmap=args.mmap, repack=args.repack)
    apply_lora(args, model)
    apply_gpu(args, model, "run")
    sampler = make_sampler(args, model)
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
    speculation = make_speculation(args, model, n_ctx)
    warn_if_sampling(speculation, sampler, "run")
    spec_stats = Stats() if speculation is not None else None
    rows = [] if args.dump_logits else None
    stop = [tok.eos_id] if tok.eos_id is not None else []
    out = sys.stdout
    out.write(args.prompt)
    out.flush()
    t0, n, t_first, last = time.perf_counter(), 0, None, None
    if speculation is not None:
        steps = generate_speculative(model, ids, speculation, max_tokens=args.tokens, sampler=sampler, stop_ids=stop,
                                     cache=cache, stats=spec_stats)
    else:
        steps = generate_tokens(model, ids, max_tokens=args.tokens, sampler=sampler, stop_ids=stop, cache=cache,
                                on_logits=rows.append if rows is not None else None)
    text = TextStream(tok)
    for step in steps:
        text.fill(step)
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
        spec = ""
        if spec_stats is not None:
            spec_stats.generated_tokens = n
            spec = spec_stats.speculation_text() or "; speculation off"
        print(f"[{len(ids)} prompt tokens, {n} generated, prefill+first {1000 * (t_first - t0):.0f} ms{rate}{spec}]",
              file=sys.stderr)
    return 0
