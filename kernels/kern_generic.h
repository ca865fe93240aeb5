/* Plain-C kernels, included by each kern_<isa>.c so the compiler vectorises them for that ISA (the file is
 * compiled under the ISA's target pragma). Everything here is static: each ISA gets its own copy. The scalar path's
 * copy (kern_scalar.c) is the reference the others are tested against. */

static float dot_f32_g(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+:s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* e^x in float arithmetic the compiler vectorises (expf is a library call per value): x = k ln2 + r with
 * |r| <= ln2/2 (Cody-Waite, ln2 in two parts), e^r by Cephes' expf polynomial, 2^k built in the exponent bits.
 * Within 2 ulp of expf from -87.3 to 88.3; below, e^-87.3 (1.2e-38) stands in for the tiny true value, above
 * 88.4 the result is infinity, as expf's is from 88.7: harmless where it is used (softmax weights, SiLU, GELU). NaN
 * stays NaN. */
static inline float exp_g(float x) {
    float c = x < -87.3365f ? -87.3365f : (x > 88.7228f ? 88.7228f : x);
    float k = (c * 1.44269504f + 12582912.0f) - 12582912.0f;          /* round to nearest, |k| < 2^22 */
    float r = (c - k * 0.693359375f) - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float y = p * pt_bits_f32((uint32_t)((int32_t)k + 127) << 23);
    return x == x ? y : x;
}

/* scores[p] = exp(scores[p] - m) in place; returns their sum. The sum runs in 8 interleaved partial sums in a fixed
 * order, never the vectoriser's: its order would follow the buffer's alignment, which differs between the threads'
 * scratch buffers, and a query must get the same bits whichever thread and batch computes it (a reused KV cache must
 * give the logits a fresh prefill gives). */
static float exp_scores(float *scores, int64_t n, float m) {
#pragma omp simd
    for (int64_t p = 0; p < n; p++) scores[p] = exp_g(scores[p] - m);
    float part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, sum = 0.0f;
    int64_t p = 0;
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < 8; i++) part[i] += scores[p + i];
    for (int i = 0; i < 8; i++) sum += part[i];
    for (; p < n; p++) sum += scores[p];
    return sum;
}

static inline float softcap_g(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }

/* out[i] = sum over p of w[p] * v[p][i] (v float rows of hd), 32 columns at a time in a local accumulator the
 * compiler keeps in registers. Each output is its own sum over p in order, so its bits do not depend on how the
 * loop is vectorised. */
static void weigh_rows_g(const float *w, const float *v, int64_t n, int64_t hd, float *out) {
    int64_t c = 0;
    for (; c + 32 <= hd; c += 32) {
        float acc[32] = {0.0f};
        for (int64_t p = 0; p < n; p++) {
            const float wp = w[p], *vp = v + p * hd + c;
#pragma omp simd
            for (int i = 0; i < 32; i++) acc[i] += wp * vp[i];
        }
        memcpy(out + c, acc, sizeof acc);
    }
    for (int64_t i = c; i < hd; i++) out[i] = 0.0f;
    for (int64_t p = 0; p < n && c < hd; p++) {
        const float wp = w[p], *vp = v + p * hd;
        for (int64_t i = c; i < hd; i++) out[i] += wp * vp[i];
    }
}

/* One query head over one block of n cached positions (at most PT_ATTN_BLOCK): k, v are [n][hd]; scores is
 * scratch of n floats. Writes the block's largest score ml[0], the sum of exp(score - ml[0]) ml[1], and
 * out[hd] = the sum of exp(score - ml[0]) * v: not yet divided, since attention.c folds the blocks of a query in
 * order (online softmax). A nonzero slope adds ALiBi's slope * (rel0 + p) to the scaled score of position p (rel0: the
 * first key's position minus the query's, so the bias is <= 0); softcap > 0 then caps the scores at +-softcap with
 * tanh (Gemma 2), 0 leaves them. */
static void attn_block_g(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                         float softcap, float slope, float rel0, float *scores, float *out, float *ml) {
    float m = -INFINITY;
    for (int64_t p = 0; p < n; p++) {
        float s = dot_f32_g(q, k + p * hd, hd) * scale;
        if (slope != 0.0f) s += slope * (rel0 + (float)p);
        s = softcap_g(s, softcap);
        scores[p] = s;
        if (s > m) m = s;
    }
    ml[0] = m;
    ml[1] = exp_scores(scores, n, m);
    weigh_rows_g(scores, v, n, hd, out);
}

