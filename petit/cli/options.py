"""The flags several `petit` commands share, in one place: the model (MODEL / -m), the weight type, the sampling
flags, the chat options `petit chat` and `petit serve` both take, and the checks and conversions that go with them.
"""
from petit.cli.argtypes import UsageError, non_negative_int, number, positive_int, thread_count, weight_type

# petit.loading.WEIGHT_TYPES, without loading the kernels
WEIGHT_CHOICES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k", "q4_k_m"]


def add_sampling_flags(p) -> None:
    # None = not given: the setting then comes from the model's generation defaults, else
    # petit.generation.sample.FALLBACK
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


def make_sampler(args, model):
    """The sampler of the flags given, the model's generation defaults for the others."""
    from petit.generation.sample import Sampler, resolve
    return Sampler(**resolve(_explicit_sampling(args), model.metadata.get("generation")))


def add_model_args(p) -> None:
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
        from petit.native import configure
        configure(threads=args.threads)


def add_weights_flag(p) -> None:
    p.add_argument("--weights", type=weight_type, choices=WEIGHT_CHOICES,
                   help="convert the weights at load (default: as stored in the file; fp32 = f32)")
    p.add_argument("--no-mmap", dest="mmap", action="store_false",
                   help="read a .petit file's weights into memory on huge pages instead of mapping the file: "
                        "loads slower, decodes faster where the system has transparent huge pages")
    p.add_argument("--no-repack", dest="repack", action="store_false", default=None,
                   help="run q8_0 / q4_0 matrices in the file's row layout, mapped and shared with the page cache, "
                        "instead of interleaved for this CPU at load (slower on x86; `petit info` says which)")


def add_chat_options(p, drop_old_turns: bool = True) -> None:
    """The options of `petit chat`, which `petit serve` takes too (so the two never drift apart), with
    drop_old_turns=False there (an API client that sends too long a conversation gets an error, as from OpenAI,
    rather than a reply to part of it)."""
    add_model_args(p)
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
    p.add_argument("--ctx-shift", action="store_true",
                   help="when old turns are forgotten, shift the kept ones down inside the KV cache (their keys "
                        "re-rotated) instead of prefilling them again, where the model allows it exactly; else "
                        "they are prefilled again (--stats says which)")
    p.add_argument("--n-keep", type=non_negative_int, default=0, metavar="N",
                   help="when old turns are forgotten, keep the turns that start within the first N tokens too "
                        "(the system prompt is always kept)")
    p.add_argument("--threads", type=thread_count, help="kernel threads (default: one per performance core it may use)")
    p.add_argument("--stats", action="store_true", help="print each turn's timing and token counts on stderr")
    p.add_argument("--no-cache-reuse", action="store_true", help="re-prefill the whole conversation every turn")
    add_sampling_flags(p)
    add_weights_flag(p)
    add_gpu_flags(p)


def format_count(n: int) -> str:
    """A count in a few characters: 1.5M, 135M, 1.1B (parameters, in the chat and serve banners)."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def add_speculation_flags(p, serve: bool = False) -> None:
    """Speculative decoding (`petit run`, `petit chat`, `petit serve`): greedy output stays token for token the plain
    run's, sampled output keeps its distribution. In serve they are the defaults a request's `speculative` field
    overrides."""
    g = p.add_argument_group("speculative decoding (greedy: the same tokens; sampling: the same distribution)")
    how = g.add_mutually_exclusive_group()
    also = ("; loaded once beside the model, requests draft with it unless their \"speculative\" field says "
            "otherwise") if serve else ""
    how.add_argument("--draft", metavar="MODEL",
                     help="draft with MODEL (same vocabulary as the model), or self:TYPE for the model's own file "
                          f"at weight type TYPE (e.g. self:q4_0){also}")
    how.add_argument("--lookup", action="store_true",
                     help="draft from n-grams of the prompt and the output so far (prompt lookup; no second model)"
                          + ("; the timings show draft_n / draft_n_accepted" if serve else ""))
    g.add_argument("--draft-max", type=positive_int, default=8, metavar="N",
                   help="draft at most N tokens per step (default 8)")
    g.add_argument("--draft-min", type=positive_int, default=1, metavar="N",
                   help="check drafts only when there are at least N (default 1)")


def check_speculation_flags(args) -> None:
    """--draft-min above --draft-max, a self:TYPE with an unknown type, or --draft-* without --draft / --lookup
    is a usage error."""
    given = args.draft is not None or args.lookup
    if not given and (args.draft_max != 8 or args.draft_min != 1):
        raise UsageError("--draft-max / --draft-min need --draft MODEL or --lookup")
    if args.draft_min > args.draft_max:
        raise UsageError(f"--draft-min ({args.draft_min}) is above --draft-max ({args.draft_max})")
    if args.draft is not None and args.draft.startswith("self:") and args.draft[5:] not in WEIGHT_CHOICES:
        raise UsageError(f"--draft {args.draft}: the weight type after self: must be one of "
                         f"{', '.join(WEIGHT_CHOICES)}")


def make_speculation(args, model, n_ctx: int | None = None):
    """The Speculation of the flags (None when neither --draft nor --lookup is given); a draft model whose
    vocabulary differs from the model's raises ValueError naming the difference."""
    from petit.generation.speculative import LookupDrafter, Speculation, check_rollback, load_draft
    if args.draft is None and not args.lookup:
        return None
    check_rollback(model, "model")
    if args.lookup:
        drafter = LookupDrafter()
    else:
        drafter = load_draft(args.draft, model, args.model, n_ctx, mmap=args.mmap, repack=args.repack)
    return Speculation(drafter, draft_max=args.draft_max, draft_min=args.draft_min)


