"""`petit info`: the CPU features, the kernel paths this machine supports, the chosen one and the thread count."""


def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="show the CPU features, the kernel path and the thread count")
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    from petit import __version__
    from petit.native import info, prefers_interleaved
    i = info()
    print(f"petit {__version__}")
    print(f"cpu features:   {i['cpu_features']}")
    print(f"kernel paths:   {', '.join(i['supported'])} (supported)")
    print(f"chosen path:    {i['isa']}   (force one with PETIT_ISA=scalar|avx2|avx512|neon)")
    print(f"threads:        {i['threads']}   (default: {i['default_threads']}, one per performance core; "
          "set PETIT_THREADS=N)")
    print("matrices:       " + ("q8_0 / q4_0 rows interleaved 8 at a time at load, as this path multiplies fastest"
                                if prefers_interleaved() else "q8_0 / q4_0 rows as stored"))
    if i["path_warning"]:
        print(f"path check:     {i['path_warning']}")
    return 0