/* ---- norms ---- */
/* sums in 16 interleaved partial sums in a fixed order (as exp_scores, for the same reason): a row gets the same bits
 * whatever its alignment, so a token normalised within a batch of T gets the bits it gets alone */
#define PARTS 16
static float sum_g(const float *x, int64_t n) {
    float part[PARTS] = {0.0f}, s = 0.0f;
    int64_t i = 0;
    for (; i + PARTS <= n; i += PARTS)
        for (int j = 0; j < PARTS; j++) part[j] += x[i + j];
    for (int j = 0; j < PARTS; j++) s += part[j];
    for (; i < n; i++) s += x[i];
    return s;
}

static float sum_sq_g(const float *x, int64_t n, float mean) {   /* sum of (x - mean)^2 */
    float part[PARTS] = {0.0f}, s = 0.0f;
    int64_t i = 0;
    for (; i + PARTS <= n; i += PARTS)
        for (int j = 0; j < PARTS; j++) part[j] += (x[i + j] - mean) * (x[i + j] - mean);
    for (int j = 0; j < PARTS; j++) s += part[j];
    for (; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return s;
}

/* y[r] = norm(x[r]) * w[r % w_rows] (+ b[r % w_rows]) for rows r < rows of D values; in place allowed.
 * kind 0: RMSNorm x / sqrt(mean(x^2) + eps); kind 1: LayerNorm (x - mean) / sqrt(var + eps). w, b may be NULL. */
static void norm_g(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
                   int64_t w_rows, float *y) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * D, *wr = w ? w + (r % w_rows) * D : 0, *br = b ? b + (r % w_rows) * D : 0;
        float *yr = y + r * D;
        const float mean = kind == 1 ? sum_g(xr, D) / (float)D : 0.0f;
        const float inv = 1.0f / sqrtf(sum_sq_g(xr, D, mean) / (float)D + eps);
        if (wr && br) {
#pragma omp simd
            for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mean) * inv * wr[i] + br[i];
        } else if (wr) {
#pragma omp simd
            for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mean) * inv * wr[i];
        } else if (br) {
#pragma omp simd
            for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mean) * inv + br[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - mean) * inv;
        }
    }
}

/* ---- activations, in forms the compiler vectorises (tanhf and erff are a library call per value) ---- */
static inline float silu_g(float x) { return x / (1.0f + exp_g(-x)); }

/* 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): exact algebra, and no cancellation
 * in 1 + tanh(u) for negative x */
static inline float gelu_tanh_g(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_g(-2.0f * u));
}

/* erfc(z): Numerical Recipes' erfcc, a Chebyshev fit of erfc(|z|) e^(z^2) (relative error below 1.2e-7), and
 * 2 - erfc(-z) for z < 0 */
static inline float erfc_g(float z) {
    const float a = fabsf(z), t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float r = t * exp_g(p - a * a);
    return z < 0.0f ? 2.0f - r : r;
}

/* 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): erfc keeps the precision of the small negative side */
static inline float gelu_erf_g(float x) { return 0.5f * x * erfc_g(-0.7071067811865476f * x); }

static inline float relu_g(float x) { return x > 0.0f ? x : 0.0f; }
static inline float relu2_g(float x) { return x > 0.0f ? x * x : 0.0f; }     /* squared ReLU (Nemotron, Arcee) */

/* one loop per activation, each vectorised whole: y[i] = act(y[i]) in place */
#define ACT_LOOP(f)                                                                                               \
    do {                                                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = f(y[i]);                                       \
    } while (0)

static void act_g(int act, float *y, int64_t n) {
    switch (act) {
    case 1: ACT_LOOP(silu_g); break;
    case 2: ACT_LOOP(gelu_tanh_g); break;
    case 3: ACT_LOOP(gelu_erf_g); break;
    case 4: ACT_LOOP(relu_g); break;
    case 6: ACT_LOOP(relu2_g); break;
    default: break;
    }
}

