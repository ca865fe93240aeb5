"""The OpenCL C kernels of the offload and their start-up check (issue 34).

Each kernel multiplies a q8_0 or q4_0 matrix, uploaded in its stored blocks (docs/petit-format.md: an fp16 scale,
then 32 int8 codes or 16 bytes of nibbles), by activations quantized as the CPU's integer kernels quantize them
(petit.native.quantize_act: int8 codes with an fp32 scale per 32 values). A work-group computes one row's outputs
y[t][r] for a tile of up to 4 tokens (each block of the row read once for them): its work-items take every L-th
block, its integer dot product with each token's exactly (16-wide vector loads), times the two scales, then the
partial sums are added in local memory. No sub-group extension, no fp16 arithmetic (vload_half is core OpenCL
1.0), no contraction into fma: with a work-group of one the result is the scalar path's bit for bit
(kernels/kern_scalar.c), with more only the order of the float additions differs.
"""
import threading
import warnings

import numpy as np

from petit.native import quantize_act

QK = 32
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18}
GROUP = 32          # work-items per output (a power of two); 1 reproduces the scalar path's order
TILE = 4            # tokens per work-group (TT in the source)

SOURCE = r"""
#pragma OPENCL FP_CONTRACT OFF
#define QK 32
#define TT 4            /* tokens per work-group: a block of the matrix is read once for up to TT of them */

/* the sum of the group's values v into part[0], which work-item 0 reads; L a power of two */
static float group_sum(__local float *part, float v) {
    const int lid = get_local_id(0), L = get_local_size(0);
    barrier(CLK_LOCAL_MEM_FENCE);              /* the previous call's part[0] has been read */
    part[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return part[0];
}

static int hsum16(int16 p) {                  /* exact: integers */
    int8 a = p.lo + p.hi;
    int4 b = a.lo + a.hi;
    int2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* y[t][r] = sum over blocks b of d_w[r][b] d_x[t][b] (w_q[r][b] . x_q[t][b]) for the tokens t of the group's tile;
 * a group per (row r, tile of TT tokens), its work-items taking every L-th block */
#define MM_BODY(BLOCK_BYTES, ...)                                                                   \
    const int r = get_group_id(0), t0 = get_group_id(1) * TT, lid = get_local_id(0), L = get_local_size(0); \
    const int nt = min(TT, T - t0);                                                                 \
    __global const uchar *row = w + (size_t)r * nb * BLOCK_BYTES;                                   \
    float sum[TT];                                                                                  \
    for (int i = 0; i < TT; i++) sum[i] = 0.0f;                                                     \
    for (int b = lid; b < nb; b += L) {                                                             \
        __global const uchar *blk = row + (size_t)b * BLOCK_BYTES;                                  \
        const float dw = vload_half(0, (__global const half *)blk);                                \
        __VA_ARGS__                                                                                 \
    }                                                                                               \
    for (int i = 0; i < nt; i++) {                                                                  \
        const float v = group_sum(part, sum[i]);                                                   \
        if (lid == 0) y[(size_t)(t0 + i) * rows + r] = v;                                          \
    }

__kernel void mm_q8_0(__global const uchar *w, const int nb, const int rows, const int T, __global const char *xq,
                      __global const float *xd, __global float *y, __local float *part) {
    MM_BODY(34, {
        const int16 w0 = convert_int16(vload16(0, (__global const char *)(blk + 2)));
        const int16 w1 = convert_int16(vload16(1, (__global const char *)(blk + 2)));
        for (int i = 0; i < nt; i++) {
            __global const char *xb = xq + ((size_t)(t0 + i) * nb + b) * QK;
            const int isum = hsum16(w0 * convert_int16(vload16(0, xb)) + w1 * convert_int16(vload16(1, xb)));
            sum[i] += dw * xd[(size_t)(t0 + i) * nb + b] * (float)isum;
        }
    })
}

__kernel void mm_q4_0(__global const uchar *w, const int nb, const int rows, const int T, __global const char *xq,
                      __global const float *xd, __global float *y, __local float *part) {
    MM_BODY(18, {
        const uchar16 q = vload16(0, blk + 2);
        const int16 lo = convert_int16(q & (uchar16)0x0F) - 8, hi = convert_int16(q >> (uchar16)4) - 8;
        for (int i = 0; i < nt; i++) {
            __global const char *xb = xq + ((size_t)(t0 + i) * nb + b) * QK;
            const int isum = hsum16(lo * convert_int16(vload16(0, xb)) + hi * convert_int16(vload16(1, xb)));
            sum[i] += dw * xd[(size_t)(t0 + i) * nb + b] * (float)isum;
        }
    })
}
"""


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
        self.kernels = {"q8_0": self.program.mm_q8_0, "q4_0": self.program.mm_q4_0}
        self.group = min(GROUP, _pow2_floor(device.max_work_group_size))
        self._bufs: dict[str, tuple[int, object]] = {}
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

    def put_act(self, x: np.ndarray) -> tuple:
        """x [T, K] float32 quantized on the host (the CPU kernels' own code) and sent to the device once, for every
        matrix that reads it."""
        q, d, _ = quantize_act(x)
        bq, bd = self._scratch("xq", q.nbytes), self._scratch("xd", d.nbytes)
        self._sent = (q, d)             # alive until the queue has read them (the next product's read waits)
        self.cl.enqueue_copy(self.queue, bq, q, is_blocking=False)
        self.cl.enqueue_copy(self.queue, bd, d, is_blocking=False)
        return bq, bd, x.shape[0], x.shape[1]

    def launch(self, dtype: str, wbuf, rows: int, act: tuple, slot: int = 0, group: int | None = None):
        """Queue W x for the activations `act` (put_act) into the device buffer of `slot`, returned."""
        bq, bd, T, K = act
        L = self.group if group is None else group
        by = self._scratch(f"y{slot}", T * rows * 4)
        self.kernels[dtype](self.queue, (rows * L, -(-T // TILE)), (L, 1), wbuf, np.int32(K // QK), np.int32(rows),
                            np.int32(T), bq, bd, by, self.cl.LocalMemory(4 * L))
        return by

    def read(self, buf, out: np.ndarray, blocking: bool = True) -> None:
        """A product's output into `out` (in queue order: a blocking read waits for every earlier one too)."""
        self.cl.enqueue_copy(self.queue, out, buf, is_blocking=blocking)

    def matmul(self, dtype: str, wbuf, rows: int, act: tuple, out: np.ndarray, slot: int = 0,
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


def self_check(k: Kernels, seed: int = 0) -> str | None:
    """Each kernel on the device against the scalar path on small odd sizes (7 rows of 5 blocks, 5 tokens: two
    tiles; and with one work-item per output, bit for bit): None when all agree, else what failed."""
    from petit.native import quantize
    rng = np.random.default_rng(seed)
    rows, cols, T = 7, 5 * QK, 5
    x = rng.standard_normal((T, cols)).astype(np.float32)
    for dtype in ("q8_0", "q4_0"):
        raw = quantize(rng.standard_normal((rows, cols)).astype(np.float32), dtype)
        ref = reference(dtype, raw, rows, cols, x)
        try:
            wbuf = k.upload(raw)
            act = k.put_act(x)
            got = np.empty((T, rows), np.float32)
            k.matmul(dtype, wbuf, rows, act, got)
            one = np.empty((T, rows), np.float32)
            k.matmul(dtype, wbuf, rows, act, one, group=1)
        except Exception as e:          # a driver that fails to build or run a kernel: the device is not used
            return f"the {dtype} kernel failed to run: {type(e).__name__}: {e}"
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        if not np.isfinite(err) or err > 1e-5:
            return f"the {dtype} kernel disagrees with the scalar path (relative error {err:.3g} > 1e-5)"
        exact = _scalar_order(dtype, raw, rows, cols, x)
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
