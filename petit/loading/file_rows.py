"""An untied token embedding's rows read from its file (pread) instead of through the file's mapping (issue 31).

A lookup through the mapping maps the page cache's whole folio around the row into the process: 2 MiB where Linux
holds the file in large folios, as 6.x kernels do after a sequential read. A 512-token prompt of a 7B model then
brought ~320 MiB of its 357 MiB embedding into the resident set for ~1 MiB of rows (measured on Qwen2.5-7B's
shape at Q5_K_M), which put the peak RSS over the file's size + KV cache + 150 MiB. kernels/file_rows.c reads the
rows with pread instead: the same bytes, so the same values, and nothing of the table mapped.

Only an embedding that is looked up and nothing else: a tied one is the LM head, which every step reads whole
through the mapping anyway, and interleaved rows are not stored as in the file.
"""
import mmap
import os
import weakref

import numpy as np

from petit.native import ffi, lib


def read_embedding_from_file(net, source) -> bool:
    """Have Decoder `net`'s token embedding read by pread from `source`'s file (an open PetitFile / GGUFFile whose
    weights map into it); True when it now is. False, and nothing changes, where it cannot be (no such embedding,
    the table tied to the head or copied into memory, the file not mapped, no pread on this system)."""
    W, mm, path = getattr(net, "embed", None), getattr(source, "_mm", None), getattr(source, "path", None)
    if W is None or W.interleaved or W.raw.flags.writeable or not isinstance(mm, mmap.mmap) or path is None:
        return False
    at = W.raw.__array_interface__["data"][0]
    if any(M.raw.__array_interface__["data"][0] == at for M in net.matrices() if M is not W):
        return False                                             # tied: the LM head reads it whole
    offset = at - np.frombuffer(mm, np.uint8, 1).__array_interface__["data"][0]
    if offset < 0 or offset + W.raw.nbytes > len(mm):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:          # the file at `path` must still be the one mapped (not replaced since): its size and first page
        same = os.fstat(fd).st_size == len(mm) and os.pread(fd, 4096, 0) == mm[:4096]
    except (OSError, AttributeError):                            # AttributeError: no os.pread (Windows)
        same = False
    if not same or lib.pt_file_rows_add(W._buf, W.raw.nbytes, fd, offset) != 0:
        os.close(fd)
        return False
    weakref.finalize(W, _drop, int(ffi.cast("uintptr_t", W._buf)))      # the fd closes with the Weight
    return True


def _drop(address: int) -> None:
    lib.pt_file_rows_drop(ffi.cast("void *", address))