/* y[t][i] = act(y[t][i] + b[i]) for t < T, i < N; b may be NULL. act: 0 none, 1 silu, 2 gelu_tanh, 3 gelu, 4 relu,
 * 6 relu2 */
static void bias_act_g(float *y, const float *b, int64_t T, int64_t N, int act) {
    for (int64_t t = 0; t < T; t++) {
        float *yt = y + t * N;
        if (b) {
#pragma omp simd
            for (int64_t i = 0; i < N; i++) yt[i] += b[i];
        }
        act_g(act, yt, N);
    }
}

/* out[i] = act(gate[i]) * up[i] (SwiGLU with act 1, GeGLU with 2 or 3); act 5 gpt-oss's clamped SwiGLU */
#define GLU_LOOP(f)                                                                                               \
    do {                                                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) out[i] = f(g[i]) * u[i];                              \
    } while (0)

static inline float identity_g(float x) { return x; }
static inline float sigmoid_g(float x) { return 1.0f / (1.0f + exp_g(-x)); }    /* Qwen3-Next's attention gate */

/* gpt-oss's clamped SwiGLU: gate = min(gate, 7), up = clamp(up, -7, 7), (up + 1) * gate * sigmoid(1.702 gate) */
static inline float swiglu_oai_g(float g, float u) {
    g = g < 7.0f ? g : 7.0f;
    u = u < -7.0f ? -7.0f : (u > 7.0f ? 7.0f : u);
    return (u + 1.0f) * (g / (1.0f + exp_g(-1.702f * g)));
}

static void glu_g(int act, const float *g, const float *u, int64_t n, float *out) {
    switch (act) {
    case 5:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) out[i] = swiglu_oai_g(g[i], u[i]);
        break;
    case 1: GLU_LOOP(silu_g); break;
    case 2: GLU_LOOP(gelu_tanh_g); break;
    case 3: GLU_LOOP(gelu_erf_g); break;
    case 4: GLU_LOOP(relu_g); break;
    case 6: GLU_LOOP(relu2_g); break;
    case 7: GLU_LOOP(sigmoid_g); break;
    default: GLU_LOOP(identity_g); break;
    }
}

static inline void store_y(float *y, float v, int accumulate) { *y = accumulate ? *y + v : v; }

/* ternary rows (PT_TQ2, internal.h) against per-token int8 activations: sum q * (u - 1) = sum q * u - sum q, the
 * first in int32 per block (u in 0..2, q in -128..127: at most 32 * 254 a block), y = that / d[t] * scale. Exact
 * integer sums, so every path gives the same bits. */
static void rows_tq2_g(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                       float *y, int64_t ldy, int accumulate) {
    const int64_t K = a->K, nb = K / QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        float scale;
        memcpy(&scale, row, 4);
        const uint8_t *blocks = row + TQ2_HEADER;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *q = a->q + t * K;
            int32_t acc = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *u = blocks + b * 8;
                const int8_t *qb = q + b * QK;
                int32_t s = 0;
                for (int k = 0; k < 4; k++)
#pragma omp simd reduction(+:s)
                    for (int j = 0; j < 8; j++) s += (int32_t)qb[8 * k + j] * (int32_t)((u[j] >> (2 * k)) & 3);
                acc += s;
            }
            store_y(y + t * ldy + r, (float)(acc - a->s[t]) / a->d[t] * scale, accumulate);
        }
    }
}

/* float weights (f32, f16, bf16) against float activations x [T][K] */
static void rows_float_g(const void *w, int32_t dtype, int64_t K, int64_t r0, int64_t r1, const float *x,
                         int64_t T, float *y, int64_t ldy, int accumulate) {
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * K;
            float s = 0.0f;
            if (dtype == PT_F32) {
                s = dot_f32_g((const float *)w + r * K, xt, K);
            } else {
                const uint16_t *wr = (const uint16_t *)w + r * K;
                if (dtype == PT_F16) {
                    for (int64_t i = 0; i < K; i++) s += pt_h2f(wr[i]) * xt[i];
                } else {
#pragma omp simd reduction(+:s)
                    for (int64_t i = 0; i < K; i++) s += pt_bf2f(wr[i]) * xt[i];
                }
            }
            store_y(y + t * ldy + r, s, accumulate);
        }
    }
}

