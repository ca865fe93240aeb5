"""Repacking a loaded model's q8_0 / q4_0 matrices for the CPU (kernels/interleave.c): their rows interleaved in
groups of 8, the layout the x86 kernels multiply fastest (one stream of weights, 8 rows summed in one register).

The values and the products are the same bit for bit; only the byte order changes. A matrix already in private
memory (quantized at load, or a file read with mmap=False) is rewritten in place; one that is a view of a mapped file
is copied into one block of anonymous memory on huge pages, and its file pages leave the resident set, so resident
memory stays the size of the weights. That copy is made by default only for mapped matrices of at most COPY_MAX bytes
in all: a larger model's decode is bound by memory, where the stored rows run within 5-9 % of the interleaved ones
(7B shapes, two AVX2 cores), while copying 7.5 GB of Q8_0 made a 7B file open in 8-13 s instead of 1.3 s (fresh
memory is slow to touch for the first time: 0.2-0.4 GB/s on a Firecracker VM); a prefill interleaves each group of
8 stored rows on the fly either way (kern_x86.h). Files keep GGML's plain rows: `Model.tensors` hands the plain
bytes out.
"""
import numpy as np

from petit.native import INTERLEAVED, anonymous_map, prefers_interleaved

ALIGN = 64
COPY_MAX = 1 << 30      # bytes of mapped q8_0 / q4_0 matrices copied to be interleaved by default (repack=None)


def should_repack(repack: bool | None) -> bool:
    """repack None: when the active kernel path prefers the interleaved layout."""
    return prefers_interleaved() if repack is None else bool(repack)


def repack_matrices(net, tensors: dict, release=None, force: bool = False) -> None:
    """Interleave the q8_0 / q4_0 matrices of Decoder `net` (those of at least 8 rows): those in private memory in
    place, and those mapped from a file by a copy when they are at most COPY_MAX bytes in all, or `force`.

    Args:
        tensors: the source's name -> (dtype, shape, raw) record (petit convert writes it): a matrix rewritten in
            place gets its entry's raw replaced by a function giving its plain bytes.
        release: called with a tensor's name and a range of its rows once a copy of those mapped bytes is made,
            and with the name alone once all are copied (PetitFile.release).
    """
    names = {_address(raw): name for name, (_, _, raw) in tensors.items() if isinstance(raw, np.ndarray)}
    todo = [W for W in net.matrices() if W.dtype in INTERLEAVED and not W.interleaved and W.shape[0] >= 8]
    copies = [W for W in todo if not W.raw.flags.writeable]
    if copies and not force and sum(W.raw.nbytes for W in copies) > COPY_MAX:
        todo = [W for W in todo if W.raw.flags.writeable]       # a large model's mapped rows run as stored
        copies = []
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
