/* Interleaved q8_0 / q4_0 matrices: 8 rows in the lanes of one vector.
 *
 * A matrix of q8_0 or q4_0 rows multiplies fastest when 8 rows sit side by side: the kernels (kern_x86.h) then sum
 * a block of 8 rows in the eight 32-bit lanes of one register, with no horizontal adds, and read the weights as one
 * stream. The loader rewrites each matrix into this layout once (petit/loading/interleave.py); files keep GGML's.
 *
 * The layout (dtype PT_Q8_0_X8 / PT_Q4_0_X8): rows in groups of 8, a group's blocks one after another, and a
 * group's block b holds its 8 rows' block b as
 *   - 8 fp16 scales (row 0 first), 16 bytes, then
 *   - q8_0: 8 vectors of 32 bytes; lane i (bytes 4i..4i+3) of vector k holds quants 4k..4k+3 of row i;
 *   - q4_0: 4 vectors of 32 bytes; byte j of lane i of vector k holds value 4k+j of row i in its low nibble and
 *     value 16+4k+j in its high nibble (nibbles 0..15 with q4_0's offset of 8, as in the plain layout).
 * The rows after the last whole group (rows % 8 of them) stay as plain rows, where the plain layout has them. A
 * group fills exactly the bytes of its 8 plain rows (8 x 34 = 16 + 256, 8 x 18 = 16 + 128), so both layouts have
 * the same size and a matrix converts in place, group by group. */
#include "internal.h"
#include <stdlib.h>

/* quant j of row i in a group's block, as the plain layout's byte of it (q8_0: the quant; q4_0: 0..15) */
static inline int x8_quant(const uint8_t *blk, int i, int j, int q4) {
    if (!q4) return (int8_t)blk[16 + (j / 4) * 32 + 4 * i + j % 4];
    const int k = (j % 16) / 4;
    const uint8_t byte = blk[16 + k * 32 + 4 * i + j % 4];
    return j < 16 ? byte & 0x0F : byte >> 4;
}

static int plain_of(int32_t dtype) {
    return dtype == PT_Q8_0_X8 ? PT_Q8_0 : dtype == PT_Q4_0_X8 ? PT_Q4_0 : -1;
}

void pt_x8_dequantize_row(int32_t dtype, const uint8_t *w, int64_t rows, int64_t cols, int64_t r, float *out) {
    const int q4 = dtype == PT_Q4_0_X8;
    const int64_t nb = cols / QK, rb = pt_row_bytes(plain_of(dtype), cols);
    if (r >= rows / 8 * 8) {                 /* a plain row after the groups */
        const uint8_t *row = w + r * rb;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * (q4 ? Q4_BYTES : Q8_BYTES);
            const float d = pt_h2f(pt_load_u16(blk));
            for (int j = 0; j < QK; j++) {
                const int v = q4 ? (j < 16 ? blk[2 + j] & 0x0F : blk[2 + j - 16] >> 4) - 8 : (int8_t)blk[2 + j];
                out[b * QK + j] = d * (float)v;
            }
        }
        return;
    }
    const int i = (int)(r % 8);
    const uint8_t *group = w + r / 8 * 8 * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = group + b * (q4 ? Q4X8_BYTES : Q8X8_BYTES);
        const float d = pt_h2f(pt_load_u16(blk + 2 * i));
        for (int j = 0; j < QK; j++) out[b * QK + j] = d * (float)(x8_quant(blk, i, j, q4) - (q4 ? 8 : 0));
    }
}

/* one group: 8 plain rows (p, row bytes rb) <-> one interleaved group (x). In both types lane i of vector k is bytes
 * 4k..4k+3 of row i's quant bytes: q4_0's plain byte j already holds values j and 16+j. */
static void regroup_one(uint8_t *p, int64_t rb, int64_t nb, uint8_t *x, int q4, int to_x8) {
    const int64_t bb = q4 ? Q4_BYTES : Q8_BYTES, nv = q4 ? 4 : 8;
    for (int64_t b = 0; b < nb; b++, x += 8 * bb)
        for (int i = 0; i < 8; i++) {
            uint8_t *blk = p + i * rb + b * bb;
            if (to_x8) memcpy(x + 2 * i, blk, 2);
            else memcpy(blk, x + 2 * i, 2);
            for (int64_t k = 0; k < nv; k++) {
                if (to_x8) memcpy(x + 16 + k * 32 + 4 * i, blk + 2 + 4 * k, 4);
                else memcpy(blk + 2 + 4 * k, x + 16 + k * 32 + 4 * i, 4);
            }
        }
}

void pt_x8_group(const uint8_t *rows, int64_t rb, int64_t nb, uint8_t *x, int q4) {
    regroup_one((uint8_t *)rows, rb, nb, x, q4, 1);        /* to_x8: the rows are only read */
}

typedef struct { const uint8_t *src; uint8_t *dst; int64_t rb, nb; int q4, to_x8, failed; } regroup_job;

/* groups g0..g1: each copied aside first, so that src may be dst */
static void regroup(void *ctx, int64_t g0, int64_t g1) {
    regroup_job *j = (regroup_job *)ctx;
    uint8_t *tmp = (uint8_t *)malloc((size_t)(8 * j->rb));
    if (!tmp) {
        j->failed = 1;
        return;
    }
    const size_t n = (size_t)(8 * j->rb);
    for (int64_t g = g0; g < g1; g++) {
        const int64_t at = g * 8 * j->rb;
        if (j->to_x8) {
            memcpy(tmp, j->src + at, n);                      /* the plain rows */
            regroup_one(tmp, j->rb, j->nb, j->dst + at, j->q4, 1);
        } else {
            memcpy(tmp, j->src + at, n);                      /* the group */
            regroup_one(j->dst + at, j->rb, j->nb, tmp, j->q4, 0);
        }
    }
    free(tmp);
}

static int convert(int32_t dtype, const void *src, void *dst, int64_t rows, int64_t cols, int to_x8) {
    const int64_t rb = pt_row_bytes(dtype, cols);
    if ((dtype != PT_Q8_0 && dtype != PT_Q4_0) || rb < 0 || rows < 0) return -1;
    regroup_job j = {(const uint8_t *)src, (uint8_t *)dst, rb, cols / QK, dtype == PT_Q4_0, to_x8, 0};
    pt_run_rows(regroup, &j, rows / 8, 8 * cols);
    if (src != dst)                          /* the plain rows after the groups */
        memcpy(j.dst + rows / 8 * 8 * rb, j.src + rows / 8 * 8 * rb, (size_t)(rows % 8 * rb));
    return j.failed ? -3 : 0;
}

int pt_interleave(int32_t dtype, const void *src, void *dst, int64_t rows, int64_t cols) {
    return convert(dtype, src, dst, rows, cols, 1);
}

int pt_deinterleave(int32_t dtype, const void *src, void *dst, int64_t rows, int64_t cols) {
    return convert(dtype, src, dst, rows, cols, 0);
}

int pt_prefers_interleaved(void) { return pt_active()->interleave; }

uint32_t pt_gguf_fast(void) { return pt_active()->gguf_fast; }
uint32_t pt_gguf_simd(void) { return pt_active()->gguf_simd; }