/* an interleaved matrix's groups (layout: interleave.c), rows r0..r1 (multiples of 8): for each row and token the
 * plain scalar kernels' arithmetic (kern_scalar.c), so the same bits. The reference the fast kernels are held to. */
static void rows_x8_g(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y, int64_t ldy,
                      int accumulate, int q4) {
    const int64_t nb = a->K / QK, bb = q4 ? Q4X8_BYTES : Q8X8_BYTES;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *group = w + r / 8 * nb * bb;
        const int i = (int)(r % 8);
        for (int64_t t = 0; t < T; t++) {
            const int8_t *aq = a->q + t * a->K;
            const float *ad = a->d + t * nb;
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = group + b * bb, *xb = blk + 16;
                const int8_t *x = aq + b * QK;
                int32_t isum = 0;
                for (int j = 0; j < (q4 ? QK / 2 : QK); j++) {
                    const uint8_t byte = xb[(j / 4) * 32 + 4 * i + j % 4];   /* quant byte j of row i */
                    if (q4) {
                        isum += ((int32_t)(byte & 0x0F) - 8) * x[j];
                        isum += ((int32_t)(byte >> 4) - 8) * x[j + QK / 2];
                    } else {
                        isum += (int32_t)(int8_t)byte * x[j];
                    }
                }
                sum += pt_h2f(pt_load_u16(blk + 2 * i)) * ad[b] * (float)isum;
            }
            store_y(y + t * ldy + r, sum, accumulate);
        }
    }
}

static void rows_q8x8_g(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y, int64_t ldy,
                        int accumulate) {
    rows_x8_g(w, r0, r1, a, T, y, ldy, accumulate, 0);
}

static void rows_q4x8_g(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y, int64_t ldy,
                        int accumulate) {
    rows_x8_g(w, r0, r1, a, T, y, ldy, accumulate, 1);
}

#include "kern_gguf.h"   /* GGUF's other block types: the plain C products every path has */
#include "kern_scan.h"   /* the recurrent mixers' chunked scans */

/* issue 33, LoRA's backward: dx rows t0..t1-1 += dy[t][p] x the decoded panel's row p, over its n rows (lora.c).
 * Tiles of MT_TB dx rows x MT_CB columns stay in registers over the panel (AVX2: 6 x 16 = 12 vectors of 8, with the
 * panel's two and the broadcast dy value: no spills); every dx value takes its additions in p order, so the paths
 * differ only where one fuses a multiply-add */
#define MT_TB 6
#define MT_CB 16
static void mt_panel_g(const float *panel, int64_t n, int64_t C, const float *dy, int64_t R, float *dx, int64_t t0,
                       int64_t t1) {
    int64_t t = t0;
    for (; t + MT_TB <= t1; t += MT_TB) {
        int64_t c = 0;
        for (; c + MT_CB <= C; c += MT_CB) {
            float acc[MT_TB][MT_CB];
            for (int i = 0; i < MT_TB; i++)
                for (int k = 0; k < MT_CB; k++) acc[i][k] = dx[(t + i) * C + c + k];
            for (int64_t p = 0; p < n; p++) {
                const float *w = panel + p * C + c;
                for (int i = 0; i < MT_TB; i++) {
                    const float a = dy[(t + i) * R + p];
#pragma omp simd
                    for (int k = 0; k < MT_CB; k++) acc[i][k] += a * w[k];
                }
            }
            for (int i = 0; i < MT_TB; i++)
                for (int k = 0; k < MT_CB; k++) dx[(t + i) * C + c + k] = acc[i][k];
        }
        for (int i = 0; i < MT_TB && c < C; i++)           /* the last columns, a row at a time */
            for (int64_t p = 0; p < n; p++) {
                const float a = dy[(t + i) * R + p];
                const float *w = panel + p * C;
                for (int64_t k = c; k < C; k++) dx[(t + i) * C + k] += a * w[k];
            }
    }
    for (; t < t1; t++)                                     /* the last rows */
        for (int64_t p = 0; p < n; p++) {
            const float a = dy[t * R + p];
            const float *w = panel + p * C;
            for (int64_t k = 0; k < C; k++) dx[t * C + k] += a * w[k];
        }
}
