"""cffi build script: compiles the kernels into the extension module `petit._kernels` (out-of-line API mode).

Run by setuptools at `pip install` / `pip install -e .` time through `cffi_modules` in setup.py; after editing a C
file, run `pip install -e .` again to rebuild.
"""
import os
import re
import shutil
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["dispatch.c", "ops.c", "pool.c", "quant.c", "kern_scalar.c", "kern_avx2.c", "kern_avx512.c"]


def _check_compiler() -> None:
    """Fail early, with a message a user can act on, when there is no C compiler."""
    cc = os.environ.get("CC", "cc").split()[0]
    if shutil.which(cc) is None and shutil.which("gcc") is None and shutil.which("clang") is None:
        sys.stderr.write(
            "\nerror: petit needs a C compiler to build its kernels, and none was found "
            f"(looked for '{cc}', gcc, clang).\n"
            "Install one (Debian/Ubuntu: 'apt-get install build-essential'; macOS: 'xcode-select --install') "
            "and run pip again.\n\n")
        raise SystemExit(1)


with open(os.path.join(HERE, "api.h")) as f:
    API = f.read()

ffibuilder = FFI()
ffibuilder.cdef(API)
# The C side gets pt_tensor from internal.h and the prototypes from api.h (minus its copy of the typedef).
_PROTOTYPES = re.sub(r"typedef struct \{.*?\} pt_tensor;", "", API, flags=re.S)
ffibuilder.set_source(
    "petit._kernels",
    '#include "internal.h"\n' + _PROTOTYPES,
    sources=[os.path.relpath(os.path.join(HERE, s)) for s in SOURCES],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=["-O3", "-std=gnu11", "-fopenmp-simd", "-fno-math-errno", "-Wall", "-Wno-unused-function"],
    libraries=["m", "pthread"],
)

_check_compiler()
