/* Gemma 3n's block kinds (the gemma group of issue 30): AltUp's predict and correct steps over the model's n streams,
 * the per-layer inputs (the per-layer embedding table split into one slice a layer, with the projection of the
 * embeddings), and the row-wise steps around them (the gaussian top-k of activation sparsity, the magnitude rescale of
 * the extra streams, LAuReL's merge, the streams' mean). transformers' modeling_gemma3n.py is the definition.
 *
 * The streams are stored stream-major, `stride` floats apart (stream j of token t at x + j * stride + t * hidden), so
 * each stream is a plain [T][hidden] buffer the other ops read. Each function has a plain scalar reference beside it
 * (`*_ref`, the arithmetic spelled out one value at a time, in the same order): the fast form vectorises over a row
 * and must give the same bits (tests/test_gemma5.py runs both at odd sizes, and against a float64 NumPy form).
 * Everything is float32 on the calling thread: these are O(n^2 hidden) per token beside the O(hidden^2) products. */
#include "internal.h"

/* the router's modalities of one row: tanh(router (rms(x) w / hidden)), n of them */
static void modalities(const pt_altup *a, const float *x, float *m) {
    const int64_t D = a->hidden;
    double ss = 0.0;
    for (int64_t d = 0; d < D; d++) ss += (double)x[d] * x[d];
    const float inv = 1.0f / sqrtf((float)(ss / (double)D) + a->eps);
    const float s = 1.0f / (float)D;
    for (int64_t j = 0; j < a->n; j++) {
        const float *r = a->router + j * D;
        float acc = 0.0f;
        for (int64_t d = 0; d < D; d++) acc += r[d] * (x[d] * inv * a->router_norm[d] * s);
        m[j] = tanhf(acc);
    }
}

static int check(const pt_altup *a) {
    return (!a || a->n < 1 || a->n > PT_ALTUP_MAX || a->hidden < 1 || a->active < 0 || a->active >= a->n ||
            a->stride < a->hidden) ? -1 : 0;
}

/* the n x n coefficients of a token's prediction: c[j][i] = (pred m)[j * n + i] */
static void pred_coefs(const pt_altup *a, const float *m, float *c) {
    const int64_t n = a->n;
    for (int64_t r = 0; r < n * n; r++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n; i++) acc += a->pred[r * n + i] * m[i];
        c[r] = acc;
    }
}

int pt_altup_predict(const pt_altup *a, const float *x, int64_t T, float *out, float *active) {
    if (check(a) || T < 0) return -1;
    const int64_t n = a->n, D = a->hidden, S = a->stride;
    float m[PT_ALTUP_MAX], c[PT_ALTUP_MAX * PT_ALTUP_MAX];
    for (int64_t t = 0; t < T; t++) {
        modalities(a, x + a->active * S + t * D, m);
        pred_coefs(a, m, c);
        for (int64_t j = 0; j < n; j++) {
            float *o = out + j * S + t * D;
            const float *xj = x + j * S + t * D;
            const float *cj = c + j * n;
#pragma omp simd
            for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
            for (int64_t i = 0; i < n; i++) {
                const float *xi = x + i * S + t * D;
                const float ci = cj[i];
#pragma omp simd
                for (int64_t d = 0; d < D; d++) o[d] += xi[d] * ci;
            }
#pragma omp simd
            for (int64_t d = 0; d < D; d++) o[d] += xj[d];
        }
        if (active) memcpy(active + t * D, out + a->active * S + t * D, (size_t)D * sizeof(float));
    }
    return 0;
}

int pt_altup_predict_ref(const pt_altup *a, const float *x, int64_t T, float *out, float *active) {
    if (check(a) || T < 0) return -1;
    const int64_t n = a->n, D = a->hidden, S = a->stride;
    float m[PT_ALTUP_MAX], c[PT_ALTUP_MAX * PT_ALTUP_MAX];
    for (int64_t t = 0; t < T; t++) {
        modalities(a, x + a->active * S + t * D, m);
        pred_coefs(a, m, c);
        for (int64_t j = 0; j < n; j++)
            for (int64_t d = 0; d < D; d++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < n; i++) acc += x[i * S + t * D + d] * c[j * n + i];
                out[j * S + t * D + d] = acc + x[j * S + t * D + d];
            }
        if (active)
            for (int64_t d = 0; d < D; d++) active[t * D + d] = out[a->active * S + t * D + d];
    }
    return 0;
}

/* the n correction coefficients of a token: (corr m) + 1 */
static void corr_coefs(const pt_altup *a, const float *m, float *c) {
    const int64_t n = a->n;
    for (int64_t j = 0; j < n; j++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < n; i++) acc += a->corr[j * n + i] * m[i];
        c[j] = acc + 1.0f;
    }
}

