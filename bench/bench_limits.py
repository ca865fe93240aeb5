"""The machine's ceilings beside the engines' figures: read bandwidth (what bounds decode: tokens/s <= GB/s divided
by the bytes of weights a token reads) and the peak of the CPU's best int8 multiply-add (what bounds prefill).

    python bench/bench_limits.py            # 1 thread and the default thread count
    python bench/bench_limits.py --threads 1,2,4 --mib 2048

bench/limits.c is compiled here with the system C compiler for this CPU (-O3 -march=native) and run once per
thread count; `limits(threads)` returns the same figures to other benchmarks.
"""
import argparse
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def build(work: str | None = None) -> str:
    work = work or os.path.join(tempfile.gettempdir(), "petit-bench-limits")
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "limits")
    src = os.path.join(HERE, "limits.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            raise SystemExit("no C compiler (cc, gcc or clang) to build bench/limits.c")
        subprocess.run([cc, "-O3", "-march=native", "-pthread", src, "-o", exe + ".tmp"], check=True)
        os.replace(exe + ".tmp", exe)
    return exe


def limits(threads: int, mib: int = 1024) -> dict:
    """{"read_gbs": float, "int8_gops": float, "int8_16_gops": float, "int8_kernel": str} with `threads` threads."""
    out = subprocess.run([build(), str(threads), str(mib)], capture_output=True, text=True, check=True).stdout
    r = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        r[key] = value if key == "int8_kernel" else float(value)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1 and petit's default)")
    ap.add_argument("--mib", type=int, default=1024, help="buffer size for the bandwidth test (default 1024)")
    a = ap.parse_args()
    if a.threads:
        counts = [int(t) for t in a.threads.split(",")]
    else:
        from petit.native import info
        counts = sorted({1, info()["default_threads"]})
    from bench_busy import cpu_facts
    print(cpu_facts())
    print("| threads | read GB/s | int8 GOPS | int8 kernel | int8 GOPS, 16-bit sums (q4_0 on AVX2) |")
    print("|---|---|---|---|---|")
    for t in counts:
        r = limits(t, a.mib)
        print(f"| {t} | {r['read_gbs']:.1f} | {r['int8_gops']:.0f} | {r['int8_kernel']} | "
              f"{r['int8_16_gops']:.0f} |")


if __name__ == "__main__":
    main()
