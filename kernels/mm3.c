/* MiniMax-M3's block-sparse attention (issue 36, the fam36i group; petit/models/blocks/block_sparse.py): the lightning
 * indexer choosing, for each query and indexer head, the blocks of `block` key positions its heads attend to, then
 * grouped-query attention over the positions of those blocks only.
 *
 * The indexer's keys live in a cache slot of their own (the layer's index slot): one row of `dim` values a position,
 * float, or int8 with one scale a row quantized as the KV cache's rows are (round(x 127 / amax), scale amax / 127).
 *
 *   index:      the step's keys ik [T][dim] stored at positions pos0 ..; then for the query at p = pos0 + t and indexer
 *               head h, each visible block b <= p / block scores the largest iq[t][h] . ik_s over its positions
 *               s <= p (float dot products), the `local` blocks p / block, p / block - 1, ... (down to 0) +inf; sel[t][h]
 *               = the top_k blocks of largest score (every visible block when fewer), equal scores to the earlier
 *               block, in increasing order; n_sel[t][h] their count.
 *   attention:  query head qh (indexer head qh / (n_heads / n_idx), kv head qh / (n_heads / n_kv)) attends to the
 *               positions s <= p of its selected blocks, in increasing order: softmax of scale * q . k_s over them,
 *               weighting v_s (the cache's [n_kv][n_ctx][hd] rows).
 *
 * A query's choice and output depend only on its own rows and the cached rows it reads, in a fixed order: prefill and
 * token-by-token decode give the same bits whatever T, the thread count or the split. The drivers run the active
 * path's dot products and attention blocks (kern_generic.h: online softmax over runs of at most PT_ATTN_BLOCK
 * contiguous positions, folded in order); pt_mm3_index_ref / pt_mm3_attention_ref are the plain scalar reference
 * beside them (tests/test_fam36i5.py holds them together at odd sizes). Lock-free *_locked for the plan. -1 on a bad
 * argument, -3 when scratch cannot be had. */
#include "internal.h"
#include <stdlib.h>

/* the index slot's row s, value i */
static inline float ikey(const void *icache, const float *iscale, int kv_int8, int64_t dim, int64_t s, int64_t i) {
    if (kv_int8) return (float)((const int8_t *)icache)[s * dim + i] * iscale[s];
    return ((const float *)icache)[s * dim + i];
}

