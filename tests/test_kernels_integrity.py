"""The kernels' part in refusing damaged or impossible weights, and in staying consistent when reconfigured:
the "pt64" checksum (every thread count and the plain reference give the NumPy oracle's value; any single changed
bit or moved block changes it), quantization refusing NaN and infinity, and a thread pool that fails to start
leaving the path and the pool as they were."""
import numpy as np
import pytest

from petit import native as K
from petit.native import lib

M64 = (1 << 64) - 1
KEY = (0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5,
       0xD6E8FEB86659FD93, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x9FB21C651E98DF25)
STEP = 0x9E3779B97F4A7C15


@pytest.fixture(autouse=True)
def restore_default_path():
    yield
    K.configure()


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD & M64
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 & M64
    return h ^ (h >> 33)


def pt64_oracle(data: bytes) -> int:
    """The checksum as docs/petit-format.md defines it, in NumPy (uint64 arithmetic wraps as in C)."""
    n = len(data)
    padded = np.frombuffer(data + bytes(-n % 64), "<u8").reshape(-1, 8)
    s = np.arange(len(padded), dtype=np.uint64)[:, None]
    x = padded ^ (np.array(KEY, np.uint64)[None, :] + s * np.uint64(STEP))
    with np.errstate(over="ignore"):
        terms = padded + (x & np.uint64(0xFFFFFFFF)) * (x >> np.uint64(32))
    acc = [int(v) for v in terms.sum(axis=0, dtype=np.uint64)] if len(padded) else [0] * 8
    h = _fmix64(n ^ 0x5045544954363421)
    for a in acc:
        h = _fmix64(h ^ a)
    return h


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_checksum_matches_the_reference_and_the_oracle_on_any_thread_count(threads):
    K.configure(threads=threads)
    data = np.random.default_rng(3).integers(0, 256, 3 * 524288 + 45, dtype=np.uint8).tobytes()
    for n in (0, 1, 7, 8, 63, 64, 65, 1000, 524288 * 2 + 64, len(data)):
        want = pt64_oracle(data[:n])
        assert K.checksum(data[:n]) == want, n
        assert K.checksum_ref(data[:n]) == want, n


def test_checksum_values_are_fixed():
    """Files carry these numbers: a change of the definition would make every written file fail its check."""
    for data, value in ((b"", 0x9D4F6A9A0356AF3E), (b"petit", 0x1ADC9EE74C22957C),
                        (bytes(range(256)), 0xB7F38504C9F6C504)):
        assert K.checksum(data) == K.checksum_ref(data) == pt64_oracle(data) == value


def test_checksum_sees_every_single_bit_flip_and_moved_blocks():
    data = bytearray(np.random.default_rng(4).integers(0, 256, 4096 + 24, dtype=np.uint8).tobytes())
    whole = K.checksum(bytes(data))
    seen = set()
    for i in range(len(data)):
        for bit in range(8):
            data[i] ^= 1 << bit
            seen.add(K.checksum(bytes(data)))
            data[i] ^= 1 << bit
    assert len(seen) == 8 * len(data) and whole not in seen
    swapped = data[64:128] + data[:64] + data[128:]
    zeroed = data[:1024] + bytes(512) + data[1536:]
    assert len({whole, K.checksum(bytes(swapped)), K.checksum(bytes(zeroed)), K.checksum(bytes(data[:-1]))}) == 4


