/* Qwen4-Exp's hashed n-gram Per-Layer Embeddings (issue 36, the q4exp group; plan ops PLE_NGRAM and PLE_MIX;
 * petit/models/families/hybrid/qwen4_exp_text.py).
 *
 * PLE_NGRAM (pt_ngram_ids, pt_ngram_embed): token t's context s = 0 .. n - 1 is the token s places back, or `eos`
 * where that is before the sequence or an eos stands between (at t - s .. t - 1: the n-gram does not cross the end of
 * a document). For each order g = 2 .. n, h = mult[0] c_0 ^ mult[1] c_1 ^ ... ^ mult[g - 1] c_{g-1} (64-bit
 * products, wrapping), and each of its `heads` heads k reads row offset[k] + (h mod vocab[k]) (the floor modulo of h
 * as a signed value) of the table, whose rows are cut in shards (shard i: rows start[i] .. start[i + 1] - 1). The
 * rows of the (n - 1) heads heads, side by side, are the token's embedding. The last n - 1 ids of a sequence are
 * kept in ctx (floats: ids below 2^24) for its next step; pos0 0 starts a sequence (its context all eos).
 *
 * PLE_MIX (pt_ple_mix): given the token's normed keys kn [n][D] (key_proj of the embedding, RMS-normed per stream),
 * its value v [D] (value_proj) and the normed streams qn [n][D] (norm_query), per stream j
 *     g_j = kn_j . qn_j / sqrt(D);  g_j = sign(g_j) sqrt(max(|g_j|, 1e-6));  u_j = sigmoid(g_j) v
 * w = the RMS-normed u_j (1 + norm_conv, per stream), and the streams become
 *     X_j += u_j + silu(sum_k conv[c][k] w[t - (K - 1 - k) dil][c])       (a dilated causal depthwise conv, c = j D + d)
 * the conv reading the (K - 1) dil positions before the step from `state` (zeros at pos0 0), which keeps them after.
 * _ref: the plain double references. -1 on a bad argument (an id past a head's rows: -2), -3 without memory. */
#include "internal.h"
#include <stdlib.h>

static int ngram_ok(const pt_ngram *g) {
    if (!g || g->n < 2 || g->n > PT_NGRAM_MAX || g->heads < 1 || g->dim < 1 || !g->mult || !g->vocab ||
        !g->offset || !g->shards || g->n_shards < 1 || !g->start || g->start[0] != 0)
        return 0;
    for (int64_t i = 0; i < g->n_shards; i++)
        if (!g->shards[i] || g->shards[i]->rows != g->start[i + 1] - g->start[i] || g->shards[i]->cols != g->dim)
            return 0;
    for (int64_t k = 0; k < (g->n - 1) * g->heads; k++)
        if (g->vocab[k] < 1 || g->offset[k] < 0 || g->offset[k] + g->vocab[k] > g->start[g->n_shards]) return 0;
    return 1;
}

int pt_ngram_ids(const pt_ngram *g, const int32_t *ids, int64_t T, float *ctx, int64_t pos0, int64_t *out) {
    if (!ngram_ok(g) || !ids || !ctx || !out || T < 0 || pos0 < 0) return -1;
    const int64_t n = g->n, H = g->heads, C = n - 1;
    int64_t hist[PT_NGRAM_MAX];                 /* the n - 1 ids before token t, then t's */
    for (int64_t s = 0; s < C; s++) hist[s] = pos0 == 0 ? g->eos : (int64_t)ctx[s];
    for (int64_t t = 0; t < T; t++) {
        hist[C] = ids[t];
        uint64_t c[PT_NGRAM_MAX];               /* c[s]: the token s places back, or eos */
        int cut = 0;
        for (int64_t s = 0; s < n; s++) {
            if (s > 0 && hist[C - s] == g->eos) cut = 1;     /* an eos before t ends the context there */
            c[s] = (uint64_t)(cut ? g->eos : hist[C - s]);
        }
        uint64_t h = c[0] * (uint64_t)g->mult[0];
        for (int64_t o = 2; o <= n; o++) {
            h ^= c[o - 1] * (uint64_t)g->mult[o - 1];
            for (int64_t k = (o - 2) * H; k < (o - 1) * H; k++) {
                int64_t r = (int64_t)h % g->vocab[k];
                out[t * C * H + k] = g->offset[k] + (r < 0 ? r + g->vocab[k] : r);
            }
        }
        for (int64_t s = 0; s < C; s++) hist[s] = hist[s + 1];
    }
    for (int64_t s = 0; s < C; s++) ctx[s] = (float)hist[s];
    return 0;
}