static void store_keys(const float *ik, void *icache, float *iscale, int kv_int8, int64_t T, int64_t pos0,
                       int64_t dim) {
    for (int64_t t = 0; t < T; t++) {
        const float *x = ik + t * dim;
        const int64_t s = pos0 + t;
        if (!kv_int8) {
            memcpy((float *)icache + s * dim, x, (size_t)dim * sizeof(float));
            continue;
        }
        float amax = 0.0f;
        for (int64_t i = 0; i < dim; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        if (!isfinite(id)) { d = 0.0f; id = 0.0f; }
        int8_t *q = (int8_t *)icache + s * dim;
        for (int64_t i = 0; i < dim; i++) q[i] = (int8_t)lrintf(x[i] * id);
        iscale[s] = d;
    }
}

static int index_args_ok(const float *iq, const float *ik, const void *icache, const float *iscale, int kv_int8,
                         int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block,
                         int64_t top_k, int64_t local, const int32_t *sel, const int32_t *n_sel) {
    return iq && ik && icache && (!kv_int8 || iscale) && sel && n_sel && T >= 0 && pos0 >= 0 && pos0 + T <= n_ctx &&
           n_idx > 0 && dim > 0 && block > 0 && top_k > 0 && local >= 0 && local <= top_k;
}

/* the `local` blocks up to the query's own one score +inf (transformers' scatter of inf, clamped at block 0) */
static void boost_local(pt_scored *sc, int64_t qb, int64_t local) {
    for (int64_t l = 0; l < local; l++) sc[qb - l > 0 ? qb - l : 0].v = INFINITY;
}

typedef struct {
    const float *iq;
    const void *icache;
    const float *iscale;
    int kv_int8;
    int64_t pos0, n_idx, dim, block, top_k, local;
    int32_t *sel, *n_sel;
    const pt_kernels *k;
} index_job;

static void index_task(void *ctx, int64_t t, int ith) {
    const index_job *j = (const index_job *)ctx;
    const int64_t p = j->pos0 + t, H = j->n_idx, D = j->dim, B = j->block, qb = p / B, nb = qb + 1;
    float *key = pt_scratch(ith, D + H + 2 * H * nb + 2);
    float *d = key + D;
    pt_scored *sc = (pt_scored *)(d + H);   /* [H][nb] */
    const float *q = j->iq + t * H * D;
    for (int64_t i = 0; i < H * nb; i++) sc[i] = (pt_scored){-INFINITY, (int32_t)(i % nb)};
    for (int64_t s = 0; s <= p; s++) {
        if (j->kv_int8) {
            for (int64_t i = 0; i < D; i++) key[i] = ikey(j->icache, j->iscale, 1, D, s, i);
        } else {
            memcpy(key, (const float *)j->icache + s * D, (size_t)D * sizeof(float));
        }
        /* the H dot products of the key with the query's indexer heads: one float matrix [H][D] times one row */
        j->k->rows_float(q, PT_F32, D, 0, H, key, 1, d, H, 0);
        for (int64_t h = 0; h < H; h++)
            if (d[h] > sc[h * nb + s / B].v) sc[h * nb + s / B].v = d[h];
    }
    for (int64_t h = 0; h < H; h++) {
        boost_local(sc + h * nb, qb, j->local);
        j->n_sel[t * H + h] = (int32_t)pt_top_k_increasing(sc + h * nb, nb, j->top_k, j->sel + (t * H + h) * j->top_k);
    }
}

int pt_mm3_index_locked(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                        int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k,
                        int64_t local, int32_t *sel, int32_t *n_sel) {
    if (!index_args_ok(iq, ik, icache, iscale, kv_int8, n_ctx, T, pos0, n_idx, dim, block, top_k, local, sel, n_sel))
        return -1;
    if (T == 0) return 0;
    store_keys(ik, icache, iscale, kv_int8, T, pos0, dim);
    index_job j = {iq, icache, iscale, kv_int8, pos0, n_idx, dim, block, top_k, local, sel, n_sel, pt_active()};
    const int64_t nb = (pos0 + T - 1) / block + 1;
    const int threads = pt_pool_threads();
    for (int i = 0; i < threads; i++)      /* scratch first: a task never meets a failed allocation */
        if (!pt_scratch(i, dim + n_idx + 2 * n_idx * nb + 2)) return -3;
    pt_run_chunks(index_task, &j, T, (double)T * (double)(pos0 + T) * (double)(n_idx * dim));
    return 0;
}

int pt_mm3_index(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                 int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k, int64_t local,
                 int32_t *sel, int32_t *n_sel) {
    pt_lock();
    int rc = pt_mm3_index_locked(iq, ik, icache, iscale, kv_int8, n_ctx, T, pos0, n_idx, dim, block, top_k, local,
                                 sel, n_sel);
    pt_unlock();
    return rc;
}

/* the plain reference: sequential float sums; the choice by repeated maxima (the first of equal scores), then the
 * chosen blocks in increasing order */
int pt_mm3_index_ref(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                     int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k, int64_t local,
                     int32_t *sel, int32_t *n_sel) {
    const int ok = index_args_ok(iq, ik, icache, iscale, kv_int8, n_ctx, T, pos0, n_idx, dim, block, top_k, local,
                                 sel, n_sel);
    if (!ok) return -1;
    store_keys(ik, icache, iscale, kv_int8, T, pos0, dim);
    const int64_t most = (pos0 + T) / block + 1;
    pt_scored *sc = (pt_scored *)malloc((size_t)most * sizeof(pt_scored));
    char *taken = (char *)malloc((size_t)most);
    if (!sc || !taken) {
        free(sc);
        free(taken);
        return -3;
    }
    for (int64_t t = 0; t < T; t++) {
        const int64_t p = pos0 + t, qb = p / block, nb = qb + 1, m = nb < top_k ? nb : top_k;
        for (int64_t h = 0; h < n_idx; h++) {
            for (int64_t b = 0; b < nb; b++) sc[b] = (pt_scored){-INFINITY, (int32_t)b};
            for (int64_t s = 0; s <= p; s++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < dim; i++)
                    acc += iq[(t * n_idx + h) * dim + i] * ikey(icache, iscale, kv_int8, dim, s, i);
                if (acc > sc[s / block].v) sc[s / block].v = acc;
            }
            boost_local(sc, qb, local);
            memset(taken, 0, (size_t)nb);
            for (int64_t c = 0; c < m; c++) {
                int64_t best = -1;
                for (int64_t b = 0; b < nb; b++)
                    if (!taken[b] && (best < 0 || sc[b].v > sc[best].v)) best = b;
                taken[best] = 1;
            }
            int32_t *out = sel + (t * n_idx + h) * top_k, c = 0;
            for (int64_t b = 0; b < nb; b++)
                if (taken[b]) out[c++] = (int32_t)b;
            n_sel[t * n_idx + h] = c;
        }
    }
    free(sc);
    free(taken);
    return 0;
}

