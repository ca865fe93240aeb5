"""`petit serve`: every option of `petit chat` (petit.cli.options.add_chat_options, so the two never drift apart),
plus where to listen and the server's limits. Starlette and uvicorn are imported only when the command runs."""
import argparse
import importlib.util
import os
import sys

from petit.cli.argtypes import UsageError, non_negative_int, positive_int
from petit.cli.options import (add_chat_options, add_lora_flags, add_speculation_flags, apply_gpu,
                               check_sampling_flags, check_speculation_flags, configure_threads, format_count,
                               gpu_wanted, make_sampler, model_path)


def _port(s: str) -> int:
    v = non_negative_int(s)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {v}")
    return v


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API",
                       description="Serve MODEL (default: the bundled model) over the OpenAI REST API: "
                                   "/v1/chat/completions (the model's chat template), /v1/completions (no template), "
                                   "/v1/models, /health. The chat options are each request's defaults; a request's "
                                   "own fields override them. Requests are answered one at a time, in arrival order.")
    add_chat_options(p, drop_old_turns=False)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: the network)")
    p.add_argument("--port", type=_port, default=8080, help="port (default 8080; 0 = any free port)")
    p.add_argument("--api-key", default=os.environ.get("PETIT_API_KEY") or None,
                   help="require 'Authorization: Bearer KEY' on every request (default: $PETIT_API_KEY, else none)")
    p.add_argument("--max-batch", type=positive_int, default=8,
                   help="requests answered together, their tokens decoded in shared steps (default 8)")
    p.add_argument("--max-queue", type=non_negative_int, default=16,
                   help="requests that may wait while others are answered; more get 429 (default 16)")
    p.add_argument("--max-body", type=positive_int, default=2 * 1024 * 1024,
                   help="largest request body in bytes; larger gets 413 (default 2 MiB)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="also answer requests whose Host header is NAME (e.g. this machine's name); may be given "
                        "several times; '*' turns the DNS-rebinding check off")
    p.add_argument("--log-requests", action="store_true",
                   help="print a line per HTTP request on stderr: 'petit serve: CLIENT METHOD PATH STATUS MS ms'")
    p.add_argument("--embedding-model", metavar="EMB",
                   help="also serve EMB, an embedding model's folder (sentence-transformers) or GGUF file (with a "
                        "pooling key), at /v1/embeddings and Ollama's /api/embed")
    add_speculation_flags(p, serve=True)
    add_lora_flags(p, several=True)
    p.set_defaults(func=cmd_serve)


def _speculation(engine) -> str:
    """The banner's words for the default speculative decoding (a request's "speculative" field overrides it)."""
    if engine.default_draft == "none":
        return ""
    what = "prompt lookup" if engine.default_draft == "lookup" else \
        f"draft model {engine.draft} ({engine.draft_model.weight_type})"
    return f"; speculative decoding: {what}, {engine.draft_min}-{engine.draft_max} tokens"


def prepare_model(args):
    """What the worker does to the model once loaded: the GPU offload (--gpu). (The --lora adapters are the worker's
    own: it attaches the one each request asks for.)"""
    def prepare(model):
        apply_gpu(args, model, "serve")
    return prepare


def adapters(args) -> list:
    """--lora FILE ... as the worker's [(path, scale)]: the first at --lora-scale (default 1), the others 1."""
    files = args.lora or []
    if args.lora_scale is not None and not files:
        raise UsageError("--lora-scale needs --lora FILE")
    scale = 1.0 if args.lora_scale is None else args.lora_scale
    if scale != scale or abs(scale) == float("inf"):
        raise UsageError(f"--lora-scale must be a finite number, got {args.lora_scale}")
    return [(path, scale if i == 0 else 1.0) for i, path in enumerate(files)]


def cmd_serve(args) -> int:
    path = model_path(args)              # the command line first: a usage error is exit 2 whatever else is wrong
    if args.max_tokens == 0:
        raise UsageError("-n/--max-tokens must be at least 1")
    check_sampling_flags(args)
    check_speculation_flags(args)
    lora = adapters(args)
    gpu_wanted(args)
    configure_threads(args)
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"petit serve: error: the server needs {' and '.join(missing)}: pip install starlette uvicorn",
              file=sys.stderr)
        return 1
    from petit.server.lifeline import arm
    arm()                                # a child of the app ends with it (PETIT_LIFELINE; see lifeline.py)
    from petit.chat.formats import get_format
    from petit.server import Server
    from petit.server.app import request_line
    from petit.server.engine import ServerWorker

    if not os.path.exists(path):         # the model loads once the server listens: say now what `petit run` says
        import petit
        petit.load(path)                 # raises "PATH: file not found"
    for path, _ in lora:
        if not os.path.isfile(path):
            raise ValueError(f"{path}: file not found (--lora: a LoRA adapter file, GGUF)")

    embeddings = None
    if args.embedding_model is not None:     # loaded now: a folder Petit cannot embed with fails before listening
        from petit.server.embeddings import EmbeddingService
        embeddings = EmbeddingService(args.embedding_model).load()

    def on_stats(job, stats):
        print(f"petit serve: {job.kind} {stats}", file=sys.stderr)
    engine = ServerWorker(path, weights=args.weights, sampler=lambda model: make_sampler(args, model),
                          system=args.system,
                          template=get_format(args.format) if args.format not in (None, "raw") else None,
                          raw=args.format == "raw", max_tokens=args.max_tokens, stop=args.stop, n_ctx=args.ctx,
                          kv_type=args.kv, drop_old_turns=args.drop_old_turns, ctx_shift=args.ctx_shift,
                          n_keep=args.n_keep,
                          reuse_cache=not args.no_cache_reuse,
                          max_queue=args.max_queue, max_batch=args.max_batch,
                          on_stats=on_stats if args.stats else None, mmap=args.mmap, repack=args.repack,
                          lookup=args.lookup, draft=args.draft, draft_max=args.draft_max, draft_min=args.draft_min,
                          prepare=prepare_model(args), adapters=lora)

    def log_request(request):
        print(f"petit serve: {request_line(request)}", file=sys.stderr, flush=True)
    server = Server(engine, host=args.host, port=args.port, api_key=args.api_key, allowed_hosts=args.allowed_host,
                    max_body=args.max_body, request_log=log_request if args.log_requests else None,
                    embeddings=embeddings)
    from petit.generation import grammar
    if not grammar.available():
        print(f"petit serve: warning: {grammar.MISSING}; until then, requests with response_format or a forced "
              "tool call are refused (501)", file=sys.stderr)
    if not server.hosts.loopback and args.api_key is None:
        print(f"petit serve: warning: listening on {args.host} without --api-key: anyone who can reach this "
              "machine can use the server", file=sys.stderr)

    def banner():
        model = engine.model
        chat = "chat + completions" if engine.has_chat else "completions only (no chat template)"
        print(f"petit serve: {path} ({format_count(model.n_params)} parameters, {model.weight_type} weights, context "
              f"{engine.n_ctx_effective}, {chat}); {engine.sampler.describe()}{_speculation(engine)}"
              + (f"; LoRA adapter {lora[0][0]} at scale {lora[0][1]:g}" if lora else "")
              + (f" (and {len(lora) - 1} more a request may choose: GET /lora-adapters)" if len(lora) > 1 else ""),
              file=sys.stderr)
        print(f"petit serve: listening on {server.url} (model id {server.model_id!r}"
              f"{', API key required' if args.api_key else ''}; Ollama's API at {server.url.removesuffix('/v1')}/api)"
              "; Ctrl+C stops", file=sys.stderr)
        if embeddings is not None:
            print(f"petit serve: embeddings by {args.embedding_model} (model id {embeddings.model_id!r}, dimension "
                  f"{embeddings.embedder.dimension}) at {server.url}/embeddings", file=sys.stderr)
    try:
        server.run(on_ready=banner)
    except KeyboardInterrupt:
        pass
    if engine.load_error is not None:
        raise engine.load_error
    print("petit serve: stopped", file=sys.stderr)
    return 0