def warn_if_sampling(speculation, sampler, command: str) -> None:
    """Speculation is exact for greedy decoding only: say so when the flags ask for it with a sampling sampler."""
    import sys

    from petit.generation.speculative import Speculation
    if speculation is not None and not Speculation.exact_for(sampler):
        print(f"petit {command}: speculative decoding runs with greedy decoding only (-t 0 / --greedy); with "
              f"temperature {sampler.temperature:g} this run decodes plainly", file=sys.stderr)


def add_gpu_flags(p) -> None:
    """OpenCL offload of the matmuls (issue 34; docs/gpu.md): off unless --gpu (or a --gpu-* choice) is given."""
    g = p.add_argument_group("OpenCL offload (pip install \"petit[gpu]\"; `petit info` lists the devices)")
    which = g.add_mutually_exclusive_group()
    which.add_argument("--gpu", action="store_true", default=None,
                       help="run the q8_0 / q4_0 / Q4_K / Q5_K / Q6_K matmuls on an OpenCL device (the first GPU, "
                            "else the first device); one that fails its start-up check is not used and the run says "
                            "why")
    which.add_argument("--cpu", dest="gpu", action="store_false", help="the CPU alone (the default)")
    g.add_argument("--gpu-platform", type=non_negative_int, metavar="N", help="the OpenCL platform (implies --gpu)")
    g.add_argument("--gpu-device", type=non_negative_int, metavar="N",
                   help="the device on that platform (implies --gpu)")
    g.add_argument("--gpu-layers", type=non_negative_int, metavar="N",
                   help="offload the first N layers (default: as many as fit; the rest run on the CPU; implies --gpu)")


def gpu_wanted(args) -> bool:
    """--gpu, or a --gpu-* choice (which implies it); with --cpu a --gpu-* choice is a usage error."""
    chosen = [f for f, v in (("--gpu-platform", args.gpu_platform), ("--gpu-device", args.gpu_device),
                             ("--gpu-layers", args.gpu_layers)) if v is not None]
    if args.gpu is False and chosen:
        raise UsageError(f"--cpu cannot be combined with {', '.join(chosen)}")
    return bool(args.gpu) or bool(chosen)


def apply_gpu(args, model, command: str) -> None:
    """Attach the offload the flags ask for; a device that cannot run it leaves the model on the CPU and says why
    on stderr."""
    import sys
    if not gpu_wanted(args):
        return
    from petit.gpu import GpuUnavailable, attach
    try:
        off = attach(model, args.gpu_platform, args.gpu_device, args.gpu_layers)
    except GpuUnavailable as e:
        print(f"petit {command}: --gpu: {e}; running on the CPU", file=sys.stderr)
        return
    note = "" if off.device.is_gpu else " (not a GPU: the kernels run there correctly but slower than the CPU path)"
    print(f"petit {command}: gpu: {off.describe()}{note}", file=sys.stderr)
    for s in off.skipped:
        print(f"petit {command}: gpu: on the CPU: {s}", file=sys.stderr)


def add_lora_flags(p, several: bool = False) -> None:
    """--lora FILE [--lora-scale S]: a LoRA adapter (GGUF, as `petit finetune` and llama.cpp write them) applied to
    the model at run time (issue 33). several: --lora may be given more than once (`petit serve`: a request
    chooses among them; the first runs by default)."""
    if several:
        p.add_argument("--lora", metavar="FILE", action="append",
                       help="load a LoRA adapter (a GGUF adapter file); may be given several times: the first runs "
                            "by default and a request's \"lora\": [{\"id\": N, \"scale\": S}] chooses one by its "
                            "place (GET /lora-adapters lists them) or none")
    else:
        p.add_argument("--lora", metavar="FILE", help="apply a LoRA adapter (a GGUF adapter file) at run time")
    p.add_argument("--lora-scale", type=float, default=None, metavar="S",
                   help="scale of the (first) adapter's product (default 1; llama.cpp's --lora-scaled)")


def apply_lora(args, model) -> None:
    """Attach args.lora to the loaded model (nothing without --lora)."""
    if args.lora_scale is not None and not args.lora:
        raise UsageError("--lora-scale needs --lora FILE")
    if args.lora:
        from petit.loading.lora import attach
        scale = 1.0 if args.lora_scale is None else args.lora_scale
        if scale != scale or abs(scale) == float("inf"):
            raise UsageError(f"--lora-scale must be a finite number, got {args.lora_scale}")
        attach(model, args.lora, scale)