/* ---- attention over the selected blocks ---- */
typedef struct {                /* one attention call, as the tasks read it */
    const pt_kernels *k;
    const float *q, *ks, *vs;   /* ks, vs: the int8 cache's scales (kv_int8) */
    const void *kc, *vc;
    const int32_t *sel, *n_sel;
    float *out, scale;
    int64_t n_ctx, pos0, n_heads, n_kv, hd, n_idx, block, top_k;
    int kv_int8;
} attn_job;

#define RUN PT_ATTN_BLOCK

static int attn_args_ok(const float *q, const void *kc, const void *vc, const float *ks, const float *vs, int kv_int8,
                        int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv, int64_t hd,
                        int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel, const int32_t *n_sel,
                        const float *out) {
    if (!q || !kc || !vc || (kv_int8 && (!ks || !vs)) || !sel || !n_sel || !out || T < 0 || pos0 < 0 ||
        pos0 + T > n_ctx || n_heads < 1 || n_kv < 1 || n_idx < 1 || n_heads % n_kv || n_heads % n_idx || hd < 1 ||
        block < 1 || top_k < 1)
        return 0;
    for (int64_t t = 0; t < T; t++)     /* every selected block visible, increasing */
        for (int64_t h = 0; h < n_idx; h++) {
            const int32_t n = n_sel[t * n_idx + h], *s = sel + (t * n_idx + h) * top_k;
            if (n < 1 || n > top_k) return 0;
            for (int32_t i = 0; i < n; i++)
                if (s[i] < 0 || s[i] > (pos0 + t) / block || (i && s[i] <= s[i - 1])) return 0;
        }
    return 1;
}

/* rows [p0, p1) of kv head g as floats: the cache itself, or dequantized into buf (2 x RUN x hd) */
static void kv_run(const attn_job *j, int64_t g, int64_t p0, int64_t p1, float *buf, const float **k,
                   const float **v) {
    const int64_t row = g * j->n_ctx + p0, hd = j->hd;
    if (!j->kv_int8) {
        *k = (const float *)j->kc + row * hd;
        *v = (const float *)j->vc + row * hd;
        return;
    }
    float *kb = buf, *vb = buf + RUN * hd;
    for (int64_t p = 0; p < p1 - p0; p++) {
        const int8_t *kq = (const int8_t *)j->kc + (row + p) * hd, *vq = (const int8_t *)j->vc + (row + p) * hd;
        const float a = j->ks[row + p], c = j->vs[row + p];
        for (int64_t i = 0; i < hd; i++) {
            kb[p * hd + i] = (float)kq[i] * a;
            vb[p * hd + i] = (float)vq[i] * c;
        }
    }
    *k = kb;
    *v = vb;
}

/* unit (token t, query head h): its selected blocks' visible positions, runs of at most RUN, folded in order */
static void attn_task(void *ctx, int64_t unit, int ith) {
    const attn_job *j = (const attn_job *)ctx;
    const int64_t H = j->n_heads, t = unit / H, h = unit % H, hd = j->hd, p = j->pos0 + t;
    const int64_t g = h / (H / j->n_kv), hi = h / (H / j->n_idx);
    const int32_t n = j->n_sel[t * j->n_idx + hi], *sel = j->sel + (t * j->n_idx + hi) * j->top_k;
    float *buf = pt_scratch(ith, 2 * RUN * hd + RUN + 2 * (hd + 2));
    float *scores = buf + 2 * RUN * hd, *st = scores + RUN, *bo = st + hd + 2, *bml = bo + hd;
    const float *qh = j->q + (t * H + h) * hd;
    int first = 1;
    for (int32_t i = 0; i < n; i++) {
        const int64_t b0 = (int64_t)sel[i] * j->block, b1 = b0 + j->block < p + 1 ? b0 + j->block : p + 1;
        for (int64_t p0 = b0; p0 < b1; p0 += RUN) {
            const int64_t p1 = p0 + RUN < b1 ? p0 + RUN : b1;
            const float *k, *v;
            kv_run(j, g, p0, p1, buf, &k, &v);
            if (first) {
                j->k->attn_block(qh, k, v, p1 - p0, hd, j->scale, 0.0f, 0.0f, 0.0f, scores, st + 2, st);
                first = 0;
            } else {
                j->k->attn_block(qh, k, v, p1 - p0, hd, j->scale, 0.0f, 0.0f, 0.0f, scores, bo, bml);
                pt_fold(st, st + 2, bml, bo, hd);
            }
        }
    }
    float *o = j->out + (t * H + h) * hd;
    const float inv = 1.0f / st[1];
    for (int64_t i = 0; i < hd; i++) o[i] = st[2 + i] * inv;
}