int pt_ngram_embed(const pt_ngram *g, const int32_t *ids, int64_t T, float *ctx, int64_t pos0, float *out) {
    if (!ngram_ok(g) || !out || T < 0) return -1;
    const int64_t K = (g->n - 1) * g->heads;
    int64_t *rows = malloc((size_t)(T * K + 1) * sizeof(int64_t));
    if (!rows) return -3;
    int rc = pt_ngram_ids(g, ids, T, ctx, pos0, rows);
    for (int64_t i = 0; rc == 0 && i < T * K; i++) {
        int64_t sh = 0;                          /* the shard holding the row: few, so a scan */
        while (sh + 1 < g->n_shards && rows[i] >= g->start[sh + 1]) sh++;
        const int32_t local = (int32_t)(rows[i] - g->start[sh]);
        if (pt_get_rows(g->shards[sh], &local, 1, out + i * g->dim) != 0) rc = -2;
    }
    free(rows);
    return rc;
}

static int mix_ok(const pt_plemix *p, const float *kn, const float *v, const float *qn, int64_t T, int64_t pos0,
                  const float *state, const float *X) {
    return p && kn && v && qn && state && X && T >= 0 && pos0 >= 0 && p->n >= 1 && p->D >= 1 && p->K >= 1 &&
           p->dil >= 1 && p->norm_w && p->conv_w;
}

static float mix_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

int pt_ple_mix(const pt_plemix *p, const float *kn, const float *v, const float *qn, int64_t T, int64_t pos0,
               float *state, float *X) {
    if (!mix_ok(p, kn, v, qn, T, pos0, state, X)) return -1;
    const int64_t n = p->n, D = p->D, W = n * D, S = (p->K - 1) * p->dil;
    float *w = malloc((size_t)((S + T) * W) * sizeof(float)), *u = malloc((size_t)(T * W + 1) * sizeof(float));
    if (!w || !u) {
        free(w);
        free(u);
        return -3;
    }
    for (int64_t i = 0; i < S * W; i++) w[i] = pos0 == 0 ? 0.0f : state[i];
    const float inv_d = 1.0f / sqrtf((float)D);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n; j++) {
            const float *k = kn + (t * n + j) * D, *q = qn + (t * n + j) * D;
            float g = 0.0f, ss = 0.0f;
            for (int64_t d = 0; d < D; d++) g += k[d] * q[d];
            g *= inv_d;
            g = (g > 0.0f ? 1.0f : g < 0.0f ? -1.0f : 0.0f) * sqrtf(fabsf(g) > 1e-6f ? fabsf(g) : 1e-6f);
            const float sg = mix_sigmoid(g);
            float *uj = u + (t * n + j) * D, *wj = w + (S + t) * W + j * D;
            for (int64_t d = 0; d < D; d++) {
                uj[d] = sg * v[t * D + d];
                ss += uj[d] * uj[d];
            }
            const float r = 1.0f / sqrtf(ss / (float)D + p->eps);
            for (int64_t d = 0; d < D; d++) wj[d] = uj[d] * r * p->norm_w[j * D + d];
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < W; c++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < p->K; k++) acc += p->conv_w[c * p->K + k] * w[(t + k * p->dil) * W + c];
            X[t * W + c] += u[t * W + c] + acc * mix_sigmoid(acc);
        }
    for (int64_t i = 0; i < S * W; i++) state[i] = w[T * W + i];
    free(w);
    free(u);
    return 0;
}

int pt_ple_mix_ref(const pt_plemix *p, const float *kn, const float *v, const float *qn, int64_t T, int64_t pos0,
                   float *state, float *X) {
    if (!mix_ok(p, kn, v, qn, T, pos0, state, X)) return -1;
    const int64_t n = p->n, D = p->D, W = n * D, S = (p->K - 1) * p->dil;
    double *w = malloc((size_t)((S + T) * W) * sizeof(double)), *u = malloc((size_t)(T * W + 1) * sizeof(double));
    if (!w || !u) {
        free(w);
        free(u);
        return -3;
    }
    for (int64_t i = 0; i < S * W; i++) w[i] = pos0 == 0 ? 0.0 : state[i];
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n; j++) {
            double g = 0.0, ss = 0.0;
            for (int64_t d = 0; d < D; d++) g += (double)kn[(t * n + j) * D + d] * qn[(t * n + j) * D + d];
            g /= sqrt((double)D);
            g = (g > 0 ? 1.0 : g < 0 ? -1.0 : 0.0) * sqrt(fabs(g) > 1e-6 ? fabs(g) : 1e-6);
            for (int64_t d = 0; d < D; d++) {
                u[(t * n + j) * D + d] = v[t * D + d] / (1.0 + exp(-g));
                ss += u[(t * n + j) * D + d] * u[(t * n + j) * D + d];
            }
            for (int64_t d = 0; d < D; d++)
                w[(S + t) * W + j * D + d] = u[(t * n + j) * D + d] / sqrt(ss / (double)D + p->eps) *
                                             p->norm_w[j * D + d];
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < W; c++) {
            double acc = 0.0;
            for (int64_t k = 0; k < p->K; k++) acc += (double)p->conv_w[c * p->K + k] * w[(t + k * p->dil) * W + c];
            X[t * W + c] = (float)((double)X[t * W + c] + u[t * W + c] + acc / (1.0 + exp(-acc)));
        }
    for (int64_t i = 0; i < S * W; i++) state[i] = (float)w[T * W + i];
    free(w);
    free(u);
    return 0;
}