int pt_altup_correct(const pt_altup *a, const float *pred, const float *act, int64_t T, float *x, float *scaled) {
    if (check(a) || T < 0) return -1;
    const int64_t n = a->n, D = a->hidden, S = a->stride;
    float m[PT_ALTUP_MAX], c[PT_ALTUP_MAX];
    for (int64_t t = 0; t < T; t++) {
        const float *at = act + t * D, *pa = pred + a->active * S + t * D;
        modalities(a, at, m);
        corr_coefs(a, m, c);
        for (int64_t j = 0; j < n; j++) {
            float *o = x + j * S + t * D;
            const float *pj = pred + j * S + t * D;
            const float cj = c[j];
#pragma omp simd
            for (int64_t d = 0; d < D; d++) o[d] = (at[d] - pa[d]) * cj + pj[d];
        }
        if (scaled) {
            const float *xa = x + a->active * S + t * D;
            float *s = scaled + t * D;
            if (a->out_scale) {
#pragma omp simd
                for (int64_t d = 0; d < D; d++) s[d] = xa[d] * a->out_scale[d];
            } else {
                memcpy(s, xa, (size_t)D * sizeof(float));
            }
        }
    }
    return 0;
}

int pt_altup_correct_ref(const pt_altup *a, const float *pred, const float *act, int64_t T, float *x,
                         float *scaled) {
    if (check(a) || T < 0) return -1;
    const int64_t n = a->n, D = a->hidden, S = a->stride;
    float m[PT_ALTUP_MAX], c[PT_ALTUP_MAX];
    for (int64_t t = 0; t < T; t++) {
        modalities(a, act + t * D, m);
        corr_coefs(a, m, c);
        for (int64_t j = 0; j < n; j++)
            for (int64_t d = 0; d < D; d++) {
                const float innovation = act[t * D + d] - pred[a->active * S + t * D + d];
                x[j * S + t * D + d] = innovation * c[j] + pred[j * S + t * D + d];
            }
        if (scaled)
            for (int64_t d = 0; d < D; d++)
                scaled[t * D + d] = a->out_scale ? x[a->active * S + t * D + d] * a->out_scale[d]
                                                 : x[a->active * S + t * D + d];
    }
    return 0;
}

static int ple_check(const pt_tensor *table, int64_t L, int64_t P, int64_t y_stride) {
    return (!table || L < 1 || P < 1 || table->cols != L * P || y_stride < 0) ? -1 : 0;
}

int pt_ple(const pt_tensor *table, const int32_t *ids, int64_t T, const float *proj, int64_t L, int64_t P,
           const float *w, float eps, float proj_scale, float emb_scale, float out_scale, float *row, float *y,
           int64_t y_stride) {
    if (ple_check(table, L, P, y_stride) || T < 0) return -1;
    const int64_t V = table->rows;
    for (int64_t t = 0; t < T; t++) {
        const int32_t id = (ids[t] >= 0 && ids[t] < V) ? ids[t] : 0;     /* transformers: outside the table, row 0 */
        if (pt_get_rows(table, &id, 1, row) != 0) return -1;
        for (int64_t l = 0; l < L; l++) {
            const float *p = proj + t * L * P + l * P;
            float *o = y + l * y_stride + t * P;
            const float *e = row + l * P;
            double ss = 0.0;
            for (int64_t i = 0; i < P; i++) {
                const float v = p[i] * proj_scale;
                ss += (double)v * v;
            }
            const float inv = 1.0f / sqrtf((float)(ss / (double)P) + eps);
#pragma omp simd
            for (int64_t i = 0; i < P; i++)
                o[i] = ((p[i] * proj_scale) * inv * (w ? w[i] : 1.0f) + e[i] * emb_scale) * out_scale;
        }
    }
    return 0;
}

int pt_ple_ref(const pt_tensor *table, const int32_t *ids, int64_t T, const float *proj, int64_t L, int64_t P,
               const float *w, float eps, float proj_scale, float emb_scale, float out_scale, float *row, float *y,
               int64_t y_stride) {
    if (ple_check(table, L, P, y_stride) || T < 0) return -1;
    for (int64_t t = 0; t < T; t++) {
        const int32_t id = (ids[t] >= 0 && ids[t] < table->rows) ? ids[t] : 0;
        if (pt_get_rows(table, &id, 1, row) != 0) return -1;
        for (int64_t l = 0; l < L; l++) {
            double ss = 0.0;
            for (int64_t i = 0; i < P; i++) {
                const float v = proj[t * L * P + l * P + i] * proj_scale;
                ss += (double)v * v;
            }
            const float inv = 1.0f / sqrtf((float)(ss / (double)P) + eps);
            for (int64_t i = 0; i < P; i++) {
                const float normed = (proj[t * L * P + l * P + i] * proj_scale) * inv * (w ? w[i] : 1.0f);
                y[l * y_stride + t * P + i] = (normed + row[l * P + i] * emb_scale) * out_scale;
            }
        }
    }
    return 0;
}

