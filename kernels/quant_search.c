/* Weight quantizers that search for the scales with the least squared error, where quant.c's q4_0 takes GGML's
 * reference (d = the value of largest magnitude / -8): q4_0 and GGUF's Q5_0, Q4_K, Q5_K and Q6_K (layouts in
 * gguf_quants.c, which decodes them). Used for weights written once (petit convert, the trainer's export); never
 * for activations.
 *
 * A block's scale: candidates d = amax / c for c across the top of the level range (both signs: the grid has one
 * level more below zero than above), each refit by least squares over the levels it rounds to; the best by that
 * fit is rounded to fp16 and the levels rounded again with it. The stored scale is never worse than GGML's: its
 * error is measured too and the better kept.
 *
 * K-quants: each sub-block's (scale, min) or scale is fitted so, then the super-block's fp16 d (and dmin) is set
 * by the largest, each sub-block's 6-bit (Q4_K, Q5_K) or 8-bit (Q6_K) integer scale tried at its rounding and one
 * step either side, with the levels rounded again for each and the least error kept. The error is plain squared
 * error: these minimise each tensor's RMSE, which llama.cpp's reference quantizers weight by |x| or x^2. */
#include "internal.h"
#include <math.h>
#include <stdatomic.h>

enum { G_Q5_0 = 6, G_Q4_K = 12, G_Q5_K = 13, G_Q6_K = 14 };

static inline int nearest(float v) { return (int)lrintf(v); }
static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline float f16_round(float v) { return pt_h2f(pt_f2h(v)); }
static inline void put_f16(uint8_t *p, float v) { uint16_t h = pt_f2h(v); memcpy(p, &h, 2); }

/* squared error of x stored as d * l, l = round(x / d) in [lo, hi]; the levels into L (when given) */
static float err_levels(const float *x, int n, float d, int lo, int hi, int *L) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float e = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest(x[i] * id), lo, hi);
        if (L) L[i] = l;
        float diff = x[i] - d * (float)l;
        e += diff * diff;
    }
    return e;
}

/* the scale d (either sign) that best stores x as d * l, l in [-nmax, nmax - 1]; 0 for an all-zero block */
static float fit_sym(const float *x, int n, int nmax) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    if (amax == 0.0f) return 0.0f;
    float best_d = 0.0f, best = -1.0f;
    for (int s = -1; s <= 1; s += 2) {
        for (int k = 0; k <= 20; k++) {
            const float id = (float)s * ((float)nmax - 1.5f + 0.125f * (float)k) / amax;
            float sxl = 0.0f, sll = 0.0f;
            for (int i = 0; i < n; i++) {
                float l = (float)clampi(nearest(x[i] * id), -nmax, nmax - 1);
                sxl += x[i] * l;
                sll += l * l;
            }
            /* least squares over these levels: d = sxl / sll leaves sum x^2 - sxl^2 / sll */
            if (sll > 0.0f && sxl * sxl / sll > best) {
                best = sxl * sxl / sll;
                best_d = sxl / sll;
            }
        }
    }
    return best_d;
}

/* q4_0 (nmax 8) and Q5_0 (nmax 16): a block of 32 as an fp16 d and its levels + nmax */
static void block_sym(const float *x, int nmax, float *d_out, int *L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    float ggml = f16_round(max / (float)-nmax), fit = f16_round(fit_sym(x, 32, nmax));
    int Lf[32];
    float eg = err_levels(x, 32, ggml, -nmax, nmax - 1, L), ef = err_levels(x, 32, fit, -nmax, nmax - 1, Lf);
    *d_out = ggml;
    if (ef < eg) {
        *d_out = fit;
        memcpy(L, Lf, sizeof Lf);
    }
}

static void row_q4_0(const float *x, int64_t cols, uint8_t *o) {
    for (int64_t b = 0; b < cols / 32; b++, x += 32, o += 18) {
        float d;
        int L[32];
        block_sym(x, 8, &d, L);
        put_f16(o, d);
        for (int j = 0; j < 16; j++) o[2 + j] = (uint8_t)((L[j] + 8) | (L[j + 16] + 8) << 4);
    }
}

static void row_q5_0(const float *x, int64_t cols, uint8_t *o) {
    for (int64_t b = 0; b < cols / 32; b++, x += 32, o += 22) {
        float d;
        int L[32];
        uint32_t qh = 0;
        block_sym(x, 16, &d, L);
        put_f16(o, d);
        for (int j = 0; j < 32; j++) {
            int q = L[j] + 16;
            qh |= (uint32_t)(q >> 4) << j;
            if (j < 16) o[6 + j] = (uint8_t)(q & 15);
            else o[6 + j - 16] |= (uint8_t)((q & 15) << 4);
        }
        memcpy(o + 2, &qh, 4);
    }
}