@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_quantize_refuses_nan_and_infinity_naming_the_first(dtype, bad):
    """q8_0 / q4_0 turned NaN and infinity into zeros or block minima (a float-to-int cast of NaN is undefined
    behaviour in C); the matrix is big enough to be split across the threads."""
    K.configure(threads=2)
    x = np.random.default_rng(5).standard_normal((301, 544)).astype(np.float32)
    x[250, 3] = bad
    x[200, 77] = bad
    with pytest.raises(K.NonFiniteError) as e:
        K.quantize(x, dtype)
    assert (e.value.row, e.value.col) == (200, 77)
    assert str(e.value) == (f"the weight at [200, 77] is {float(bad)} (not a finite number); it cannot be stored "
                            f"as {dtype}: the checkpoint is damaged or was saved after training diverged")
    x[200, 77] = x[250, 3] = 1.0
    assert K.quantize(x, dtype).shape == (301, 544 // 32 * (34 if dtype == "q8_0" else 18))


def test_f16_and_bf16_keep_infinity_as_infinity():
    x = np.array([[np.inf, -np.inf] + [1.0] * 30], np.float32)
    assert list(K.dequantize(K.quantize(x, "f16"), "f16", x.shape)[0, :3]) == [np.inf, -np.inf, 1.0]


def test_a_pool_that_fails_to_start_leaves_the_path_and_the_pool_as_they_were(monkeypatch):
    """configure() switched the path before starting the threads, and a pool that failed half-way kept the
    threads that had started: a failed call left the kernels changed. PETIT_TEST_POOL_FAIL=N makes a pool of N
    threads fail at its last thread."""
    other = "avx2" if lib.pt_isa_supported(1) else "scalar"
    K.configure(threads=2, isa="scalar")
    monkeypatch.setenv("PETIT_TEST_POOL_FAIL", "3")
    with pytest.raises(ValueError) as e:
        K.configure(threads=3, isa=other)
    assert str(e.value) == (f"could not start the kernels (path '{other}', threads 3), error -2; still running "
                            f"path 'scalar' on 2 thread(s)")
    assert K.info()["isa"] == "scalar" and K.info()["threads"] == 2
    rng = np.random.default_rng(6)
    w, x = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((4, 256)).astype(np.float32)
    W = K.Weight.from_float(w, "f32")
    np.testing.assert_allclose(K.matmul(W, x), x @ w.T, rtol=1e-5, atol=1e-4)    # the restored pool runs
    monkeypatch.delenv("PETIT_TEST_POOL_FAIL")
    K.configure(threads=3, isa=other)
    assert K.info()["isa"] == other and K.info()["threads"] == 3


STALLED_CHILD = r"""
import numpy as np
from petit import native as K
K.configure(threads=int(__import__("sys").argv[1]))
rng = np.random.default_rng(7)
x = rng.standard_normal((3, 1024)).astype(np.float32)
out = []
for dtype in ("q8_0", "q4_0", "f32"):
    W = K.Weight.from_float(rng.standard_normal((4099, 1024)).astype(np.float32), dtype)
    for _ in range(200):            # many jobs in a row: each must end without the workers
        y = K.matmul(W, x)
    out.append(y)
np.save(__import__("sys").argv[2], np.concatenate([o.ravel() for o in out]))
print("threads", K.info()["threads"])
"""


def test_jobs_finish_without_workers_that_never_get_a_core(tmp_path):
    """A worker that lost its core to another process (a browser on a laptop) before it claimed any chunk must not
    hold the job up: the other threads take its share and the job ends when its chunks are done. Before, the caller
    waited until every worker had reported in, so each of the ~250 hand-offs of a decoded token waited for the
    descheduled thread, and 2 threads on a busy machine decoded 2-37x slower than 1. PETIT_TEST_POOL_STALL=1 keeps
    every worker away from jobs; the products are still exact (the same bits as on one thread) and nothing hangs,
    through the pool's switch to running jobs on the caller alone once it sees it runs nearly every chunk itself."""
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("PETIT_THREADS", None)
    results = {}
    for threads, stall in ((1, "0"), (2, "1")):
        path = str(tmp_path / f"y{threads}.npy")
        p = subprocess.run([sys.executable, "-c", STALLED_CHILD, str(threads), path], capture_output=True, text=True,
                           timeout=300, env=dict(env, PETIT_TEST_POOL_STALL=stall))
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.strip() == f"threads {threads}"
        results[threads] = np.load(path)
    assert np.array_equal(results[1], results[2])


def _lscpu_cores(cpus: set[int]) -> int:
    """The distinct (socket, core) pairs among `cpus`, as util-linux's lscpu reads them from the kernel."""
    import shutil
    import subprocess
    if not shutil.which("lscpu"):
        pytest.skip("lscpu (util-linux) is not installed")
    rows = subprocess.run(["lscpu", "-p=CPU,CORE,SOCKET"], capture_output=True, text=True, check=True).stdout
    pairs = {(r.split(",")[2], r.split(",")[1]) for r in rows.splitlines()
             if r and not r.startswith("#") and int(r.split(",")[0]) in cpus}
    return len(pairs)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_getaffinity"), reason="Linux: CPU affinity and lscpu")
def test_the_default_thread_count_is_one_per_core_the_process_may_use():
    """Two hardware threads of one core share its multiply units: the default is one thread per physical core among
    the CPUs this process may run on (taskset, a container's limit), not one per logical CPU."""
    import os
    import subprocess
    import sys
    if os.path.exists("/sys/devices/cpu_core/cpus"):
        pytest.skip("a hybrid CPU: the default also leaves out its efficiency cores")
    assert lib.pt_default_threads() == _lscpu_cores(os.sched_getaffinity(0))
    one = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{one}}}); from petit.native import info; "
            "print(info()['default_threads'], info()['threads'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "PETIT_THREADS"})
    assert p.stdout.split() == ["1", "1"], p.stderr[-2000:]


