"""Loads the compiled kernels (`petit._kernels`, built by cffi at install time) and picks the CPU path once.

The path and thread count come from the environment when set: PETIT_ISA = scalar | avx2 | avx512 | neon forces a path
(for tests and benchmarks; an unsupported one is an error, never a silent fallback), PETIT_THREADS = N sets the
thread count (default: the CPUs this process may run on).
"""
import os

try:
    from petit._kernels import ffi, lib
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "petit's C kernels (petit._kernels) are not built or cannot be loaded: "
        f"{e}. Reinstall with `pip install .` from the source folder (a C compiler is required)."
    ) from e

ISAS = {"scalar": 0, "avx2": 1, "avx512": 2, "neon": 3}
ISA_NAMES = {v: k for k, v in ISAS.items()}


def configure(threads: int | None = None, isa: str | None = None) -> None:
    """(Re)start the kernels with a thread count and a CPU path.

    Args:
        threads: worker count including the caller; None reads PETIT_THREADS, else every allowed CPU.
        isa: "scalar", "avx2", "avx512" or "neon"; None reads PETIT_ISA, else the best the CPU supports.

    Raises:
        ValueError: an unknown or unsupported path, or a bad thread count.
    """
    if isa is None:
        isa = os.environ.get("PETIT_ISA") or None
    if threads is None:
        env = os.environ.get("PETIT_THREADS")
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise ValueError(f"PETIT_THREADS must be a positive integer, got {env!r}") from None
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256):
        raise ValueError(f"thread count must be an integer in 1..256, got {threads!r}")
    if isa is None:
        code = -1
    elif isa not in ISAS:
        raise ValueError(f"unknown kernel path {isa!r} (PETIT_ISA): choose one of {', '.join(ISAS)}")
    elif not lib.pt_isa_supported(ISAS[isa]):
        raise ValueError(f"kernel path {isa!r} is not supported by this CPU (features: {cpu_features()})")
    else:
        code = ISAS[isa]
    rc = lib.pt_init(threads or 0, code)
    if rc != 0:
        # pt_init keeps the previous path and starts the previous pool again: say what runs now
        raise ValueError(f"could not start the kernels (path {isa!r}, threads {threads!r}), error {rc}; still "
                         f"running path {ISA_NAMES[lib.pt_isa()]!r} on {lib.pt_n_threads()} thread(s)")
    _current.update(threads=lib.pt_n_threads(), isa=ISA_NAMES[lib.pt_isa()])


_current = {}


def _restart_in_child() -> None:
    # a forked child inherits no worker threads (the C side drops them); start its own with the same settings
    lib.pt_init(_current.get("threads", 0), ISAS[_current.get("isa", "scalar")])


def cpu_features() -> str:
    buf = ffi.new("char[512]")
    lib.pt_cpu_features(buf, 512)
    return ffi.string(buf).decode() or "(none detected)"


def info() -> dict:
    """The CPU features, the active path, the supported paths and the thread count."""
    return {
        "cpu_features": cpu_features(),
        "isa": ISA_NAMES[lib.pt_isa()],
        "supported": [name for name, code in ISAS.items() if lib.pt_isa_supported(code)],
        "threads": lib.pt_n_threads(),
        "default_threads": lib.pt_default_threads(),
    }


configure()
if hasattr(os, "register_at_fork"):   # POSIX only: Windows has no fork()
    os.register_at_fork(after_in_child=_restart_in_child)
