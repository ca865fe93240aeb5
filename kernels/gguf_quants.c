/* GGUF's block types beyond q8_0 / q4_0, decoded to float (the plain reference of each layout; ggml-common.h names
 * the fields). Every value is the block's arithmetic in float, in ggml's order, multiplies and adds never fused, so
 * a tensor decodes to the same bits as llama.cpp's and the gguf package's reference dequantizers give.
 *
 *   type    values  bytes  layout (in order)
 *   Q4_1      32     20    d, m (fp16); 16 bytes of nibbles: value j (low) and j+16 (high) = d * q + m
 *   Q5_0      32     22    d; qh (32 fifth bits, little-endian uint32); 16 bytes of nibbles: d * (q - 16)
 *   Q5_1      32     24    d, m; qh; nibbles: d * q + m
 *   Q2_K     256     84    16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit quants, d, dmin
 *   Q3_K     256    110    hmask (32 bytes of high bits), 64 bytes of 2-bit quants, 12 bytes of 16 6-bit scales, d
 *   Q4_K     256    144    d, dmin, 12 bytes of 8 6-bit scales and mins, 128 bytes of nibbles
 *   Q5_K     256    176    d, dmin, 12 bytes of scales and mins, qh (32 bytes of fifth bits), 128 bytes of nibbles
 *   Q6_K     256    210    ql (128 bytes, low 4 bits), qh (64 bytes, high 2 bits), 16 int8 scales, d
 *   IQ4_NL    32     18    d; nibbles indexing a fixed non-linear table of 16 values
 *   IQ4_XS   256    136    d; scales_h (uint16, 2 high bits of 8 scales); scales_l (4 bytes of low nibbles); nibbles
 * The K types hold 8 (Q4_K, Q5_K) or 16 (Q2_K, Q3_K, Q6_K) sub-blocks of 32 or 16 values with their own scales. */
#include "internal.h"
#include <stdlib.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")   /* a * b + c stays two roundings, as the reference decoders compute it */
#endif
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { G_Q4_1 = 3, G_Q5_0 = 6, G_Q5_1 = 7, G_Q2_K = 10, G_Q3_K = 11, G_Q4_K = 12, G_Q5_K = 13, G_Q6_K = 14,
       G_IQ4_NL = 20, G_IQ4_XS = 23 };

static const int8_t IQ4_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline float h(const uint8_t *p) { return pt_h2f(pt_load_u16(p)); }
static inline uint32_t u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* scale and min j (0..7) of a Q4_K / Q5_K block's 12 bytes: 6 bits each */
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void row_q4_1(const uint8_t *x, int64_t n, float *y, int q5, int with_min) {
    const int64_t bb = q5 ? (with_min ? 24 : 22) : 20;
    for (int64_t b = 0; b < n / 32; b++, x += bb, y += 32) {
        const float d = h(x), m = with_min ? h(x + 2) : 0.0f;
        const uint8_t *qs = x + (with_min ? 4 : 2) + (q5 ? 4 : 0);
        const uint32_t qh = q5 ? u32(x + (with_min ? 4 : 2)) : 0;
        for (int j = 0; j < 16; j++) {
            int lo = qs[j] & 0x0F, hi = qs[j] >> 4;
            if (q5) {
                lo |= (int)((qh >> j) << 4) & 0x10;
                hi |= (int)(qh >> (j + 12)) & 0x10;
            }
            if (with_min) {
                y[j] = d * (float)lo + m;
                y[j + 16] = d * (float)hi + m;
            } else {               /* Q5_0: signed, offset 16 */
                y[j] = d * (float)(lo - 16);
                y[j + 16] = d * (float)(hi - 16);
            }
        }
    }
}

static void row_q2_k(const uint8_t *x, int64_t n, float *y) {
    for (int64_t b = 0; b < n / 256; b++, x += 84) {
        const uint8_t *sc = x, *q = x + 16;
        const float d = h(x + 80), dmin = h(x + 82);
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int part = 0; part < 2; part++, is++) {
                    const float dl = d * (float)(sc[is] & 0xF), ml = dmin * (float)(sc[is] >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * part] >> shift) & 3) - ml;
                }
    }
}

