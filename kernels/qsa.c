/* Qwen4-Exp's QSA indexer (issue 36, the q4exp group; plan op QSA_INDEX; petit/models/blocks/qsa.py): for each
 * query, the blocks of `block` key positions its attention reads (kernels/mm3.c's MM3_ATTENTION attends over them).
 *
 * The step's raw index keys ik [T][dim] are stored at positions pos0 .. of the index slot (icache [n_ctx][dim],
 * float). The query at p = pos0 + t sees n = p + 1 positions: nb = n / block complete blocks and, when n is not a
 * multiple of block, the incomplete last one (the "tail"). With nb <= top_k every block is chosen; otherwise block b
 * (< nb) gets the key
 *     kb = rope(rmsnorm(mean of ik over its positions) (1 + w), at position b block)   (rope: rotate-half on the
 *                                                                                      first rot_dim values)
 * and the score sum_h relu(iq[t][h] . kb) / sqrt(dim) (iq: the query's indexer heads, normed and roped already), and
 * the top_k best are chosen (equal scores: the earlier block). sel[t] = the chosen blocks in increasing order, then
 * the tail's (nb) if any; n_sel[t] their count (at most top_k + 1, the row's stride). The block keys are the same for
 * every query: each step computes those of its complete blocks once. pt_qsa_index_ref is the plain double reference
 * (tests/test_q4exp5.py holds the two together at odd sizes); -1 on a bad argument, -3 without memory. */
#include "internal.h"
#include <stdlib.h>

static int qsa_args_ok(const float *iq, const float *ik, const float *icache, const float *norm_w, int64_t n_ctx,
                       int64_t T, int64_t pos0, int64_t n_heads, int64_t dim, int64_t block, int64_t top_k,
                       int64_t rot_dim, const float *cos_tab, const float *sin_tab, int64_t n_pos,
                       const int32_t *sel, const int32_t *n_sel) {
    return iq && ik && icache && norm_w && sel && n_sel && T >= 0 && pos0 >= 0 && pos0 + T <= n_ctx && n_heads > 0 &&
           dim > 0 && block > 0 && top_k > 0 && rot_dim >= 0 && rot_dim % 2 == 0 && rot_dim <= dim &&
           (rot_dim == 0 || (cos_tab && sin_tab && n_pos >= pos0 + T));
}

/* block b's key into kb [dim] (float arithmetic as transformers' float32) */
static void block_key(const float *icache, int64_t b, int64_t block, int64_t dim, const float *norm_w, float eps,
                      int64_t rot_dim, const float *cos_tab, const float *sin_tab, float *kb) {
    for (int64_t i = 0; i < dim; i++) kb[i] = 0.0f;
    for (int64_t s = b * block; s < (b + 1) * block; s++)
        for (int64_t i = 0; i < dim; i++) kb[i] += icache[s * dim + i];
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; i++) {
        kb[i] /= (float)block;
        ss += kb[i] * kb[i];
    }
    const float inv = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int64_t i = 0; i < dim; i++) kb[i] = kb[i] * inv * (1.0f + norm_w[i]);
    const int64_t h = rot_dim / 2, pos = b * block;
    for (int64_t i = 0; i < h; i++) {
        const float c = cos_tab[pos * h + i], sn = sin_tab[pos * h + i], x0 = kb[i], x1 = kb[i + h];
        kb[i] = x0 * c - x1 * sn;
        kb[i + h] = x1 * c + x0 * sn;
    }
}

/* the query's choice, given its n visible positions and the scores of blocks 0 .. nb - 1 (sc, reordered) */
static int32_t choose(pt_scored *sc, int64_t n, int64_t block, int64_t top_k, int32_t *sel) {
    const int64_t nb = n / block;
    int64_t k = nb;
    if (nb <= top_k)
        for (int64_t b = 0; b < nb; b++) sel[b] = (int32_t)b;
    else
        k = pt_top_k_increasing(sc, nb, top_k, sel);
    if (n % block) sel[k++] = (int32_t)nb;
    return (int32_t)k;
}

