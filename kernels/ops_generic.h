/* Plain-C kernels, included by each kern_<isa>.c so the compiler vectorises them for that ISA (the file is
 * compiled under the ISA's target pragma). Everything here is static: each ISA gets its own copy. */

/* y[D] = x[D] / sqrt(mean(x^2) + eps) * w[D] */
static void rmsnorm_g(const float *x, const float *w, float eps, int64_t D, float *y) {
    float ss = 0.0f;
#pragma omp simd reduction(+:ss)
    for (int64_t i = 0; i < D; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)D + eps);
#pragma omp simd
    for (int64_t i = 0; i < D; i++) y[i] = x[i] * r * w[i];
}

static float dot_f32_g(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+:s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* e^x in float arithmetic the compiler vectorises (expf is a library call per value): x = k ln2 + r with
 * |r| <= ln2/2 (Cody-Waite, ln2 in two parts), e^r by Cephes' expf polynomial, 2^k built in the exponent bits.
 * Within 2 ulp of expf from -87.3 to 88.3; below, e^-87.3 (1.2e-38) stands in for the tiny true value, above
 * 88.4 the result is infinity, as expf's is from 88.7: harmless where it is used (softmax weights, SiLU). NaN stays
 * NaN. */
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

/* scores[p] = exp(scores[p] - m) in place; returns 1 / their sum. The sum runs in 8 interleaved partial sums in a
 * fixed order, never the vectoriser's: its order would follow the buffer's alignment, which differs between the
 * threads' scratch buffers, and a query must get the same bits whichever thread and batch computes it (a reused KV
 * cache must give the logits a fresh prefill gives). */
static float exp_scores(float *scores, int64_t n, float m) {
#pragma omp simd
    for (int64_t p = 0; p < n; p++) scores[p] = exp_g(scores[p] - m);
    float part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, sum = 0.0f;
    int64_t p = 0;
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < 8; i++) part[i] += scores[p + i];
    for (int i = 0; i < 8; i++) sum += part[i];
    for (; p < n; p++) sum += scores[p];
    return 1.0f / sum;
}

static inline float softcap_g(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }

/* one query head over n cached positions: k, v are [n][hd]; scores is scratch of n floats; out is [hd].
 * softcap > 0 caps the scaled scores at +-softcap with tanh (Gemma 2), 0 leaves them. */
static void attn_head_g(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                        float softcap, float *scores, float *out) {
    float m = -INFINITY;
    for (int64_t p = 0; p < n; p++) {
        float s = softcap_g(dot_f32_g(q, k + p * hd, hd) * scale, softcap);
        scores[p] = s;
        if (s > m) m = s;
    }
    float inv = exp_scores(scores, n, m);
    for (int64_t i = 0; i < hd; i++) out[i] = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        const float wgt = scores[p] * inv, *vp = v + p * hd;
#pragma omp simd
        for (int64_t i = 0; i < hd; i++) out[i] += wgt * vp[i];
    }
}

/* the same over int8 rows with one scale per row: k, v are [n][hd] int8, ks, vs are [n] */
static void attn_head_q8_g(const float *q, const int8_t *k, const float *ks, const int8_t *v, const float *vs,
                           int64_t n, int64_t hd, float scale, float softcap, float *scores, float *out) {
    float m = -INFINITY;
    for (int64_t p = 0; p < n; p++) {
        const int8_t *kp = k + p * hd;
        float d = 0.0f;
#pragma omp simd reduction(+:d)
        for (int64_t i = 0; i < hd; i++) d += q[i] * (float)kp[i];
        float s = softcap_g(d * ks[p] * scale, softcap);
        scores[p] = s;
        if (s > m) m = s;
    }
    float inv = exp_scores(scores, n, m);
    for (int64_t i = 0; i < hd; i++) out[i] = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        const float wgt = scores[p] * inv * vs[p];
        const int8_t *vp = v + p * hd;
#pragma omp simd
        for (int64_t i = 0; i < hd; i++) out[i] += wgt * (float)vp[i];
    }
}

static void swiglu_g(const float *g, const float *u, int64_t n, float *out) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + exp_g(-g[i])) * u[i];
}

static inline void store_y(float *y, float v, int accumulate) { *y = accumulate ? *y + v : v; }

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
