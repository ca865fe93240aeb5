"""The offload's kernels built for a device, their launches and their start-up check (issue 34; the OpenCL C is
petit/gpu/source.py).

The q8_0 / q4_0 kernels take activations quantized as the CPU's integer kernels quantize them
(petit.native.quantize_act: int8 codes with an fp32 scale per 32 values), the Q4_K / Q5_K / Q6_K ones as the CPU
quantizes them for those (quantize_act_k below: one scale per 256 values, the blocks' sums): the device then
computes exactly the integers the CPU does. With a work-group of one per output the result is the scalar path's
bit for bit; with more only the order of the float additions differs.
"""
import threading
import warnings
from typing import NamedTuple

import numpy as np

from petit.gpu.source import SOURCE
from petit.native import ffi, lib, quantize_act

QK = 32
QK_K = 256          # values in a K-quant's super-block
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18}                      # bytes of a block of 32 values
KQUANT_BYTES = {"q4_k": 144, "q5_k": 176, "q6_k": 210}      # bytes of a super-block of 256 values
TYPES = (*BLOCK_BYTES, *KQUANT_BYTES)                       # the matrix types the kernels take
GROUP = 32          # work-items per output (a power of two); 1 reproduces the scalar path's order
TILE = 4            # tokens per work-group (TT in the source)