int pt_qsa_index(const float *iq, const float *ik, float *icache, const float *norm_w, float eps, int64_t n_ctx,
                 int64_t T, int64_t pos0, int64_t n_heads, int64_t dim, int64_t block, int64_t top_k,
                 int64_t rot_dim, const float *cos_tab, const float *sin_tab, int64_t n_pos, int32_t *sel,
                 int32_t *n_sel) {
    if (!qsa_args_ok(iq, ik, icache, norm_w, n_ctx, T, pos0, n_heads, dim, block, top_k, rot_dim, cos_tab, sin_tab,
                     n_pos, sel, n_sel))
        return -1;
    memcpy(icache + pos0 * dim, ik, (size_t)(T * dim) * sizeof(float));
    const int64_t nb_all = (pos0 + T) / block, stride = top_k + 1;
    const int need = nb_all > top_k;            /* scores only when some query has more blocks than it chooses */
    float *kb = need ? malloc((size_t)(nb_all * dim) * sizeof(float)) : 0;
    pt_scored *sc = need ? malloc((size_t)nb_all * sizeof(pt_scored)) : 0;
    if (need && (!kb || !sc)) {
        free(kb);
        free(sc);
        return -3;
    }
    for (int64_t b = 0; need && b < nb_all; b++)
        block_key(icache, b, block, dim, norm_w, eps, rot_dim, cos_tab, sin_tab, kb + b * dim);
    const float scale = 1.0f / sqrtf((float)dim);
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t + 1, nb = n / block;
        if (nb > top_k)
            for (int64_t b = 0; b < nb; b++) {
                float s = 0.0f;
                for (int64_t h = 0; h < n_heads; h++) {
                    const float *q = iq + (t * n_heads + h) * dim, *k = kb + b * dim;
                    float d = 0.0f;
                    for (int64_t i = 0; i < dim; i++) d += q[i] * k[i];
                    s += d > 0.0f ? d : 0.0f;
                }
                sc[b].v = s * scale;
                sc[b].s = (int32_t)b;
            }
        n_sel[t] = choose(sc, n, block, top_k, sel + t * stride);
    }
    free(kb);
    free(sc);
    return 0;
}

int pt_qsa_index_ref(const float *iq, const float *ik, float *icache, const float *norm_w, float eps, int64_t n_ctx,
                     int64_t T, int64_t pos0, int64_t n_heads, int64_t dim, int64_t block, int64_t top_k,
                     int64_t rot_dim, const float *cos_tab, const float *sin_tab, int64_t n_pos, int32_t *sel,
                     int32_t *n_sel) {
    if (!qsa_args_ok(iq, ik, icache, norm_w, n_ctx, T, pos0, n_heads, dim, block, top_k, rot_dim, cos_tab, sin_tab,
                     n_pos, sel, n_sel))
        return -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < dim; i++) icache[(pos0 + t) * dim + i] = ik[t * dim + i];
    const int64_t h2 = rot_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t + 1, nb = n / block;
        pt_scored *sc = malloc((size_t)(nb + 1) * sizeof(pt_scored));
        double *k = malloc((size_t)dim * sizeof(double));
        if (!sc || !k) {
            free(sc);
            free(k);
            return -3;
        }
        for (int64_t b = 0; nb > top_k && b < nb; b++) {
            double ss = 0.0;
            for (int64_t i = 0; i < dim; i++) {
                double m = 0.0;
                for (int64_t s = b * block; s < (b + 1) * block; s++) m += icache[s * dim + i];
                k[i] = m / (double)block;
                ss += k[i] * k[i];
            }
            for (int64_t i = 0; i < dim; i++) k[i] = k[i] / sqrt(ss / (double)dim + eps) * (1.0 + norm_w[i]);
            for (int64_t i = 0; i < h2; i++) {
                const double c = cos_tab[b * block * h2 + i], sn = sin_tab[b * block * h2 + i], x0 = k[i];
                k[i] = x0 * c - k[i + h2] * sn;
                k[i + h2] = k[i + h2] * c + x0 * sn;
            }
            double s = 0.0;
            for (int64_t h = 0; h < n_heads; h++) {
                double d = 0.0;
                for (int64_t i = 0; i < dim; i++) d += (double)iq[(t * n_heads + h) * dim + i] * k[i];
                s += d > 0.0 ? d : 0.0;
            }
            sc[b].v = (float)(s / sqrt((double)dim));
            sc[b].s = (int32_t)b;
        }
        n_sel[t] = choose(sc, n, block, top_k, sel + t * (top_k + 1));
        free(sc);
        free(k);
    }
    return 0;
}
