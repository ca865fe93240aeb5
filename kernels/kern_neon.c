/* The ARM64 NEON path: Apple Silicon Macs, ARM Linux. NEON is part of every ARMv8-A CPU, so the path needs no
 * run-time check. The int8 dots use sdot where the compiler targets the dot-product extension (Apple's arm64 default;
 * -march=armv8.2-a+dotprod elsewhere) and widening multiplies otherwise. q4_0 nibbles become signed (-8..7) before
 * the dot, so the activation block sums are not needed here. GGUF's block types (Q4_K ... IQ4_XS) are in
 * kern_neon_gguf.h, bit for bit the scalar path's. Tested against the scalar path in kernels/selftest.c (under QEMU,
 * both variants). */
#include "internal.h"
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#include "kern_generic.h"

/* acc + the 16 products a[i] * b[i], spread over 4 lanes (which product lands in which lane differs between the
 * two ways; only the lanes' total is used) */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#ifdef __ARM_FEATURE_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

static inline float h2f(const uint8_t *p) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(pt_load_u16(p)))), 0);
}

/* x[K] -> q8 blocks: d = amax / 127, q = round_half_even(x / d) clamped to +-127, s = sum(q) */
static void quant_act_neon(const float *x, int64_t K, int8_t *q, float *d, int32_t *s) {
    for (int64_t b = 0; b < K / QK; b++) {
        const float *xb = x + b * QK;
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        uint32x4_t unord = vdupq_n_u32(0);
        for (int j = 0; j < 8; j++) {
            v[j] = vld1q_f32(xb + 4 * j);
            m = vmaxq_f32(m, vabsq_f32(v[j]));
            unord = vorrq_u32(unord, vmvnq_u32(vceqq_f32(v[j], v[j])));
        }
        float amax = vmaxvq_f32(m);
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        if (!isfinite(id)) { db = 0.0f; id = 0.0f; }       /* a block too small to scale: zero */
        if (vmaxvq_u32(unord)) { db = NAN; id = 0.0f; }    /* a NaN input gives NaN outputs */
        int16x8_t h[4];
        for (int j = 0; j < 4; j++)
            h[j] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j], id))),
                                vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j + 1], id))));
        const int8x16_t lo = vdupq_n_s8(-127);
        int8x16_t q0 = vmaxq_s8(vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])), lo);
        int8x16_t q1 = vmaxq_s8(vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])), lo);
        vst1q_s8(q + b * QK, q0);
        vst1q_s8(q + b * QK + 16, q1);
        d[b] = db;
        s[b] = (int32_t)vaddlvq_s8(q0) + (int32_t)vaddlvq_s8(q1);
    }
}

/* a q8_0 or q4_0 weight block as 32 signed bytes, in two halves */
static inline void load_block(const uint8_t *blk, int is_q4, int8x16_t *w0, int8x16_t *w1) {
    if (is_q4) {
        uint8x16_t raw = vld1q_u8(blk + 2);
        const int8x16_t eight = vdupq_n_s8(8);
        *w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);   /* values 0..15 */
        *w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);               /* values 16..31 */
    } else {
        *w0 = vld1q_s8((const int8_t *)(blk + 2));
        *w1 = vld1q_s8((const int8_t *)(blk + 18));
    }
}

/* a weight block's dot with 32 int8 activations, as 4 float lanes */
static inline float32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t *xq) {
    return vcvtq_f32_s32(dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(xq)), w1, vld1q_s8(xq + 16)));
}