def test_every_path_this_cpu_runs_passes_the_start_up_check():
    """Each SIMD path is compared with the scalar one before it is used (kernels/pathcheck.c): on this machine every
    path it can run agrees, so nothing is set aside and no warning is given."""
    for name in K.info()["supported"]:
        K.configure(isa=name)
        assert (K.info()["isa"], K.info()["path_warning"]) == (name, "")


# (path broken, its kernel table's name, the path the check falls back to) for each SIMD path this CPU runs
_VNNI = lib.pt_isa_supported(K.ISAS["avxvnni"])
_BREAKABLE = [(isa, table, fallback) for isa, table, fallback in
              [("avx512", "avx512vnni", "avxvnni" if _VNNI else "avx2"), ("avxvnni", "avxvnni", "avx2"),
               ("avx2", "avx2", "scalar")] if lib.pt_isa_supported(K.ISAS[isa])]


@pytest.mark.skipif(not _BREAKABLE, reason="needs an x86 SIMD path to break")
@pytest.mark.parametrize("isa,table,fallback", _BREAKABLE)
def test_a_path_that_disagrees_with_the_scalar_one_is_set_aside_with_a_warning(isa, table, fallback):
    """A path nobody could run where it was written (AVX-512 tested only on an AVX2 laptop) must not give wrong
    answers where it does run: the start-up check finds it disagreeing and the next path down runs, and the user is
    told which kernel disagreed and by how much. PETIT_TEST_BREAK_PATH=<path> makes the check see a wrong q8_0
    product from that path (each path this CPU runs in turn: the best one is what `petit info` starts on)."""
    import os
    import re
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("PETIT_ISA", "PETIT_THREADS")}
    env["PETIT_TEST_BREAK_PATH"] = table
    best = next(p for p in ("avx512", "avxvnni", "avx2") if lib.pt_isa_supported(K.ISAS[p]))
    if isa != best:
        env["PETIT_ISA"] = isa
    p = subprocess.run([sys.executable, "-m", "petit.cli", "info"], capture_output=True, text=True, timeout=120,
                       env=env)
    # the allowed error is the check's tolerance times the size of that product, sum |w| |x| (its random inputs)
    m = re.fullmatch(rf"petit: warning: (the {table} path's q8_0 matmul disagrees with the scalar path \(error 1 "
                     rf"where 0\.00\d+ is allowed\): using the {fallback} path instead)\n", p.stderr)
    assert p.returncode == 0 and m, p.stderr
    why = m.group(1)
    assert f"chosen path:    {fallback}" in p.stdout
    assert f"path check:     {why}\n" in p.stdout
    # asked for by name, it is set aside all the same
    p = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c",
                        "from petit import native"], capture_output=True, text=True, timeout=120,
                       env=dict(env, PETIT_ISA=isa))
    assert p.returncode != 0 and f"RuntimeWarning: {why}" in p.stderr


POOL_STATS_CHILD = r"""
import numpy as np
from petit import native as K
K.configure(threads=2)
rng = np.random.default_rng(3)
W = K.Weight.from_float(rng.standard_normal((4099, 1024)).astype(np.float32), "q8_0")
x = rng.standard_normal((3, 1024)).astype(np.float32)
before = K.pool_stats()
for _ in range(2600):
    K.matmul(W, x)
after = K.pool_stats()
K.configure(threads=1)
K.configure(threads=2)
fresh = K.pool_stats()
K.configure(threads=1)
for _ in range(10):
    K.matmul(W, x)
print(before["jobs_pooled"] + before["jobs_alone"] > 0)
print(after["jobs_pooled"] + after["jobs_alone"] - before["jobs_pooled"] - before["jobs_alone"])
print(after["seconds_pooled"] + after["seconds_alone"] > before["seconds_pooled"] + before["seconds_alone"])
print(after["probes"] >= after["probes_cut"] >= 0, after["probes"] >= 1)
print(fresh == K.pool_stats() == dict.fromkeys(fresh, 0) | {"seconds_pooled": 0.0, "seconds_alone": 0.0})
"""


def test_pool_stats_count_every_job_the_pool_was_handed():
    """bench_busy.py prints how many jobs the pool ran on the caller alone; the counts must be every job handed to
    a pool of 2 (a [4099, 1024] q8_0 matmul of 3 tokens is one job, 12.6 M multiply-adds, above the hand-off size),
    reset when the pool restarts, and left alone on one thread (which never hands anything off). After 2,600 jobs
    the pool has probed the other way at least once (the first probe comes after 4 windows of at most 512 jobs)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("PETIT_THREADS", "PETIT_TEST_POOL_STALL")}
    p = subprocess.run([sys.executable, "-c", POOL_STATS_CHILD], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split("\n")[:5] == ["True", "2600", "True", "True True", "True"]