def quantize_act_k(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The Q4_K / Q5_K / Q6_K kernels' activations (llama.cpp's Q8_K rule: one scale per 256 values), by the CPU's own
    code (kernels/api.h pt_quant_act_k): int8 q [T, K], fp32 scales d [T, K/32] (each block its super-block's),
    block sums s [T, K/32], sums of 16 h [T, K/16]."""
    x = np.ascontiguousarray(x, np.float32)
    T, K = x.shape
    if K % QK_K:
        raise ValueError(f"the K-quants' activations take rows of a multiple of 256 values, not {K}")
    out = (np.empty((T, K), np.int8), np.empty((T, K // QK), np.float32), np.empty((T, K // QK), np.int32),
           np.empty((T, K // 16), np.int16))
    ptrs = [ffi.cast(c, ffi.from_buffer(a, require_writable=True))
            for c, a in zip(("int8_t *", "float *", "int32_t *", "int16_t *"), out)]
    xp, widths = ffi.cast("float *", ffi.from_buffer(x)), (K, K // QK, K // QK, K // 16)
    for t in range(T):                  # the C code quantizes one token
        lib.pt_quant_act_k(xp + t * K, K, *(p + t * w for p, w in zip(ptrs, widths)))
    return out


class Act(NamedTuple):
    """Activations on the device: for the K-quants' kernels (kq) or the others', their buffers, tokens, width."""
    kq: bool
    bufs: tuple
    T: int
    K: int


class Kernels:
    """The program built for one device, with the scratch buffers a product needs (grown, never shrunk)."""

    def __init__(self, cl, ctx, device):
        self.cl, self.ctx, self.device = cl, ctx, device
        self.queue = cl.CommandQueue(ctx, device)
        with warnings.catch_warnings():
            # a build that succeeds may still log (PoCL on an AVX2 CPU: "AVX vector return of type 'int16' without
            # 'avx512f' enabled changes the ABI"): pyopencl turns that into a CompilerWarning the user can do nothing
            # with; a failed build still raises with its log, and the start-up check still runs every kernel
            if hasattr(cl, "CompilerWarning"):
                warnings.simplefilter("ignore", cl.CompilerWarning)
            self.program = cl.Program(ctx, SOURCE).build()
        self.kernels = {dtype: getattr(self.program, "mm_" + dtype) for dtype in TYPES}
        self.group = min(GROUP, _pow2_floor(device.max_work_group_size))
        self._bufs: dict[str, tuple[int, object]] = {}
        self._sent: dict[bool, tuple] = {}
        self.lock = threading.Lock()    # one product at a time: the models offloaded here share the scratch buffers

    def upload(self, data: np.ndarray):
        """A read-only device buffer holding these bytes (a matrix's stored blocks)."""
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(data))

    def _scratch(self, name: str, nbytes: int):
        have = self._bufs.get(name)
        if have is None or have[0] < nbytes:
            have = (max(nbytes, 4096), self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, max(nbytes, 4096)))
            self._bufs[name] = have
        return have[1]

    def put_act(self, x: np.ndarray, kq: bool = False) -> Act:
        """x [T, K] float32 quantized on the host (the CPU kernels' own code; kq: as for the K-quants) and sent to
        the device once, for every matrix that reads it."""
        names = ("kq", "kd", "ks") if kq else ("xq", "xd")
        arrays = quantize_act_k(x)[:3] if kq else quantize_act(x)[:2]
        bufs = tuple(self._scratch(n, a.nbytes) for n, a in zip(names, arrays))
        self._sent[kq] = arrays         # alive until the queue has read them (the next product's read waits)
        for b, a in zip(bufs, arrays):
            self.cl.enqueue_copy(self.queue, b, a, is_blocking=False)
        return Act(kq, bufs, x.shape[0], x.shape[1])

    def launch(self, dtype: str, wbuf, rows: int, act: Act, slot: int = 0, group: int | None = None):
        """Queue W x for the activations `act` (put_act: kq for the K-quants) into the device buffer of `slot`,
        returned."""
        if act.kq != (dtype in KQUANT_BYTES):
            raise ValueError(f"a {dtype} matrix takes activations put with kq={dtype in KQUANT_BYTES}")
        L = self.group if group is None else group
        by = self._scratch(f"y{slot}", act.T * rows * 4)
        blocks = act.K // (QK_K if act.kq else QK)
        self.kernels[dtype](self.queue, (rows * L, -(-act.T // TILE)), (L, 1), wbuf, np.int32(blocks),
                            np.int32(rows), np.int32(act.T), *act.bufs, by, self.cl.LocalMemory(4 * L))
        return by

    def read(self, buf, out: np.ndarray, blocking: bool = True) -> None:
        """A product's output into `out` (in queue order: a blocking read waits for every earlier one too)."""
        self.cl.enqueue_copy(self.queue, out, buf, is_blocking=blocking)

    def matmul(self, dtype: str, wbuf, rows: int, act: Act, out: np.ndarray, slot: int = 0,
               group: int | None = None) -> None:
        """out [T, rows] = W x for the activations `act` (put_act); out holds the product on return."""
        self.read(self.launch(dtype, wbuf, rows, act, slot, group), out)


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def reference(dtype: str, raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> np.ndarray:
    """The scalar path's product in float64 from the same integers (kernels/kern_scalar.c's rows_q8 / rows_q4)."""
    nb = cols // QK
    blocks = raw.reshape(rows, nb, BLOCK_BYTES[dtype])
    dw = blocks[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float64)
    if dtype == "q8_0":
        wq = blocks[:, :, 2:].view(np.int8).astype(np.int64)
    else:
        qs = blocks[:, :, 2:].astype(np.int64)
        wq = np.concatenate([(qs & 0x0F) - 8, (qs >> 4) - 8], axis=2)
    q, d, _ = quantize_act(x)
    xq = q.reshape(-1, nb, QK).astype(np.int64)
    isum = np.einsum("rbj,tbj->trb", wq, xq)
    return (isum * dw[None] * d.astype(np.float64)[:, None, :]).sum(axis=2)


def expected(dtype: str, raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a kernel must give for W x: (the product from the same integers in float64, the scalar path's float32
    bits). For the K-quants both are the CPU's own product: every CPU path gives the scalar path's bits for them
    (kernels/kern_gguf.h, checked at the CPU's start-up)."""
    if dtype in KQUANT_BYTES:
        from petit.native import Weight, matmul
        cpu = matmul(Weight(raw, dtype, (rows, cols)), x)
        return cpu.astype(np.float64), cpu
    return reference(dtype, raw, rows, cols, x), _scalar_order(dtype, raw, rows, cols, x)


def self_check(k: Kernels, seed: int = 0) -> str | None:
    """Each kernel on the device against the scalar path on small odd sizes (7 rows of 5 blocks, or 3 super-blocks
    for the K-quants, and 5 tokens: two tiles): within 1e-5 of the range, and with one work-item per output bit for
    bit. None when all agree, else what failed."""
    from petit.native import quantize
    rng = np.random.default_rng(seed)
    rows, T = 7, 5
    for dtype in TYPES:
        cols = 3 * QK_K if dtype in KQUANT_BYTES else 5 * QK
        x = rng.standard_normal((T, cols)).astype(np.float32)
        raw = quantize(rng.standard_normal((rows, cols)).astype(np.float32), dtype)
        ref, exact = expected(dtype, raw, rows, cols, x)
        try:
            wbuf = k.upload(raw)
            act = k.put_act(x, kq=dtype in KQUANT_BYTES)
            got = np.empty((T, rows), np.float32)
            k.matmul(dtype, wbuf, rows, act, got)
            one = np.empty((T, rows), np.float32)
            k.matmul(dtype, wbuf, rows, act, one, group=1)
        except Exception as e:          # a driver that fails to build or run a kernel: the device is not used
            return f"the {dtype} kernel failed to run: {type(e).__name__}: {e}"
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        if not np.isfinite(err) or err > 1e-5:
            return f"the {dtype} kernel disagrees with the scalar path (relative error {err:.3g} > 1e-5)"
        if not np.array_equal(one, exact):
            return f"the {dtype} kernel with one work-item per output is not the scalar path's bit for bit"
    return None


def _scalar_order(dtype: str, raw: np.ndarray, rows: int, cols: int, x: np.ndarray) -> np.ndarray:
    """The scalar path's float32 arithmetic in its order: sum += (d_w * d_x) * isum, block after block."""
    nb = cols // QK
    blocks = raw.reshape(rows, nb, BLOCK_BYTES[dtype])
    dw = blocks[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float32)
    if dtype == "q8_0":
        wq = blocks[:, :, 2:].view(np.int8).astype(np.int64)
    else:
        qs = blocks[:, :, 2:].astype(np.int64)
        wq = np.concatenate([(qs & 0x0F) - 8, (qs >> 4) - 8], axis=2)
    q, d, _ = quantize_act(x)
    isum = np.einsum("rbj,tbj->trb", wq, q.reshape(-1, nb, QK).astype(np.int64)).astype(np.float32)
    out = np.zeros((x.shape[0], rows), np.float32)
    for b in range(nb):
        out = out + (dw[None, :, b] * d[:, None, b]) * isum[:, :, b]
    return out
