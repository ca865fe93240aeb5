/* issue 30, the dsv4 group: DeepSeek-V4's manifold-constrained hyper-connections (mHC).
 *
 * The residual of a V4 layer is n streams of D values a token, X [T][n][D]. Before each block (attention, MLP) the
 * streams' flattened, RMS-normed values m = RMS(X_t) . fn^T give, per token, n "pre" weights, n "post" weights and
 * an n x n "comb" matrix:
 *     pre  = sigmoid(m[0:n] * scale[0] + base[0:n]) + eps
 *     post = 2 sigmoid(m[n:2n] * scale[1] + base[n:2n])
 *     comb = softmax over each row of (m[2n:] * scale[2] + base[2n:]) + eps, then Sinkhorn: columns divided by
 *            (their sum + eps), then iters - 1 rounds of rows then columns likewise
 * and the block's input is x_t = sum_j pre_j X_t,j (pt_hc_pre). After the block's output y_t the streams become
 *     X'_t,k = post_k y_t + sum_j comb[j][k] X_t,j                                          (pt_hc_post)
 * The hyper head before the final norm is pt_hc_pre with head = 1: fn [n][n D], only the pre weights (scale[0]).
 * Issue 36, fam36m: HY-V4's independent hyper-connection (pt_hc_ind_pre) is the same without the stream mix: fn
 * [2n][n D], scale [2], post = magnitude sigmoid(m[n:2n] * scale[1] + base[n:2n]) + eps, comb the identity (so
 * pt_hc_post gives X + post y).
 *
 * fn: [(2 + n) n][n D] (head: [n][n D]); base, scale: as above; x_out [T][D]; post [T][n] and comb [T][n][n] may be
 * NULL with head = 1. -1 on a bad argument. The _ref functions are the plain scalar references the parity tests
 * hold these to (double arithmetic, the formulas as written). */
#include "internal.h"

#include <math.h>

#define HC_MAX 16

/* mode: 0 a DeepSeek-V4 layer, 1 the hyper head, 2 an HY-V4 layer (issue 36, fam36m: pt_hc_ind_pre) */
static int hc_args(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                   int64_t D, int64_t iters, int mode, const float *x_out, const float *post, const float *comb) {
    return !X || !fn || !base || !scale || !x_out || T < 0 || n < 1 || n > HC_MAX || D < 1 || iters < 1 ||
           mode < 0 || mode > 2 || (mode != 1 && (!post || !comb));
}

/* the mixes' rows: n (the head), 2 n (HY-V4: pre, post), (2 + n) n (DeepSeek-V4: pre, post, comb) */
static int64_t hc_rows(int mode, int64_t n) { return mode == 1 ? n : mode == 2 ? 2 * n : (2 + n) * n; }

static float hc_sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

static int hc_pre(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                  int64_t D, int64_t iters, float eps, float norm_eps, int mode, float magnitude, float *x_out,
                  float *post, float *comb) {
    if (hc_args(X, fn, base, scale, T, n, D, iters, mode, x_out, post, comb)) return -1;
    const int head = mode == 1;
    const int64_t M = hc_rows(mode, n), W = n * D;
    float m[(2 + HC_MAX) * HC_MAX], pre[HC_MAX], c[HC_MAX * HC_MAX];
    for (int64_t t = 0; t < T; t++) {
        const float *xt = X + t * W;
        float ss = 0.0f;
        for (int64_t i = 0; i < W; i++) ss += xt[i] * xt[i];
        const float inv = 1.0f / sqrtf(ss / (float)W + norm_eps);
        for (int64_t r = 0; r < M; r++) {           /* the mixes: one dot product of n D values each */
            const float *w = fn + r * W;
            float s = 0.0f;
            for (int64_t i = 0; i < W; i++) s += w[i] * xt[i];
            m[r] = s * inv;
        }
        for (int64_t j = 0; j < n; j++) pre[j] = hc_sigmoid(m[j] * scale[0] + base[j]) + eps;
        if (mode == 2) {                            /* HY-V4: post magnitude sigmoid + eps, no stream mix */
            for (int64_t j = 0; j < n; j++)
                post[t * n + j] = magnitude * hc_sigmoid(m[n + j] * scale[1] + base[n + j]) + eps;
            for (int64_t i = 0; i < n * n; i++) comb[t * n * n + i] = i % (n + 1) == 0 ? 1.0f : 0.0f;
        } else if (!head) {
            for (int64_t j = 0; j < n; j++) post[t * n + j] = 2.0f * hc_sigmoid(m[n + j] * scale[1] + base[n + j]);
            for (int64_t r = 0; r < n; r++) {       /* softmax of each row, + eps */
                float *row = c + r * n, mx = -INFINITY, s = 0.0f;
                for (int64_t k = 0; k < n; k++) {
                    row[k] = m[2 * n + r * n + k] * scale[2] + base[2 * n + r * n + k];
                    mx = row[k] > mx ? row[k] : mx;
                }
                for (int64_t k = 0; k < n; k++) s += (row[k] = expf(row[k] - mx));
                for (int64_t k = 0; k < n; k++) row[k] = row[k] / s + eps;
            }
            for (int64_t it = 0; it < 2 * iters - 1; it++) {   /* columns first, then rows / columns alternately */
                const int cols = it % 2 == 0;
                for (int64_t a = 0; a < n; a++) {
                    float s = 0.0f;
                    for (int64_t b = 0; b < n; b++) s += cols ? c[b * n + a] : c[a * n + b];
                    const float d = s + eps;
                    for (int64_t b = 0; b < n; b++) {
                        if (cols) c[b * n + a] /= d;
                        else c[a * n + b] /= d;
                    }
                }
            }
            for (int64_t i = 0; i < n * n; i++) comb[t * n * n + i] = c[i];
        }
        float *y = x_out + t * D;
        for (int64_t d = 0; d < D; d++) y[d] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            const float p = pre[j], *xs = xt + j * D;
            for (int64_t d = 0; d < D; d++) y[d] += p * xs[d];
        }
    }
    return 0;
}

