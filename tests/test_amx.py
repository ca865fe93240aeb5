"""Intel AMX (kernels/kern_amx.c): the AVX-512 path's prefill on the tiles.

No machine this is developed on runs AMX, so the kernel is held to the scalar path's bits in an emulated build
(the tile instructions as C functions with the SDM's definitions, the 512-bit float steps as two 256-bit halves in
the same order: kernels/amx_selftest.c), the real build is checked to assemble to the tile instructions, and on a
machine with AMX the start-up check runs the real instructions before anything uses them (cpu.c). These tests also
say whether this machine ran AMX in-process.
"""
import os
import re
import subprocess
import sys

import pytest

from petit import native

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kernels_portable import FLAGS, SOURCES, _need  # noqa: E402

X86_LINUX = sys.platform.startswith("linux") and os.uname().machine == "x86_64"
pytestmark = pytest.mark.skipif(not X86_LINUX, reason="AMX is used by Linux x86-64 builds only")


def _cpu_has_amx() -> bool:
    with open("/proc/cpuinfo") as f:
        flags = next((line for line in f if line.startswith("flags")), "").split()
    return "amx_tile" in flags and "amx_int8" in flags


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    (cc,) = _need("gcc")
    out = str(tmp_path_factory.mktemp("amx") / "amx_selftest")
    sources = ["amx_selftest.c", *(s for s in SOURCES if s != "selftest.c")]
    cmd = [cc, *FLAGS, "-DPT_AMX_EMULATE", "-I", KERNELS, *(os.path.join(KERNELS, s) for s in sources), "-o", out,
           "-lm", "-lpthread"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stderr == "", p.stderr[-4000:]
    return out


def test_the_amx_kernel_gives_the_scalar_paths_bits_in_the_emulated_build(emulated):
    p = subprocess.run([emulated], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "ok   start-up check\n" in p.stdout
    # both types, accumulating or not, over odd K (1-33 blocks), rows with an odd group and plain rows after the
    # pairs, a first pair past row 0, tokens after the whole tiles, an output stride wider than the rows
    cases = re.findall(r"^ok   (q8_0|q4_0) rows (\d+) K (\d+) tokens (\d+)", p.stdout, re.M)
    assert len(cases) == 28 and {c[0] for c in cases} == {"q8_0", "q4_0"}
    assert {int(c[2]) for c in cases} >= {32, 96, 160, 544, 1056}
    assert p.stdout.rstrip().endswith("29 passed, 0 failed")


def test_the_start_up_check_catches_a_wrong_amx_result(emulated):
    env = dict(os.environ, PETIT_TEST_BREAK_AMX="1")
    p = subprocess.run([emulated], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1
    assert ("FAIL start-up check: the AMX kernel's interleaved q8_0 matmul disagrees with the scalar path (K 96, row 3, "
            "token 1: 5.81514978 where 4.81514978 is right)\n") in p.stdout


def test_the_real_amx_build_assembles_to_the_tile_instructions(tmp_path):
    (cc, objdump) = _need("gcc", "objdump")
    obj = str(tmp_path / "kern_amx.o")
    p = subprocess.run([cc, *FLAGS, "-O3", "-I", KERNELS, "-c", os.path.join(KERNELS, "kern_amx.c"), "-o", obj],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stderr == "", p.stderr[-3000:]
    asm = subprocess.run([objdump, "-d", "--no-show-raw-insn", obj], capture_output=True, text=True).stdout
    for insn in ("ldtilecfg", "tileloadd", "tilezero", "tdpbssd", "tdpbsud", "tilestored", "tilerelease"):
        assert re.search(rf"\s{insn}\b", asm), insn
    # the configuration is filled in memory before ldtilecfg reads it (gcc 12's _tile_loadconfig let it drop those
    # stores): the palette byte 1 is stored at the address ldtilecfg loads
    cfg = re.search(r"ldtilecfg\s+(-?0x[0-9a-f]+)\((%r[bs]p)\)", asm)
    assert cfg, "ldtilecfg reads its configuration from the stack frame"
    body = asm[:cfg.start()].rsplit("<pt_amx_rows>:", 1)[-1]
    assert re.search(rf"movb\s+\$0x1,{cfg.group(1)}\({re.escape(cfg.group(2))}\)", body), body[-1500:]


def test_info_says_whether_amx_runs_and_why_not():
    status = native.info()["amx"]
    if native.info()["isa"] == "avx512" and _cpu_has_amx():
        assert status == "on", status
        print("AMX ran in-process: on")
    else:
        why = ("off: this CPU has no AMX-TILE / AMX-INT8" if not _cpu_has_amx()
               else f"off: AMX runs with the avx512 path, and the {native.info()['isa']} path is active")
        assert status == why
        print(f"AMX not run in-process here: {status}")


def test_petit_amx_0_turns_it_off():
    code = "from petit import native; print(native.info()['amx'])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PETIT_AMX="0"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "off: turned off by PETIT_AMX=0"


def test_petit_info_says_whether_amx_runs():
    p = subprocess.run([sys.executable, "-m", "petit", "info"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    status = native.info()["amx"]
    tail = "" if status == "on" else "   (Intel AMX tiles for prefill; PETIT_AMX=0 turns them off)"
    assert f"\namx:            {status}{tail}\n" in p.stdout
