"""The OpenCL C of the offload's kernels (issue 34; petit/gpu/kernels.py builds and checks them, docs/gpu.md).

mm_q8_0 and mm_q4_0 multiply a matrix in its stored blocks (docs/petit-format.md: an fp16 scale, then 32 int8 codes or
16 bytes of nibbles) by activations quantized as the CPU's integer kernels quantize them (int8 codes with an fp32
scale per 32 values); mm_q4_k, mm_q5_k and mm_q6_k a Q4_K / Q5_K / Q6_K matrix in GGUF's super-blocks of 256 values
by activations quantized as the CPU quantizes them for those (one scale per 256 values, with the blocks' sums). A
work-group computes one row's outputs y[t][r] for a tile of up to 4 tokens (each block of the row read once for
them): its work-items take every L-th block (super-block), its integer dot products with each token's exactly
(16-wide vector loads), times the scales, then the partial sums are added in local memory. No sub-group extension,
no fp16 arithmetic (vload_half is core OpenCL 1.0), no contraction into fma: with a work-group of one the result is
the scalar path's bit for bit (kernels/kern_scalar.c, kern_gguf.h), with more only the order of the float additions
differs.
"""

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

/* Q4_K, Q5_K, Q6_K (kernels/kern_gguf.h's gg_kq8_super): a super-block of 256 values at a time, against activations
 * quantized as pt_quant_act_k (one scale per 256 values: xd holds it for each block of 32; xs the blocks' sums).
 * Per super-block and token the exact integer sums isum = sum over blocks j of sc_j (w_j . x_j) (Q6_K: a scale per
 * 16 values, w - 32) and msum = sum_j m_j xs_j, then sum += (d dx) isum; sum -= (dmin dx) msum, in the CPU's order.
 * A group per (row, tile of TT tokens), its work-items taking every L-th super-block. */
static void scale_min_k4(int j, __global const uchar *q, int *sc, int *m) {     /* block j's 6-bit scale and min */
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#define KQ_BODY(SB_BYTES, Q6, ...)                                                                      \
    const int r = get_group_id(0), t0 = get_group_id(1) * TT, lid = get_local_id(0), L = get_local_size(0); \
    const int nt = min(TT, T - t0), nb = ns * 8;                                                    \
    __global const uchar *row = w + (size_t)r * ns * SB_BYTES;                                      \
    float sum[TT];                                                                                  \
    for (int i = 0; i < TT; i++) sum[i] = 0.0f;                                                     \
    for (int sb = lid; sb < ns; sb += L) {                                                          \
        __global const uchar *x = row + (size_t)sb * SB_BYTES;                                      \
        int isum[TT], msum[TT];                                                                     \
        for (int i = 0; i < TT; i++) isum[i] = msum[i] = 0;                                         \
        for (int j = 0; j < 8; j++) {                                                               \
            int16 v0, v1;                     /* block j's values 0..15 and 16..31 */               \
            int sc0, sc1, m = 0;              /* their scales, the block's min */                   \
            __VA_ARGS__                                                                             \
            for (int i = 0; i < nt; i++) {                                                          \
                const size_t blk = (size_t)(t0 + i) * nb + sb * 8 + j;                              \
                __global const char *xb = xq + blk * QK;                                            \
                isum[i] += sc0 * hsum16(v0 * convert_int16(vload16(0, xb)))                         \
                         + sc1 * hsum16(v1 * convert_int16(vload16(1, xb)));                        \
                msum[i] += m * xs[blk];                                                             \
            }                                                                                       \
        }                                                                                           \
        const float d = vload_half(0, (__global const half *)(x + (Q6 ? 208 : 0)));               \
        for (int i = 0; i < nt; i++) {                                                              \
            const float dx = xd[((size_t)(t0 + i) * nb + sb * 8)];                                  \
            const float dd = d * dx;                                                                \
            sum[i] += dd * (float)isum[i];                                                          \
            if (!Q6) {                                                                              \
                const float dm = vload_half(1, (__global const half *)x) * dx;                      \
                sum[i] -= dm * (float)msum[i];                                                      \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
    for (int i = 0; i < nt; i++) {                                                                  \
        const float v = group_sum(part, sum[i]);                                                   \
        if (lid == 0) y[(size_t)(t0 + i) * rows + r] = v;                                          \
    }

#define KQ_ARGS __global const uchar *w, const int ns, const int rows, const int T, __global const char *xq, \
                __global const float *xd, __global const int *xs, __global float *y, __local float *part

__kernel void mm_q4_k(KQ_ARGS) {
    KQ_BODY(144, 0, {
        __global const uchar *ql = x + 16 + 32 * (j >> 1);          /* blocks 2p and 2p + 1: low and high nibbles */
        const uchar16 a = vload16(0, ql), b = vload16(1, ql);
        const uchar s = (uchar)(4 * (j & 1));
        v0 = convert_int16((a >> s) & (uchar16)0xF);
        v1 = convert_int16((b >> s) & (uchar16)0xF);
        scale_min_k4(j, x + 4, &sc0, &m);
        sc1 = sc0;
    })
}

__kernel void mm_q5_k(KQ_ARGS) {
    KQ_BODY(176, 0, {
        __global const uchar *ql = x + 48 + 32 * (j >> 1), *qh = x + 16;    /* bit j of qh[l]: value l's fifth */
        const uchar s = (uchar)(4 * (j & 1)), hj = (uchar)j;
        v0 = convert_int16(((vload16(0, ql) >> s) & (uchar16)0xF) | (((vload16(0, qh) >> hj) & (uchar16)1) << 4));
        v1 = convert_int16(((vload16(1, ql) >> s) & (uchar16)0xF) | (((vload16(1, qh) >> hj) & (uchar16)1) << 4));
        scale_min_k4(j, x + 4, &sc0, &m);
        sc1 = sc0;
    })
}

__kernel void mm_q6_k(KQ_ARGS) {
    KQ_BODY(210, 1, {
        /* 32 values at 32 part of a half of 128: the low (parts 0, 1) or high (2, 3) nibbles of ql[0..31] (parts 0,
         * 2) or ql[32..63] (1, 3), and bits 2 part, 2 part + 1 of qh[0..31], all minus 32 */
        const int h128 = j >> 2, p = j & 3;
        __global const uchar *ql = x + 64 * h128 + 32 * (p & 1), *qh = x + 128 + 32 * h128;
        const uchar s = (uchar)(4 * (p >> 1)), hs = (uchar)(2 * p);
        const uchar16 lo0 = (vload16(0, ql) >> s) & (uchar16)0xF, hi0 = (vload16(0, qh) >> hs) & (uchar16)3;
        const uchar16 lo1 = (vload16(1, ql) >> s) & (uchar16)0xF, hi1 = (vload16(1, qh) >> hs) & (uchar16)3;
        v0 = convert_int16(lo0 | (hi0 << 4)) - 32;
        v1 = convert_int16(lo1 | (hi1 << 4)) - 32;
        __global const char *sc = (__global const char *)(x + 192);
        sc0 = sc[2 * j];
        sc1 = sc[2 * j + 1];
    })
}
"""
