"""cffi build script: compiles the kernels into the extension module `petit._kernels` (out-of-line API mode).

Run by setuptools at `pip install` / `pip install -e .` time through `cffi_modules` in setup.py; after editing a C
file, run `pip install -e .` again to rebuild.
"""
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["cpu.c", "parallel.c", "matmul.c", "attention.c", "layer_ops.c", "plan.c", "moe.c", "mla.c", "ssm.c",
           "deltanet.c", "ssd.c", "selscan.c", "rglru.c", "rwkv.c",
           "altup.c",   # issue 30, the gemma group
           "dsa.c",          # issue 30, the mla group
           "moa.c",          # issue 30, the jetmoe group
           "lora.c",         # issue 33: the transposed product of LoRA's backward
           "hc.c", "compress.c", "dsv4_attn.c", "dsv4_plan.c",   # issue 30, the dsv4 group
           "kvshift.c",      # issue 32, context shift
           "doge.c",         # issue 36, the fam36d group: SmallDoge
           "mm3.c",          # issue 36, the fam36i group: MiniMax-M3's block-sparse attention
           "mlstm.c",        # issue 36, the fam36n group: xLSTM's mLSTM layer
           "fam36g.c",       # issue 36, the fam36g group: Laguna, ZAYA
           "fam36l.c",       # issue 36, the fam36l group: Inkling
           "strings.c",      # issue 31: GGUF string arrays walked in C (the open time)
           "file_rows.c",    # issue 31: an untied embedding's rows by pread (peak RSS)
           "qsa.c", "q4x_ple.c",     # issue 36, the q4exp group: Qwen4-Exp's QSA indexer and n-gram PLE
           "pool.c", "quant.c", "quant_search.c", "interleave.c", "gguf_quants.c", "checksum.c", "pathcheck.c",
           "kern_scalar.c", "kern_avx2.c", "kern_avxvnni.c", "kern_avx512.c", "kern_neon.c", "kern_amx.c"]


MSVC = sys.platform == "win32"   # setuptools builds with MSVC (Visual Studio Build Tools) on Windows
# MSVC: C11 with its C11 atomics (VS 2022 17.5+), no arch flag (the AVX2 / AVX-512 files use intrinsics only, and
# the scalar code must stay runnable on any x86-64), unknown `#pragma omp simd` silenced
MSVC_FLAGS = ["/O2", "/std:c11", "/experimental:c11atomics", "/wd4068", "/wd4244", "/wd4267"]
GCC_FLAGS = ["-O3", "-std=gnu11", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wno-unused-function"]


def _posix_cc() -> list[str]:
    """The compiler command setuptools will use: $CC, else the one Python was built with."""
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def _accepts(flag: str) -> bool:
    """Whether the C compiler takes `flag` (Apple's clang, for one, has no OpenMP flags)."""
    try:
        r = subprocess.run(_posix_cc() + [flag, "-Werror", "-x", "c", "-c", "-o", os.devnull, "-"],
                           input=b"int petit_probe;\n", capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _compile_args() -> list[str]:
    if MSVC:
        return MSVC_FLAGS
    # `#pragma omp simd` vectorises the generic ops' loops; without the flag they still compile, as plain loops
    return GCC_FLAGS + (["-fopenmp-simd"] if _accepts("-fopenmp-simd") else [])


def _check_compiler() -> None:
    """Fail early, with a message a user can act on, when there is no C compiler."""
    if MSVC:
        return   # setuptools finds Visual Studio itself and names what is missing
    cc = _posix_cc()[0]
    if shutil.which(cc) is None and shutil.which("gcc") is None and shutil.which("clang") is None:
        sys.stderr.write(
            "\nerror: petit needs a C compiler to build its kernels, and none was found "
            f"(looked for '{cc}', gcc, clang).\n"
            "Install one (Debian/Ubuntu: 'apt-get install build-essential'; macOS: 'xcode-select --install') "
            "and run pip again.\n\n")
        raise SystemExit(1)
    headers = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(headers, "Python.h")):
        # a fresh Debian: without python3-dev the compiler stops on "pyconfig.h: No such file or directory"
        sys.stderr.write(
            f"\nerror: petit builds its kernels against Python's C headers, and {headers}/Python.h is missing.\n"
            f"Install them (Debian/Ubuntu: 'apt-get install python3-dev') and run pip again.\n\n")
        raise SystemExit(1)


with open(os.path.join(HERE, "api.h")) as f:
    API = f.read()

_check_compiler()
ffibuilder = FFI()
ffibuilder.cdef(API)
ffibuilder.set_source(
    "petit._kernels",
    '#include "internal.h"\n',   # which includes api.h
    sources=[os.path.relpath(os.path.join(HERE, s)) for s in SOURCES],
    include_dirs=[os.path.relpath(HERE)],
    # the headers every source includes: an edit to one of them rebuilds the kernels (build_ext compares dates)
    depends=sorted(os.path.relpath(os.path.join(HERE, h)) for h in os.listdir(HERE) if h.endswith(".h")),
    extra_compile_args=_compile_args(),
    libraries=[] if MSVC else ["m", "pthread"],
)