/* weight rows r0..r1 against T activation rows; is_q4 is a constant at each call, so each layout gets its own copy */
static inline void rows_int(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                            float *y, int64_t ldy, int accumulate, int is_q4) {
    const int64_t K = a->K, nb = K / QK, bytes = is_q4 ? Q4_BYTES : Q8_BYTES;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        int64_t t = 0;
        /* 4 tokens share each weight block load; each token sums its blocks in the one-token loop's order (even
         * and odd blocks in two chains), so its result does not depend on the batch it came in (see kern_x86.h) */
        for (; t + 4 <= T; t += 4) {
            float32x4_t acc[2][4];
            for (int j = 0; j < 4; j++) acc[0][j] = acc[1][j] = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * bytes;
                int8x16_t w0, w1;
                load_block(blk, is_q4, &w0, &w1);
                float dw = h2f(blk);
                for (int j = 0; j < 4; j++) {
                    float32x4_t p = dot32(w0, w1, a->q + (t + j) * K + b * QK);
                    acc[b & 1][j] = vfmaq_n_f32(acc[b & 1][j], p, dw * a->d[(t + j) * nb + b]);
                }
            }
            for (int j = 0; j < 4; j++)
                store_y(y + (t + j) * ldy + r, vaddvq_f32(vaddq_f32(acc[0][j], acc[1][j])), accumulate);
        }
        for (; t < T; t++) {                      /* one token: two chains hide the multiply-add latency */
            const int8_t *xq = a->q + t * K;
            const float *xd = a->d + t * nb;
            float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
            int64_t b = 0;
            for (; b + 2 <= nb; b += 2) {
                const uint8_t *b0 = row + b * bytes, *b1 = b0 + bytes;
                int8x16_t w0, w1, w2, w3;
                load_block(b0, is_q4, &w0, &w1);
                load_block(b1, is_q4, &w2, &w3);
                acc0 = vfmaq_n_f32(acc0, dot32(w0, w1, xq + b * QK), h2f(b0) * xd[b]);
                acc1 = vfmaq_n_f32(acc1, dot32(w2, w3, xq + (b + 1) * QK), h2f(b1) * xd[b + 1]);
            }
            if (b < nb) {
                const uint8_t *b0 = row + b * bytes;
                int8x16_t w0, w1;
                load_block(b0, is_q4, &w0, &w1);
                acc0 = vfmaq_n_f32(acc0, dot32(w0, w1, xq + b * QK), h2f(b0) * xd[b]);
            }
            store_y(y + t * ldy + r, vaddvq_f32(vaddq_f32(acc0, acc1)), accumulate);
        }
    }
}

static void rows_q8_neon(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                         float *y, int64_t ldy, int accumulate) {
    rows_int(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 0);
}

static void rows_q4_neon(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                         float *y, int64_t ldy, int accumulate) {
    rows_int(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 1);
}

/* 4 float weights from f32, f16 or bf16 (shifted into the high half) */
static inline float32x4_t load4(const void *w, int32_t dtype, int64_t i) {
    if (dtype == PT_F32) return vld1q_f32((const float *)w + i);
    uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (dtype == PT_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

static void rows_float_neon(const void *w, int32_t dtype, int64_t K, int64_t r0, int64_t r1, const float *x,
                            int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t esize = dtype == PT_F32 ? 4 : 2;
    for (int64_t r = r0; r < r1; r++) {
        const void *row = (const uint8_t *)w + r * K * esize;
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * K;
            float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
            int64_t i = 0;
            for (; i + 8 <= K; i += 8) {
                acc0 = vfmaq_f32(acc0, load4(row, dtype, i), vld1q_f32(xt + i));
                acc1 = vfmaq_f32(acc1, load4(row, dtype, i + 4), vld1q_f32(xt + i + 4));
            }
            for (; i + 4 <= K; i += 4) acc0 = vfmaq_f32(acc0, load4(row, dtype, i), vld1q_f32(xt + i));
            float s = vaddvq_f32(vaddq_f32(acc0, acc1));
            for (; i < K; i++) {
                const uint16_t *h = (const uint16_t *)row;
                s += (dtype == PT_F32 ? ((const float *)row)[i] : dtype == PT_F16 ? pt_h2f(h[i]) : pt_bf2f(h[i])) *
                     xt[i];
            }
            store_y(y + t * ldy + r, s, accumulate);
        }
    }
}

#include "kern_neon_gguf.h"     /* GGUF's block types: rows_gguf_neon */

#ifdef __ARM_FEATURE_DOTPROD
#define NEON_NAME "neon-dotprod"
#else
#define NEON_NAME "neon"
#endif

const pt_kernels pt_kernels_neon = {
    .name = NEON_NAME,
    .quant_act = quant_act_neon,
    .rows_q8 = rows_q8_neon,
    .rows_q4 = rows_q4_neon,
    .rows_float = rows_float_neon,
    .rows_q8x8 = rows_q8x8_g,
    .rows_q4x8 = rows_q4x8_g,
    .rows_gguf = rows_gguf_neon,
    /* SIMD kernels for all ten types. The loader keeps the K-quants and IQ4_XS as stored, as on x86: decoded to
     * q8_0 a Q4_K_M model would take about 1.8x its file's size in memory (a laptop's whole RAM for a model that
     * fits), and their speed against q8_0 is not measured on an ARM CPU yet (QEMU cannot say). The 32-value types
     * (Q4_1, Q5_0, Q5_1, IQ4_NL: 1.5x at most) are decoded as on x86 unless a load asks for them stored. */
    .gguf_fast = (1u << GG_Q2_K) | (1u << GG_Q3_K) | (1u << GG_Q4_K) | (1u << GG_Q5_K) | (1u << GG_Q6_K) |
                 (1u << GG_IQ4_XS),
    .gguf_simd = NEON_GGUF_SIMD,
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
#else
const pt_kernels pt_kernels_neon = {.name = 0};
#endif
