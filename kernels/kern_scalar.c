/* The scalar path: portable C, the reference every SIMD path is tested against. */
#include "internal.h"
#include "kern_generic.h"

/* x[K] -> q8 blocks with an fp32 scale d = amax/127, q = round_half_even(x / d), s = sum(q) */
static void quant_act_scalar(const float *x, int64_t K, int8_t *q, float *d, int32_t *s) {
    for (int64_t b = 0; b < K / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        int nan = 0;
        for (int j = 0; j < QK; j++) { amax = fmaxf(amax, fabsf(xb[j])); nan |= isnan(xb[j]); }
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        if (!isfinite(id)) { db = 0.0f; id = 0.0f; }       /* a block too small to scale: zero */
        if (nan) { db = NAN; id = 0.0f; }                    /* a NaN input gives NaN outputs, never a number */
        int32_t sum = 0;
        for (int j = 0; j < QK; j++) {
            long v = lrintf(xb[j] * id);
            v = v > 127 ? 127 : (v < -127 ? -127 : v);      /* never -128: the SIMD sign trick needs |q| <= 127 */
            q[b * QK + j] = (int8_t)v;
            sum += (int32_t)v;
        }
        d[b] = db;
        s[b] = sum;
    }
}

static void rows_q8_scalar(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                           int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *aq = a->q + t * a->K;
            const float *ad = a->d + t * nb;
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * Q8_BYTES;
                const int8_t *wq = (const int8_t *)(blk + 2);
                int32_t isum = 0;
                for (int j = 0; j < QK; j++) isum += (int32_t)wq[j] * aq[b * QK + j];
                sum += pt_h2f(pt_load_u16(blk)) * ad[b] * (float)isum;
            }
            store_y(y + t * ldy + r, sum, accumulate);
        }
    }
}

static void rows_q4_scalar(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                           int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *aq = a->q + t * a->K;
            const float *ad = a->d + t * nb;
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * Q4_BYTES, *qs = blk + 2;
                const int8_t *xb = aq + b * QK;
                int32_t isum = 0;
                for (int j = 0; j < QK / 2; j++) {
                    isum += ((int32_t)(qs[j] & 0x0F) - 8) * xb[j];
                    isum += ((int32_t)(qs[j] >> 4) - 8) * xb[j + QK / 2];
                }
                sum += pt_h2f(pt_load_u16(blk)) * ad[b] * (float)isum;
            }
            store_y(y + t * ldy + r, sum, accumulate);
        }
    }
}

const pt_kernels pt_kernels_scalar = {
    .name = "scalar",
    .quant_act = quant_act_scalar,
    .rows_q8 = rows_q8_scalar,
    .rows_q4 = rows_q4_scalar,
    .rows_float = rows_float_g,
    .rows_q8x8 = rows_q8x8_g,
    .rows_q4x8 = rows_q4x8_g,
    .rows_gguf = rows_gguf_g,
    .norm = norm_g,
    .attn_block = attn_block_g,
    .delta_chunk = delta_chunk_g,
    .ssd_chunk = ssd_chunk_g,
    .sel_steps = sel_steps_g,
    .delta_step = delta_step_g,
    .ssd_steps = ssd_steps_g,
    .sel_chunk = sel_chunk_g,
    .rows_tq2 = rows_tq2_g,
    .bias_act = bias_act_g,
    .glu = glu_g,
    .mt_panel = mt_panel_g,
};
