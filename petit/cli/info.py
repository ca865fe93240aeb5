"""`petit info`: the CPU features, the kernel paths this machine supports, the chosen one and the thread count;
`petit info MODEL`: what a model file or folder holds (petit/loading/describe.py), read without loading it."""


def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="show the CPU and kernel path, or describe a model file or folder")
    p.add_argument("model", nargs="?", help="a .petit or GGUF file, or a Hugging Face folder, to describe")
    p.add_argument("--json", action="store_true", help="the model's description as JSON")
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    if args.model:
        return _describe(args.model, args.json)
    if args.json:
        from petit.cli.argtypes import UsageError
        raise UsageError("--json describes a model: give one (petit info MODEL --json)")
    from petit import __version__
    from petit.native import ISAS, info, prefers_interleaved
    i = info()
    print(f"petit {__version__}")
    print(f"cpu features:   {i['cpu_features']}")
    print(f"kernel paths:   {', '.join(i['supported'])} (supported)")
    print(f"chosen path:    {i['isa']}   (force one with PETIT_ISA={'|'.join(ISAS)})")
    print(f"threads:        {i['threads']}   (default: {i['default_threads']}, one per performance core; "
          "set PETIT_THREADS=N)")
    print("matrices:       " + ("q8_0 / q4_0 rows interleaved 8 at a time at load, as this path multiplies fastest"
                                if prefers_interleaved() else "q8_0 / q4_0 rows as stored"))
    print(f"amx:            {i['amx']}" + ("" if i["amx"] == "on" else "   (Intel AMX tiles for prefill; PETIT_AMX=0 "
                                                                       "turns them off)"))
    if i["path_warning"]:
        print(f"path check:     {i['path_warning']}")
    _opencl()
    return 0


def _opencl() -> None:
    """The OpenCL platforms and devices, and which one `--gpu` would use (its start-up check run here)."""
    from petit.gpu import GpuUnavailable, choose, list_devices, start, why_not
    try:
        devices = list_devices()
        chosen = choose(devices)
    except GpuUnavailable as e:
        print(f"opencl:         none ({e}); the matmuls run on the CPU")
        return
    print("opencl:         " + "; ".join(sorted({f'platform {d.platform}: {d.platform_name}' for d in devices})))
    for d in devices:
        mark = "--gpu uses this one" if d is chosen else f"not used by --gpu alone: {why_not(chosen, d)}"
        print(f"  {d.describe()}   [{mark}]")
    try:
        dev, _ = start(chosen.platform, chosen.index)
        verdict = "start-up check passed"
    except GpuUnavailable as e:
        verdict = f"not usable: {e}"
    kind = "" if chosen.is_gpu else ", not a GPU: correct but slower than the CPU path"
    print(f"gpu offload:    off unless --gpu; --gpu would use platform {chosen.platform} device {chosen.index} "
          f"({verdict}{kind}); --gpu-platform N / --gpu-device N choose another")


def _describe(path: str, as_json: bool) -> int:
    import json
    import sys
    from petit.loading.describe import describe, format_description
    try:
        d = describe(path)
    except (ValueError, OSError) as e:
        print(f"petit info: {e}", file=sys.stderr)
        return 1
    print(json.dumps(d, indent=2) if as_json else format_description(d))
    return 0
