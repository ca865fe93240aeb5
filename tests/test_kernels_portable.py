"""The kernels on the systems this machine can stand in for: kernels/selftest.c (no Python) built with gcc and with
clang (macOS's compiler), cross-built for Windows with MinGW-w64 and run under Wine (the Win32 thread pool, cpuid,
the AVX2 path), and cross-built for ARM64 and run under QEMU (the NEON path and the pool on a weakly ordered CPU, as
on an Apple Silicon Mac). Each build treats warnings as errors and refuses variable-length arrays, which MSVC lacks.

A missing toolchain skips its test on a developer's machine; CI installs them all and sets PETIT_REQUIRE_CROSS=1,
which turns those skips into failures.
"""
import ast
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")


def _build_sources() -> list[str]:
    """kernels/build.py's SOURCES, the C files the extension compiles (read, not imported: importing it runs cffi)."""
    tree = ast.parse(open(os.path.join(KERNELS, "build.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SOURCES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("kernels/build.py has no SOURCES list")


# one list with the extension's build: a C file added there is compiled here too (selftest.c is this test's main)
SOURCES = ["selftest.c", *_build_sources()]
FLAGS = ["-O2", "-std=gnu11", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wextra", "-Werror", "-Wvla",
         "-Wno-unused-function", "-Wno-unused-parameter"]
REQUIRED = os.environ.get("PETIT_REQUIRE_CROSS") == "1"
GGUF_TYPES = ["Q4_K", "Q5_K", "Q6_K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "IQ4_XS"]


def _need(*tools: str) -> list[str]:
    """The tools' paths; a skip (a failure under PETIT_REQUIRE_CROSS=1) when one is missing."""
    found = [shutil.which(t) or (t if os.path.isabs(t) and os.access(t, os.X_OK) else None) for t in tools]
    missing = [t for t, f in zip(tools, found) if f is None]
    if missing:
        (pytest.fail if REQUIRED else pytest.skip)(f"not installed: {', '.join(missing)}")
    return found


def _build(cc: str, out: str, extra: list[str]) -> None:
    cmd = [cc, *FLAGS, "-I", KERNELS, *(os.path.join(KERNELS, s) for s in SOURCES), "-o", out, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{os.path.basename(cc)} failed:\n{p.stderr[-4000:]}"
    assert p.stderr == "", f"{os.path.basename(cc)} warned:\n{p.stderr[-4000:]}"


def _run(cmd: list[str], env: dict | None = None) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)
    out = p.stdout
    failed = [line for line in out.splitlines() if line.startswith("FAIL") or line.startswith("     ")]
    assert p.returncode == 0, f"selftest exited {p.returncode}:\n" + "\n".join(failed) + f"\n{out[-2000:]}{p.stderr[-2000:]}"
    closing = re.search(r"^(\d+) passed, (\d+) failed$", out, re.M)
    assert closing, out[-2000:]
    assert closing.group(2) == "0"
    return out


def _expect_paths(out: str, paths: list[str]) -> None:
    """Every check of each path ran: 7 dtypes (q8_0 and q4_0 also interleaved) x 5 shapes + 3 attentions, on 1, 2
    and 3 threads, the pool test, the norms and activations (each path compiles its own copy), and each SIMD path's
    GGUF block types bit for bit against the scalar path."""
    for isa in paths:
        assert len(re.findall(rf"^ok   {isa} \d threads?: ", out, re.M)) == 3 * (7 * 5 + 3), isa
        assert re.search(rf"^ok   {isa}: 3000 matmuls in a row", out, re.M), isa
        assert re.search(rf"^ok   {isa}: a NaN activation gives NaN outputs", out, re.M), isa
        assert re.search(rf"^ok   {isa}: LayerNorm, RMSNorm, SiLU and GELU", out, re.M), isa
        if isa != "scalar":     # each SIMD path's GGUF kernels against the scalar reference, bit for bit
            for gguf in GGUF_TYPES:
                assert re.search(rf"^ok   {isa}: GGUF {gguf} rows equal the scalar path's bit for bit \(\d+ calls\)$",
                                 out, re.M), (isa, gguf)


def _native_paths() -> list[str]:
    from petit.native import ISAS, lib
    return [name if name != "avx512" else "avx512vnni" for name, code in ISAS.items() if lib.pt_isa_supported(code)]


def test_selftest_gcc(tmp_path):
    (cc,) = _need("gcc")
    exe = str(tmp_path / "selftest")
    _build(cc, exe, ["-lm", "-lpthread"])
    out = _run([exe])
    assert "FAIL" not in out
    _expect_paths(out, _native_paths())


def test_selftest_clang(tmp_path):
    """clang is what builds the kernels on macOS: its target attributes, not GCC's pragma, switch on AVX2."""
    (cc,) = _need("clang")
    exe = str(tmp_path / "selftest")
    _build(cc, exe, ["-lm", "-lpthread"])
    _expect_paths(_run([exe]), _native_paths())


def _wine() -> str:
    for name in ("wine64", "/usr/lib/wine/wine64", "wine"):
        path = shutil.which(name) or (name if os.path.isabs(name) and os.access(name, os.X_OK) else None)
        if path:
            return path
    (pytest.fail if REQUIRED else pytest.skip)("not installed: wine64")


def test_selftest_windows_under_wine(tmp_path):
    """The Win32 side of kernels/portable.h: SRW locks, condition variables, _beginthreadex, the affinity mask."""
    (cc,) = _need("x86_64-w64-mingw32-gcc")
    wine = _wine()
    exe = str(tmp_path / "selftest.exe")
    _build(cc, exe, ["-static"])
    env = dict(os.environ, WINEPREFIX=str(tmp_path / "wine"), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    out = _run([wine, exe], env)
    # the Windows build detects this CPU as Linux does and runs the same paths
    assert re.search(r"^cpus: [1-9]", out, re.M)
    _expect_paths(out, _native_paths())


ARM64_BUILDS = {
    "gcc-armv8": ("aarch64-linux-gnu-gcc", ["-march=armv8-a"]),
    "gcc-dotprod": ("aarch64-linux-gnu-gcc", ["-march=armv8.2-a+dotprod"]),
    # the nearest this machine gets to Apple's compiler on an M1: clang, tuned and featured for it
    "clang-apple-m1": ("clang", ["--target=aarch64-linux-gnu", "-mcpu=apple-m1", "--ld-path=/usr/bin/aarch64-linux-gnu-ld"]),
}


@pytest.mark.parametrize("build", list(ARM64_BUILDS))
def test_selftest_arm64_under_qemu(tmp_path, build):
    """No x86 paths compiled: the NEON path (widening multiplies on plain ARMv8, sdot with the dot-product extension
    every Apple Silicon chip has), the scalar path, and the POSIX pool on ARM's weaker memory ordering."""
    compiler, flags = ARM64_BUILDS[build]
    cc, _, qemu = _need(compiler, "aarch64-linux-gnu-ld", "qemu-aarch64")
    exe = str(tmp_path / "selftest-arm64")
    _build(cc, exe, [*flags, "-static", "-lm", "-lpthread"])
    out = _run([qemu, "-cpu", "max", exe])
    assert f"cpu features: neon{'' if build == 'gcc-armv8' else ',dotprod'}\n" in out
    assert "skip avx2: this CPU (or build) has no such path" in out
    _expect_paths(out, ["scalar", "neon"])


RACE_C = r"""
/* pt_init switches the path while this thread runs calls that take no lock (the norms, the activations, the
 * activation quantizer): the active table must be read atomically, once per call */
#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
static atomic_int stop;
static int other;
static void *switcher(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) pt_init(1, i % 2 ? other : PT_ISA_SCALAR);
    atomic_store(&stop, 1);
    return NULL;
}
int main(void) {
    float x[64], w[64], y[64], d[2];
    int8_t q[64];
    int32_t s[2];
    for (int i = 0; i < 64; i++) { x[i] = (float)i; w[i] = 1.0f; }
    other = pt_isa_supported(PT_ISA_AVX2) ? PT_ISA_AVX2 : pt_isa_supported(PT_ISA_NEON) ? PT_ISA_NEON : PT_ISA_SCALAR;
    pt_init(1, PT_ISA_SCALAR);
    pthread_t t;
    pthread_create(&t, NULL, switcher, NULL);
    while (!atomic_load(&stop)) {
        pt_norm(1, x, w, w, 1e-5f, 1, 64, 1, y);
        pt_bias_act(y, w, 1, 64, 3);
        pt_glu(2, x, w, 64, y);
        pt_quantize_act(x, 1, 64, q, d, s);
    }
    pthread_join(t, NULL);
    printf("done\n");
    return 0;
}
"""


def test_switching_the_path_while_calls_run_is_race_free(tmp_path):
    """The active table was a plain pointer that pt_init wrote under its lock while calls that take no lock read
    it: a data race, which ThreadSanitizer reports."""
    (cc,) = _need("gcc")
    (tmp_path / "race.c").write_text(RACE_C)
    exe = str(tmp_path / "race")
    sources = [str(tmp_path / "race.c"), *(os.path.join(KERNELS, s) for s in SOURCES if s != "selftest.c")]
    p = subprocess.run([cc, "-O1", "-g", "-std=gnu11", "-fsanitize=thread", "-I", KERNELS, *sources, "-o", exe,
                        "-lm", "-lpthread"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0 and "tsan" in p.stderr:
        (pytest.fail if REQUIRED else pytest.skip)(f"no ThreadSanitizer runtime: {p.stderr[-300:]}")
    assert p.returncode == 0, p.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == "done\n" and "ThreadSanitizer" not in r.stderr, r.stderr[-4000:]
