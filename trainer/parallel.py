"""Use several cores for one training step without BLAS oversubscription.

A step's batch is cut into ``grad_chunks`` pieces along B; each piece's forward/backward runs in a
worker thread (NumPy releases the GIL in BLAS calls and in ufunc loops over large arrays) and the
gradients are summed in chunk order. The loss of every chunk is normalised by the whole batch's count,
so the sum is the full-batch gradient, and because the chunking and the summation order depend only on
``grad_chunks`` -- not on how many threads run the chunks -- results are the same on 1 or 8 cores.

During training OpenBLAS's own thread pool is set to one thread: BLAS threads spinning on cores that
are busy (our other worker, or another program) make every small GEMM wait for a descheduled thread,
which measured 10-17x slower than single-threaded BLAS on a 2-core machine with one core taken. It also
makes the sums independent of the machine (OpenBLAS's results change with its thread count). The count
is set through OpenBLAS's C API with ctypes (what ``threadpoolctl`` does); if NumPy is not linked to an
OpenBLAS we can find, chunks run one after another and BLAS keeps its own threading.

On glibc, :func:`keep_freed_memory` also stops malloc from handing the step's ~100 MB of activations back
to the kernel after every step (mmap threshold and trim threshold raised with ``mallopt``); re-faulting
those pages cost ~19,000 page faults and about 30 % of a step's time.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import platform
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from trainer.model import loss_and_grads, loss_only

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")
_api = None


def _candidate_libraries():
    root = os.path.dirname(np.__file__)
    for pattern in ("../numpy.libs/*openblas*", ".libs/*openblas*", ".dylibs/*openblas*"):
        yield from sorted(glob.glob(os.path.join(root, pattern)))
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                yield from sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))


def _openblas():
    """(set_num_threads, get_num_threads) of the OpenBLAS NumPy uses, or None."""
    global _api
    if _api is None:
        _api = False
        for path in _candidate_libraries():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
            getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
            if setter is not None and getter is not None:
                setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                _api = (setter, getter)
                break
    return _api or None


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_malloc_tuned = False


def keep_freed_memory() -> bool:
    """glibc only, once per process: serve arrays up to 32 MB from the heap and keep up to 512 MB of freed
    heap instead of returning it to the kernel after each step. Returns True if applied."""
    global _malloc_tuned
    if not _malloc_tuned and sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        try:
            libc = ctypes.CDLL(None)
            _malloc_tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
                                 and libc.mallopt(_M_TRIM_THRESHOLD, 512 << 20))
        except (OSError, AttributeError):
            pass
    return _malloc_tuned


@contextlib.contextmanager
def single_threaded_blas():
    """Set OpenBLAS to one thread inside the block (restored after); yields True if that was possible."""
    api = _openblas()
    if api is None:
        yield False
        return
    setter, getter = api
    old = getter()
    setter(1)
    try:
        yield True
    finally:
        setter(old)


class StepRunner:
    """Runs the chunked forward/backward of a step (and validation batches) on a small thread pool.

    While it is open, OpenBLAS is single-threaded for the whole process (restored by :meth:`close`).

    Args:
        grad_chunks: Pieces the batch is cut into; fixes the arithmetic, hence the exact losses.
        threads: Worker threads (None: as many as chunks, at most the CPU count). Does not change results.
    """

    def __init__(self, grad_chunks: int, threads: int | None = None):
        self.grad_chunks = grad_chunks
        keep_freed_memory()
        self._stack = contextlib.ExitStack()
        want = threads if threads is not None else min(grad_chunks, os.cpu_count() or 1)
        # BLAS goes single-threaded whenever we can set it, even for one worker: then the numbers never
        # depend on the machine's thread count (OpenBLAS's sums do), and nothing spins on busy cores.
        controlled = self._stack.enter_context(single_threaded_blas())
        self.threads = max(1, want) if controlled else 1
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self._stack.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _map(self, fn, jobs):
        if self._pool is None:
            return [fn(*job) for job in jobs]
        return [f.result() for f in [self._pool.submit(fn, *job) for job in jobs]]

    def loss_and_grads(self, params, config, x, y, m):
        """Full-batch loss and gradients, computed chunk by chunk and summed in chunk order."""
        denom = float(m.sum()) if m is not None else float(y.size)
        parts = np.array_split(np.arange(len(x)), min(self.grad_chunks, len(x)))
        jobs = [(params, config, x[i], y[i], None if m is None else m[i], denom) for i in parts]
        results = self._map(lambda *a: loss_and_grads(*a[:5], denom=a[5]), jobs)
        loss, grads = results[0]
        for chunk_loss, chunk_grads in results[1:]:
            loss += chunk_loss
            for name, g in chunk_grads.items():
                grads[name] += g
        return loss, grads

    def losses(self, params, config, batches):
        """[(loss, weight)] for validation batches (x, y, m), in order."""
        def one(x, y, m):
            w = float(m.sum()) if m is not None else float(y.size)
            return (loss_only(params, config, x, y, m), w) if w else (0.0, 0.0)
        return self._map(one, list(batches))
