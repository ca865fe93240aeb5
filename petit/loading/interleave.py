"""Repacking a loaded model's q8_0 / q4_0 matrices for the CPU (kernels/interleave.c): their rows interleaved in
groups of 8, the layout the x86 kernels multiply fastest (one stream of weights, 8 rows summed in one register).

The values and the products are the same bit for bit; only the byte order changes. A matrix already in private
memory (quantized at load, or a file read with mmap=False) is rewritten in place; one that is a view of a mapped file
is copied into one block of anonymous memory on huge pages, and its file pages leave the resident set, so resident
memory stays the size of the weights. Files keep GGML's plain rows: `Model.tensors` hands the plain bytes out.
"""
import numpy as np

from petit.native import INTERLEAVED, anonymous_map, prefers_interleaved

ALIGN = 64


# The most bytes of a mapped file's q8_0 / q4_0 matrices a default load copies to interleave them. Past it (a 7B q8_0
# GGUF is 7.5 GB) the copy costs more than it gives: on the AVX2 Zen 3 it took 13.6-14.1 s of a 7B Q8_0 file's open
# against 1.5-1.8 s mapped as stored, for a decode that is bound by the memory either way (2.4-2.6 tok/s repacked,
# 1.9-2.3 as stored, 2 threads, a shared machine) and the same prefill (stored groups are interleaved as the
# prefill runs). A folder's matrices are quantized into private memory and interleaved in place, at no such cost.
REPACK_COPY_MAX = 2 << 30


def should_repack(repack: bool | None, copied_bytes: int = 0) -> bool:
    """repack None: when the active kernel path prefers the interleaved layout and the matrices to copy out of a
    mapped file (`copied_bytes`) come to at most REPACK_COPY_MAX; True / False: as asked."""
    if repack is not None:
        return bool(repack)
    return prefers_interleaved() and copied_bytes <= REPACK_COPY_MAX


def mapped_bytes(net) -> int:
    """The bytes of Decoder `net`'s q8_0 / q4_0 matrices that are read-only views (of a mapped file): what a repack
    would copy."""
    seen = {}
    for W in net.matrices():
        if W.dtype in INTERLEAVED and not W.interleaved and not W.raw.flags.writeable:
            seen[_address(W.raw)] = W.raw.nbytes
    return sum(seen.values())


def repack_matrices(net, tensors: dict, release=None) -> None:
    """Interleave the q8_0 / q4_0 matrices of Decoder `net` (those of at least 8 rows).

    Args:
        tensors: the source's name -> (dtype, shape, raw) record (petit convert writes it): a matrix rewritten in
            place gets its entry's raw replaced by a function giving its plain bytes.
        release: called with a tensor's name and a range of its rows once a copy of those mapped bytes is made,
            and with the name alone once all are copied (PetitFile.release).
    """
    names = {_address(raw): name for name, (_, _, raw) in tensors.items() if isinstance(raw, np.ndarray)}
    todo = [W for W in net.matrices() if W.dtype in INTERLEAVED and not W.interleaved and W.shape[0] >= 8]
    copies = [W for W in todo if not W.raw.flags.writeable]
    arena = anonymous_map(sum(_aligned(W.raw.nbytes) for W in copies)) if copies else None
    new, done, at, copied = {}, {}, 0, []      # done: a matrix two Weights view (the same bytes) is rewritten once
    for W in todo:
        key = _address(W.raw)
        if key in done:
            new[id(W)] = done[key]
            continue
        name = names.get(key)
        if W.raw.flags.writeable:
            done[key] = new[id(W)] = W.interleave()
            if name is not None:
                dtype, shape, _ = tensors[name]
                tensors[name] = (dtype, shape, done[key].stored)
        else:
            out = np.frombuffer(arena, np.uint8, W.raw.nbytes, at)
            at += _aligned(W.raw.nbytes)
            # the file's rows are let go as they are copied: never resident beside the copy, even the LM head
            let_go = None if release is None or name is None else (lambda r0, r1, n=name: release(n, (r0, r1)))
            done[key] = new[id(W)] = W.interleave(out, done=let_go)
            if let_go is not None:
                copied.append(name)
    # and again once all are copied: reading a matrix maps a few pages around it too (fault-around), its neighbours'
    for name in copied:
        release(name)
    net.replace_matrices(new)


def _address(a: np.ndarray) -> tuple[int, int]:
    return a.__array_interface__["data"][0], a.nbytes


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