static void row_q3_k(const uint8_t *x, int64_t n, float *y) {
    for (int64_t b = 0; b < n / 256; b++, x += 110) {
        const uint8_t *hm = x, *q = x + 32, *s = x + 96;
        const float d = h(x + 108);
        int8_t scales[16];
        for (int j = 0; j < 16; j++) {      /* low 4 bits from bytes 0..7, high 2 bits from bytes 8..11 */
            const int lo = (s[j % 8] >> (4 * (j / 8))) & 0xF, hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
            scales[j] = (int8_t)((lo | hi << 4) - 32);
        }
        int is = 0, bit = 0;
        for (int half = 0; half < 2; half++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, bit++)
                for (int part = 0; part < 2; part++, is++) {
                    const float dl = d * (float)scales[is];
                    for (int l = 0; l < 16; l++) {
                        const int k = l + 16 * part;
                        const int v = ((q[k] >> shift) & 3) - ((hm[k] >> bit) & 1 ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
    }
}

static void row_q45_k(const uint8_t *x, int64_t n, float *y, int q5) {
    const int64_t bb = q5 ? 176 : 144;
    for (int64_t b = 0; b < n / 256; b++, x += bb) {
        const float d = h(x), dmin = h(x + 2);
        const uint8_t *scales = x + 4, *qh = x + 16, *ql = x + (q5 ? 48 : 16);
        for (int j = 0; j < 4; j++, ql += 32) {       /* 64 values: 32 low nibbles, then 32 high */
            int sc, m;
            scale_min_k4(2 * j, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            scale_min_k4(2 * j + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                const int hi1 = q5 ? ((qh[l] >> (2 * j)) & 1) << 4 : 0;
                *y++ = d1 * (float)((ql[l] & 0xF) + hi1) - m1;
            }
            for (int l = 0; l < 32; l++) {
                const int hi2 = q5 ? ((qh[l] >> (2 * j + 1)) & 1) << 4 : 0;
                *y++ = d2 * (float)((ql[l] >> 4) + hi2) - m2;
            }
        }
    }
}

static void row_q6_k(const uint8_t *x, int64_t n, float *y) {
    for (int64_t b = 0; b < n / 256; b++, x += 210) {
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        const float d = h(x + 208);
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
    }
}

static void row_iq4(const uint8_t *x, int64_t n, float *y, int xs) {
    if (!xs) {
        for (int64_t b = 0; b < n / 32; b++, x += 18, y += 32) {
            const float d = h(x);
            for (int j = 0; j < 16; j++) {
                y[j] = d * (float)IQ4_VALUES[x[2 + j] & 0xF];
                y[j + 16] = d * (float)IQ4_VALUES[x[2 + j] >> 4];
            }
        }
        return;
    }
    for (int64_t b = 0; b < n / 256; b++, x += 136) {
        const float d = h(x);
        const uint16_t scales_h = pt_load_u16(x + 2);
        const uint8_t *scales_l = x + 4, *qs = x + 8;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)IQ4_VALUES[qs[j] & 0xF];
                y[j + 16] = dl * (float)IQ4_VALUES[qs[j] >> 4];
            }
        }
    }
}

/* bytes per row of `cols` values of GGUF type `type`, -1 when it is not one of these or cols does not divide */
int64_t pt_gguf_row_bytes(int32_t type, int64_t cols) {
    int64_t block, bytes;
    switch (type) {
    case G_Q4_1: block = 32; bytes = 20; break;
    case G_Q5_0: block = 32; bytes = 22; break;
    case G_Q5_1: block = 32; bytes = 24; break;
    case G_Q2_K: block = 256; bytes = 84; break;
    case G_Q3_K: block = 256; bytes = 110; break;
    case G_Q4_K: block = 256; bytes = 144; break;
    case G_Q5_K: block = 256; bytes = 176; break;
    case G_Q6_K: block = 256; bytes = 210; break;
    case G_IQ4_NL: block = 32; bytes = 18; break;
    case G_IQ4_XS: block = 256; bytes = 136; break;
    default: return -1;
    }
    return cols > 0 && cols % block == 0 ? cols / block * bytes : -1;
}

void pt_gguf_dequantize_row(int32_t type, const uint8_t *x, int64_t n, float *y) {
    switch (type) {
    case G_Q4_1: row_q4_1(x, n, y, 0, 1); break;
    case G_Q5_0: row_q4_1(x, n, y, 1, 0); break;
    case G_Q5_1: row_q4_1(x, n, y, 1, 1); break;
    case G_Q2_K: row_q2_k(x, n, y); break;
    case G_Q3_K: row_q3_k(x, n, y); break;
    case G_Q4_K: row_q45_k(x, n, y, 0); break;
    case G_Q5_K: row_q45_k(x, n, y, 1); break;
    case G_Q6_K: row_q6_k(x, n, y); break;
    case G_IQ4_NL: row_iq4(x, n, y, 0); break;
    case G_IQ4_XS: row_iq4(x, n, y, 1); break;
    }
}

typedef struct { int32_t type; const uint8_t *x; float *y; int64_t cols, rb; } gguf_job;

static void gguf_rows(void *ctx, int64_t r0, int64_t r1) {
    const gguf_job *j = (const gguf_job *)ctx;
    for (int64_t r = r0; r < r1; r++) pt_gguf_dequantize_row(j->type, j->x + r * j->rb, j->cols, j->y + r * j->cols);
}

int pt_dequantize_gguf(int32_t type, const void *x, int64_t rows, int64_t cols, float *out) {
    gguf_job j = {type, (const uint8_t *)x, out, cols, pt_gguf_row_bytes(type, cols)};
    if (j.rb < 0 || rows < 0) return -1;
    pt_run_rows(gguf_rows, &j, rows, cols);
    return 0;
}

/* Q5_0 and IQ4_NL as q8_0 with nothing rounded: a block's values are its fp16 d times small integers (q - 16, or an
 * IQ4_NL table entry, all within int8), so the q8_0 block keeps the same d and takes those integers as its quants;
 * d * q then decodes to the same bits as the decoders above. -1 for another type or cols that do not divide. */
typedef struct { int32_t type; const uint8_t *x; uint8_t *y; int64_t cols, rb; } q8_job;

static void q8_rows(void *ctx, int64_t r0, int64_t r1) {
    const q8_job *j = (const q8_job *)ctx;
    const int64_t nb = j->cols / 32, ib = j->type == G_Q5_0 ? 22 : 18;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *x = j->x + r * j->rb;
        uint8_t *y = j->y + r * nb * 34;
        for (int64_t b = 0; b < nb; b++, x += ib, y += 34) {
            memcpy(y, x, 2);                                      /* the same fp16 d */
            int8_t *q = (int8_t *)(y + 2);
            if (j->type == G_Q5_0) {
                const uint32_t qh = u32(x + 2);
                for (int k = 0; k < 16; k++) {
                    q[k] = (int8_t)(((x[6 + k] & 0x0F) | (((qh >> k) & 1) << 4)) - 16);
                    q[k + 16] = (int8_t)(((x[6 + k] >> 4) | (((qh >> (k + 16)) & 1) << 4)) - 16);
                }
            } else {
                for (int k = 0; k < 16; k++) {
                    q[k] = IQ4_VALUES[x[2 + k] & 0x0F];
                    q[k + 16] = IQ4_VALUES[x[2 + k] >> 4];
                }
            }
        }
    }
}

int pt_gguf_to_q8_0(int32_t type, const void *x, int64_t rows, int64_t cols, void *out) {
    q8_job j = {type, (const uint8_t *)x, (uint8_t *)out, cols, pt_gguf_row_bytes(type, cols)};
    if ((type != G_Q5_0 && type != G_IQ4_NL) || j.rb < 0 || rows < 0) return -1;
    pt_run_rows(q8_rows, &j, rows, cols);
    return 0;
}