/* the (s, m) that best store x as s * l + m, l in [0, nmax], m <= 0 (a K-quant sub-block's scale and min) */
static void fit_asym(const float *x, int n, int nmax, float *s_out, float *m_out) {
    float lo = 0.0f, hi = x[0], sx = 0.0f, sx2 = 0.0f;
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        sx += x[i];
        sx2 += x[i] * x[i];
    }
    *s_out = 0.0f;
    *m_out = lo;
    if (hi <= lo) return;
    float best = INFINITY, s = (hi - lo) / (float)nmax, m = lo;
    for (int k = 0; k <= 24; k++) {          /* 24 candidates spread, then two refits from the best */
        float is = k < 21 ? ((float)nmax - 1.0f + 0.1f * (float)k) / (hi - lo) : (s != 0.0f ? 1.0f / s : 0.0f);
        float m0 = k < 21 ? lo : m;
        if (k >= 21 && s == 0.0f) break;
        float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
        for (int i = 0; i < n; i++) {
            float l = (float)clampi(nearest((x[i] - m0) * is), 0, nmax);
            sl += l;
            sl2 += l * l;
            sxl += x[i] * l;
        }
        float D = (float)n * sl2 - sl * sl, cs, cm;
        if (D <= 0.0f) continue;
        cs = ((float)n * sxl - sx * sl) / D;
        cm = (sl2 * sx - sl * sxl) / D;
        if (cm > 0.0f) {
            cm = 0.0f;
            cs = sxl / sl2;
        }
        float e = sx2 - 2.0f * cs * sxl - 2.0f * cm * sx + cs * cs * sl2 + 2.0f * cs * cm * sl + (float)n * cm * cm;
        if (k >= 21 && !(e < best)) break;
        if (e < best) {
            best = e;
            s = cs;
            m = cm;
        }
    }
    *s_out = s;
    *m_out = m;
}

/* squared error of a sub-block stored as d * l - dm, l = round((x + dm) / d) in [0, nmax] */
static float err_asym(const float *x, int n, float d, float dm, int nmax, int *L) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    float e = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = d != 0.0f ? clampi(nearest((x[i] + dm) * id), 0, nmax) : 0;
        if (L) L[i] = l;
        float diff = x[i] - (d * (float)l - dm);
        e += diff * diff;
    }
    return e;
}

