"""`petit chat`: chat with a model in the terminal, through its own chat template, a built-in format (--format) or
the raw completion notebook; the loop itself is petit/cli/repl.py."""
import sys

from petit.cli.options import (add_chat_options, add_lora_flags, add_speculation_flags, apply_gpu, apply_lora,
                               check_sampling_flags, check_speculation_flags, configure_threads, format_count,
                               gpu_wanted, make_sampler, make_speculation, model_path, warn_if_sampling)


def add_chat_parser(sub) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal (its own chat template)",
                       description="Chat with MODEL: each line you type is a user message; the reply streams back. "
                                   "/help lists the commands: /reset starts over, /system shows the system prompt "
                                   "and /system MSG sets it (and starts over), /exit or /quit (or Ctrl+D) leaves; "
                                   "Ctrl+C stops the reply in progress. When the context is full the oldest turns "
                                   "are forgotten, and a line on stderr says so.")
    add_chat_options(p)
    add_speculation_flags(p)
    add_lora_flags(p)
    p.set_defaults(func=cmd_chat)


def cmd_chat(args) -> int:
    import petit
    from petit.cli.repl import ChatLoop
    from petit.generation.session import Params, Session

    args.model = model_path(args)
    check_sampling_flags(args)
    check_speculation_flags(args)
    gpu_wanted(args)
    from petit.chat.formats import get_format
    configure_threads(args)
    model = petit.load(args.model, weights=args.weights, mmap=args.mmap, repack=args.repack)
    apply_lora(args, model)
    apply_gpu(args, model, "chat")
    sampler = make_sampler(args, model)
    fmt = args.format or ("model's template" if model.metadata.get("chat_template") else "raw")
    if fmt == "raw" and args.format is None:
        print("petit chat: this model has no chat template: raw mode (each line continues one transcript; "
              "--format picks a chat format)", file=sys.stderr)
    template = get_format(args.format) if args.format and fmt != "raw" else None
    speculation = make_speculation(args, model, args.ctx)
    warn_if_sampling(speculation, sampler, "chat")
    session = Session(model, template=template, n_ctx=args.ctx, kv_type=args.kv,
                      reuse_cache=not args.no_cache_reuse, speculation=speculation)
    params = Params(sampler=sampler, max_tokens=args.max_tokens, stop=args.stop, drop_old_turns=args.drop_old_turns,
                    ctx_shift=args.ctx_shift, n_keep=args.n_keep)
    print(f"petit chat: {args.model} ({format_count(model.n_params)} parameters, {model.n_layers} layers, "
          f"{model.weight_type} weights, {session.cache.kv_type} KV cache, context {session.n_ctx}, format: {fmt}); "
          f"{sampler.describe()}{'; ' + speculation.describe() if speculation else ''}. /help lists the commands, "
          f"/exit leaves.", file=sys.stderr)
    return ChatLoop(session, params, raw=fmt == "raw", system=None if fmt == "raw" else args.system,
                    stats=args.stats).run()