int pt_hc_pre(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
              int64_t D, int64_t iters, float eps, float norm_eps, int head, float *x_out, float *post, float *comb) {
    return hc_pre(X, fn, base, scale, T, n, D, iters, eps, norm_eps, head ? 1 : 0, 0.0f, x_out, post, comb);
}

int pt_hc_ind_pre(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                  int64_t D, float eps, float norm_eps, float magnitude, float *x_out, float *post, float *comb) {
    return hc_pre(X, fn, base, scale, T, n, D, 1, eps, norm_eps, 2, magnitude, x_out, post, comb);
}

int pt_hc_post(const float *X, const float *y, const float *post, const float *comb, int64_t T, int64_t n,
               int64_t D, float *X_out) {
    if (!X || !y || !post || !comb || !X_out || X_out == X || T < 0 || n < 1 || n > HC_MAX || D < 1) return -1;
    for (int64_t t = 0; t < T; t++) {
        const float *xt = X + t * n * D, *yt = y + t * D, *c = comb + t * n * n;
        for (int64_t k = 0; k < n; k++) {
            float *o = X_out + (t * n + k) * D;
            const float p = post[t * n + k];
            for (int64_t d = 0; d < D; d++) o[d] = p * yt[d];
            for (int64_t j = 0; j < n; j++) {
                const float w = c[j * n + k], *xs = xt + j * D;
                for (int64_t d = 0; d < D; d++) o[d] += w * xs[d];
            }
        }
    }
    return 0;
}

static double hc_sigmoid_d(double v) { return 1.0 / (1.0 + exp(-v)); }

static int hc_pre_ref(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                      int64_t D, int64_t iters, float eps, float norm_eps, int mode, float magnitude, float *x_out,
                      float *post, float *comb) {
    const int64_t W = n * D, M = hc_rows(mode, n);
    if (hc_args(X, fn, base, scale, T, n, D, iters, mode, x_out, post, comb)) return -1;
    double m[(2 + HC_MAX) * HC_MAX], c[HC_MAX * HC_MAX];
    for (int64_t t = 0; t < T; t++) {
        const float *xt = X + t * W;
        double ss = 0.0;
        for (int64_t i = 0; i < W; i++) ss += (double)xt[i] * xt[i];
        const double r = sqrt(ss / (double)W + norm_eps);
        for (int64_t q = 0; q < M; q++) {
            double s = 0.0;
            for (int64_t i = 0; i < W; i++) s += (double)fn[q * W + i] * ((double)xt[i] / r);
            m[q] = s;
        }
        for (int64_t d = 0; d < D; d++) {
            double acc = 0.0;
            for (int64_t j = 0; j < n; j++)
                acc += (hc_sigmoid_d(m[j] * scale[0] + base[j]) + eps) * xt[j * D + d];
            x_out[t * D + d] = (float)acc;
        }
        if (mode == 1) continue;
        if (mode == 2) {
            for (int64_t j = 0; j < n; j++)
                post[t * n + j] = (float)(magnitude * hc_sigmoid_d(m[n + j] * scale[1] + base[n + j]) + eps);
            for (int64_t a = 0; a < n; a++)
                for (int64_t b = 0; b < n; b++) comb[(t * n + a) * n + b] = a == b ? 1.0f : 0.0f;
            continue;
        }
        for (int64_t j = 0; j < n; j++) post[t * n + j] = (float)(2.0 * hc_sigmoid_d(m[n + j] * scale[1] + base[n + j]));
        for (int64_t a = 0; a < n; a++) {
            double mx = -INFINITY, s = 0.0;
            for (int64_t b = 0; b < n; b++) {
                c[a * n + b] = m[2 * n + a * n + b] * scale[2] + base[2 * n + a * n + b];
                if (c[a * n + b] > mx) mx = c[a * n + b];
            }
            for (int64_t b = 0; b < n; b++) s += exp(c[a * n + b] - mx);
            for (int64_t b = 0; b < n; b++) c[a * n + b] = exp(c[a * n + b] - mx) / s + eps;
        }
        for (int64_t it = 0; it < iters; it++) {
            if (it > 0)
                for (int64_t a = 0; a < n; a++) {       /* rows */
                    double s = 0.0;
                    for (int64_t b = 0; b < n; b++) s += c[a * n + b];
                    for (int64_t b = 0; b < n; b++) c[a * n + b] /= s + eps;
                }
            for (int64_t b = 0; b < n; b++) {           /* columns */
                double s = 0.0;
                for (int64_t a = 0; a < n; a++) s += c[a * n + b];
                for (int64_t a = 0; a < n; a++) c[a * n + b] /= s + eps;
            }
        }
        for (int64_t i = 0; i < n * n; i++) comb[t * n * n + i] = (float)c[i];
    }
    return 0;
}