/* the row-wise steps (mode): 0 gaussian top-k in place, y = relu(y - (mean + scale std)) over each row of `width`;
 * 1 magnitude, y = y rms(x) / sqrt(max(mean(y^2), 1e-5)); 2 merge, y = (y + x) / scale; 3 mean of `streams` rows
 * `x_stride` apart, y = (x_0 + ... + x_{n-1}) / n */
static int rows_check(int mode, int64_t width, int64_t streams, float scale) {
    return (mode < 0 || mode > 4 || width < 1 || (mode == 3 && streams < 1) || (mode == 2 && scale == 0.0f)) ? -1 : 0;
}

int pt_gemma_rows(int mode, float *y, const float *x, int64_t rows, int64_t width, float scale, int64_t streams,
                  int64_t x_stride) {
    if (rows_check(mode, width, streams, scale) || rows < 0) return -1;
    for (int64_t t = 0; t < rows; t++) {
        float *yt = y + t * width;
        const float *xt = x ? x + t * width : 0;
        if (mode == 0) {
            double s = 0.0, s2 = 0.0;
            for (int64_t i = 0; i < width; i++) s += yt[i];
            const double mean = s / (double)width;
            for (int64_t i = 0; i < width; i++) s2 += (yt[i] - mean) * (yt[i] - mean);
            const float cut = (float)mean + (float)sqrt(s2 / (double)width) * scale;
#pragma omp simd
            for (int64_t i = 0; i < width; i++) {
                const float v = yt[i] - cut;
                yt[i] = v > 0.0f ? v : 0.0f;
            }
        } else if (mode == 1) {
            double sx = 0.0, sy = 0.0;
            for (int64_t i = 0; i < width; i++) {
                sx += (double)xt[i] * xt[i];
                sy += (double)yt[i] * yt[i];
            }
            const float target = sqrtf((float)(sx / (double)width));
            float ms = (float)(sy / (double)width);
            const float now = sqrtf(ms < 1e-5f ? 1e-5f : ms);
#pragma omp simd
            for (int64_t i = 0; i < width; i++) yt[i] = yt[i] * target / now;
        } else if (mode == 2) {
#pragma omp simd
            for (int64_t i = 0; i < width; i++) yt[i] = (yt[i] + xt[i]) / scale;
        } else if (mode == 4) {
#pragma omp simd
            for (int64_t i = 0; i < width; i++) yt[i] *= scale;
        } else {
            const float *x0 = x + t * width;
#pragma omp simd
            for (int64_t i = 0; i < width; i++) yt[i] = x0[i];
            for (int64_t j = 1; j < streams; j++) {
                const float *xj = x + j * x_stride + t * width;
#pragma omp simd
                for (int64_t i = 0; i < width; i++) yt[i] += xj[i];
            }
#pragma omp simd
            for (int64_t i = 0; i < width; i++) yt[i] /= (float)streams;
        }
    }
    return 0;
}

int pt_gemma_rows_ref(int mode, float *y, const float *x, int64_t rows, int64_t width, float scale, int64_t streams,
                      int64_t x_stride) {
    if (rows_check(mode, width, streams, scale) || rows < 0) return -1;
    for (int64_t t = 0; t < rows; t++)
        if (mode == 0) {
            double s = 0.0, s2 = 0.0;
            for (int64_t i = 0; i < width; i++) s += y[t * width + i];
            const double mean = s / (double)width;
            for (int64_t i = 0; i < width; i++) s2 += (y[t * width + i] - mean) * (y[t * width + i] - mean);
            const float cut = (float)mean + (float)sqrt(s2 / (double)width) * scale;
            for (int64_t i = 0; i < width; i++) y[t * width + i] = fmaxf(y[t * width + i] - cut, 0.0f);
        } else if (mode == 1) {
            double sx = 0.0, sy = 0.0;
            for (int64_t i = 0; i < width; i++) {
                sx += (double)x[t * width + i] * x[t * width + i];
                sy += (double)y[t * width + i] * y[t * width + i];
            }
            const float target = sqrtf((float)(sx / (double)width));
            const float now = sqrtf(fmaxf((float)(sy / (double)width), 1e-5f));
            for (int64_t i = 0; i < width; i++) y[t * width + i] = y[t * width + i] * target / now;
        } else if (mode == 2) {
            for (int64_t i = 0; i < width; i++) y[t * width + i] = (y[t * width + i] + x[t * width + i]) / scale;
        } else if (mode == 4) {
            for (int64_t i = 0; i < width; i++) y[t * width + i] = y[t * width + i] * scale;
        } else {
            for (int64_t i = 0; i < width; i++) {
                float s = x[t * width + i];
                for (int64_t j = 1; j < streams; j++) s += x[j * x_stride + t * width + i];
                y[t * width + i] = s / (float)streams;
            }
        }
    return 0;
}