int pt_mm3_attention_locked(const float *q, const void *kc, const float *ks, const void *vc, const float *vs,
                            int kv_int8, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv,
                            int64_t hd, float scale, int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel,
                            const int32_t *n_sel, float *out) {
    if (!attn_args_ok(q, kc, vc, ks, vs, kv_int8, n_ctx, T, pos0, n_heads, n_kv, hd, n_idx, block, top_k, sel, n_sel,
                      out))
        return -1;
    if (T == 0) return 0;
    attn_job j = {.k = pt_active(), .q = q, .ks = ks, .vs = vs, .kc = kc, .vc = vc, .sel = sel, .n_sel = n_sel,
                  .out = out, .scale = scale, .n_ctx = n_ctx, .pos0 = pos0, .n_heads = n_heads, .n_kv = n_kv, .hd = hd,
                  .n_idx = n_idx, .block = block, .top_k = top_k, .kv_int8 = kv_int8};
    const int threads = pt_pool_threads();
    for (int i = 0; i < threads; i++)
        if (!pt_scratch(i, 2 * RUN * hd + RUN + 2 * (hd + 2))) return -3;
    double work = 0.0;
    for (int64_t t = 0; t < T * n_idx; t++) work += (double)n_sel[t] * (double)block;
    pt_run_chunks(attn_task, &j, T * n_heads, work * (double)(n_heads / n_idx) * (double)hd * 2.0);
    return 0;
}

int pt_mm3_attention(const float *q, const void *kc, const float *ks, const void *vc, const float *vs, int kv_int8,
                     int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv, int64_t hd, float scale,
                     int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel, const int32_t *n_sel,
                     float *out) {
    pt_lock();
    int rc = pt_mm3_attention_locked(q, kc, ks, vc, vs, kv_int8, n_ctx, T, pos0, n_heads, n_kv, hd, scale, n_idx,
                                     block, top_k, sel, n_sel, out);
    pt_unlock();
    return rc;
}

/* out = the softmax of scale q . K_i over n gathered rows weighting V_i (sequential float sums; w: n scratch) */
static void attend_rows(const float *q, const float *K, const float *V, int64_t n, int64_t hd, float scale, float *w,
                        float *out) {
    float m = -INFINITY, l = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float d = 0.0f;
        for (int64_t c = 0; c < hd; c++) d += q[c] * K[i * hd + c];
        w[i] = d * scale;
        m = fmaxf(m, w[i]);
    }
    for (int64_t i = 0; i < n; i++) l += (w[i] = expf(w[i] - m));
    for (int64_t c = 0; c < hd; c++) out[c] = 0.0f;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < hd; c++) out[c] += w[i] * V[i * hd + c];
    for (int64_t c = 0; c < hd; c++) out[c] /= l;
}

/* the plain reference: each query head's visible positions of its chosen blocks gathered (dequantized), then two
 * passes over them */
int pt_mm3_attention_ref(const float *q, const void *kc, const float *ks, const void *vc, const float *vs,
                         int kv_int8, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv,
                         int64_t hd, float scale, int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel,
                         const int32_t *n_sel, float *out) {
    const int ok = attn_args_ok(q, kc, vc, ks, vs, kv_int8, n_ctx, T, pos0, n_heads, n_kv, hd, n_idx, block, top_k,
                                sel, n_sel, out);
    if (!ok) return -1;
    const int64_t most = pos0 + T;
    float *K = (float *)malloc((size_t)(2 * most * hd + most) * sizeof(float));
    if (!K) return -3;
    float *V = K + most * hd, *w = V + most * hd;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_heads; h++) {
            const int64_t p = pos0 + t, g = h / (n_heads / n_kv), hi = h / (n_heads / n_idx);
            const int32_t *sl = sel + (t * n_idx + hi) * top_k;
            int64_t n = 0;
            for (int32_t i = 0; i < n_sel[t * n_idx + hi]; i++)
                for (int64_t r = (int64_t)sl[i] * block; r < (int64_t)(sl[i] + 1) * block && r <= p; r++, n++) {
                    const int64_t row = g * n_ctx + r;
                    for (int64_t c = 0; c < hd; c++) {
                        K[n * hd + c] = kv_int8 ? (float)((const int8_t *)kc)[row * hd + c] * ks[row]
                                                : ((const float *)kc)[row * hd + c];
                        V[n * hd + c] = kv_int8 ? (float)((const int8_t *)vc)[row * hd + c] * vs[row]
                                                : ((const float *)vc)[row * hd + c];
                    }
                }
            attend_rows(q + (t * n_heads + h) * hd, K, V, n, hd, scale, w, out + (t * n_heads + h) * hd);
        }
    free(K);
    return 0;
}