int pt_hc_pre_ref(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                  int64_t D, int64_t iters, float eps, float norm_eps, int head, float *x_out, float *post,
                  float *comb) {
    return hc_pre_ref(X, fn, base, scale, T, n, D, iters, eps, norm_eps, head ? 1 : 0, 0.0f, x_out, post, comb);
}

int pt_hc_ind_pre_ref(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                      int64_t D, float eps, float norm_eps, float magnitude, float *x_out, float *post, float *comb) {
    return hc_pre_ref(X, fn, base, scale, T, n, D, 1, eps, norm_eps, 2, magnitude, x_out, post, comb);
}

int pt_hc_post_ref(const float *X, const float *y, const float *post, const float *comb, int64_t T, int64_t n,
                   int64_t D, float *X_out) {
    if (!X || !y || !post || !comb || !X_out || X_out == X || T < 0 || n < 1 || n > HC_MAX || D < 1) return -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < n; k++)
            for (int64_t d = 0; d < D; d++) {
                double acc = (double)post[t * n + k] * y[t * D + d];
                for (int64_t j = 0; j < n; j++) acc += (double)comb[(t * n + j) * n + k] * X[(t * n + j) * D + d];
                X_out[(t * n + k) * D + d] = (float)acc;
            }
    return 0;
}

/* Issue 36, the q4exp group: Qwen4-Exp's gated residual (plan op Q4X_MIX). The plan computes, per token, the RMS-normed
 * streams hn [n][D] (a norm per stream, (1 + w)), the gates g [n][D] = up silu(down hn / n) and the injection logits
 * z [n] = inject hn / n with its matmuls; this op reads them:
 *     x_out[d] = (1 / n) sum_j sigmoid(g[j][d]) hn[j][d]          (the block's input)
 *     post[j]  = 2 sigmoid(z[j])                                  (in place: the block's output weight per stream)
 * post may be NULL (the model's last mix, before the LM head). The stream mix stays the identity (comb held by the
 * plan), so pt_hc_post gives X + post y. -1 on a bad argument. */
static int q4x_args(const float *hn, const float *g, int64_t T, int64_t n, int64_t D, const float *x_out) {
    return !hn || !g || !x_out || T < 0 || n < 1 || n > HC_MAX || D < 1;
}

int pt_q4x_mix(const float *hn, const float *g, int64_t T, int64_t n, int64_t D, float *x_out, float *post) {
    if (q4x_args(hn, g, T, n, D, x_out)) return -1;
    const float inv = 1.0f / (float)n;
    for (int64_t t = 0; t < T; t++) {
        const float *h = hn + t * n * D, *gt = g + t * n * D;
        float *o = x_out + t * D;
        for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
        for (int64_t j = 0; j < n; j++)
            for (int64_t d = 0; d < D; d++) o[d] += hc_sigmoid(gt[j * D + d]) * h[j * D + d];
        for (int64_t d = 0; d < D; d++) o[d] *= inv;
        if (post)
            for (int64_t j = 0; j < n; j++) post[t * n + j] = 2.0f * hc_sigmoid(post[t * n + j]);
    }
    return 0;
}

int pt_q4x_mix_ref(const float *hn, const float *g, int64_t T, int64_t n, int64_t D, float *x_out, float *post) {
    if (q4x_args(hn, g, T, n, D, x_out)) return -1;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t d = 0; d < D; d++) {
            double acc = 0.0;
            for (int64_t j = 0; j < n; j++)
                acc += hc_sigmoid_d(g[(t * n + j) * D + d]) * hn[(t * n + j) * D + d];
            x_out[t * D + d] = (float)(acc / (double)n);
        }
        if (post)
            for (int64_t j = 0; j < n; j++) post[t * n + j] = (float)(2.0 * hc_sigmoid_d(post[t * n + j]));
    }
    return 0;
}