/* Q4_K / Q5_K: 8 sub-blocks of 32; writes d, dmin and the 12 scale bytes at o, the levels into L */
static void superblock_asym(const float *x, int nmax, uint8_t *o, int *L) {
    float s[8], m[8], smax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; j++) {
        fit_asym(x + 32 * j, 32, nmax, &s[j], &m[j]);
        m[j] = -m[j];                                        /* stored as a positive min subtracted */
        smax = s[j] > smax ? s[j] : smax;
        mmax = m[j] > mmax ? m[j] : mmax;
    }
    const float d = f16_round(smax / 63.0f), dmin = f16_round(mmax / 63.0f);
    uint8_t sc[8] = {0}, mn[8] = {0};
    for (int j = 0; j < 8; j++) {
        int rs = d > 0.0f ? nearest(s[j] / d) : 0, rm = dmin > 0.0f ? nearest(m[j] / dmin) : 0;
        float best = INFINITY;
        for (int a = rs - 1; a <= rs + 1; a++) {
            for (int b = rm - 1; b <= rm + 1; b++) {
                if (a < 0 || a > 63 || b < 0 || b > 63) continue;
                int Lc[32];
                float e = err_asym(x + 32 * j, 32, d * (float)a, dmin * (float)b, nmax, Lc);
                if (e < best) {
                    best = e;
                    sc[j] = (uint8_t)a;
                    mn[j] = (uint8_t)b;
                    memcpy(L + 32 * j, Lc, sizeof Lc);
                }
            }
        }
    }
    put_f16(o, d);
    put_f16(o + 2, dmin);
    uint8_t *q = o + 4;
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) {              /* 6 bits each: 0-3 whole in bytes 0-7, 4-7 split (scale_min_k4) */
        if (j < 4) {
            q[j] = sc[j];
            q[j + 4] = mn[j];
        } else {
            q[j + 4] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
            q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            q[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void row_q4_k(const float *x, int64_t cols, uint8_t *o) {
    for (int64_t b = 0; b < cols / 256; b++, x += 256, o += 144) {
        int L[256];
        superblock_asym(x, 15, o, L);
        uint8_t *qs = o + 16;
        for (int c = 0; c < 4; c++)             /* 64 values per 32 bytes: low nibbles the first 32 */
            for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
}

static void row_q5_k(const float *x, int64_t cols, uint8_t *o) {
    for (int64_t b = 0; b < cols / 256; b++, x += 256, o += 176) {
        int L[256];
        superblock_asym(x, 31, o, L);
        uint8_t *qh = o + 16, *qs = o + 48;
        memset(qh, 0, 32);
        for (int c = 0; c < 4; c++) {           /* fifth bits: bit 2c (first 32 of the 64) and 2c + 1 of qh[l] */
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
                qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
            }
        }
    }
}

/* Q6_K: 16 sub-blocks of 16 as d * sc * l, l in [-32, 31], sc int8 */
static void row_q6_k(const float *x, int64_t cols, uint8_t *o) {
    for (int64_t b = 0; b < cols / 256; b++, x += 256, o += 210) {
        float s[16], smax = 0.0f, ssigned = 0.0f;
        for (int j = 0; j < 16; j++) {
            s[j] = fit_sym(x + 16 * j, 16, 32);
            if (fabsf(s[j]) > smax) { smax = fabsf(s[j]); ssigned = s[j]; }
        }
        /* the super-block's d: the largest scale as 127, or (signed) as -128, whichever stores the block better */
        float dc[2] = {f16_round(smax / 127.0f), f16_round(ssigned / -128.0f)}, best_total = INFINITY;
        int L[256] = {0}, Lc[16];
        int8_t scales[16] = {0};
        float dbest = 0.0f;
        for (int c = 0; c < (ssigned != 0.0f ? 2 : 1); c++) {
            const float d = dc[c];
            float total = 0.0f;
            int Lt[256];
            int8_t st[16] = {0};
            for (int j = 0; j < 16; j++) {
                int r = d != 0.0f ? nearest(s[j] / d) : 0;
                float best = INFINITY;
                for (int a = r - 1; a <= r + 1; a++) {
                    if (a < -128 || a > 127) continue;
                    float e = err_levels(x + 16 * j, 16, d * (float)a, -32, 31, Lc);
                    if (e < best) {
                        best = e;
                        st[j] = (int8_t)a;
                        memcpy(Lt + 16 * j, Lc, sizeof Lc);
                    }
                }
                total += best;
            }
            if (total < best_total) {
                best_total = total;
                dbest = d;
                memcpy(L, Lt, sizeof Lt);
                memcpy(scales, st, sizeof st);
            }
        }
        uint8_t *ql = o, *qh = o + 128;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32) {
            const int *v = L + 128 * half;
            for (int l = 0; l < 32; l++) {
                int q1 = v[l] + 32, q2 = v[l + 32] + 32, q3 = v[l + 64] + 32, q4 = v[l + 96] + 32;
                ql[l] = (uint8_t)((q1 & 15) | (q3 & 15) << 4);
                ql[l + 32] = (uint8_t)((q2 & 15) | (q4 & 15) << 4);
                qh[l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
        memcpy(o + 192, scales, 16);
        put_f16(o + 208, dbest);
    }
}

typedef struct { int32_t dtype; const float *x; uint8_t *out; int64_t cols, rb; atomic_int nonfinite; } search_job;

static void search_rows(void *ctx, int64_t r0, int64_t r1) {
    search_job *j = (search_job *)ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->cols;
        uint8_t *o = j->out + r * j->rb;
        if (!pt_row_finite(x, j->cols)) {     /* as pt_quantize: the row zeroed, the call fails */
            memset(o, 0, (size_t)j->rb);
            atomic_store(&j->nonfinite, 1);
            continue;
        }
        switch (j->dtype) {
        case PT_Q4_0: row_q4_0(x, j->cols, o); break;
        case PT_GGUF + G_Q5_0: row_q5_0(x, j->cols, o); break;
        case PT_GGUF + G_Q4_K: row_q4_k(x, j->cols, o); break;
        case PT_GGUF + G_Q5_K: row_q5_k(x, j->cols, o); break;
        case PT_GGUF + G_Q6_K: row_q6_k(x, j->cols, o); break;
        }
    }
}

int pt_quantize_search(int32_t dtype, const float *x, int64_t rows, int64_t cols, void *out) {
    if (dtype != PT_Q4_0 && dtype != PT_GGUF + G_Q5_0 && dtype != PT_GGUF + G_Q4_K && dtype != PT_GGUF + G_Q5_K &&
        dtype != PT_GGUF + G_Q6_K)
        return -1;
    search_job j = {dtype, x, (uint8_t *)out, cols, pt_row_bytes(dtype, cols), 0};
    if (j.rb < 0 || rows < 0) return -1;
    pt_run_rows(search_rows, &j, rows, cols * 8);      /* some 8 times the work of a plain quantizer per value */
    return atomic_load(&j.nonfinite) ? -2 : 0;
}
