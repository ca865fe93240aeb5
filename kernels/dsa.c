/* DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5; petit/models/blocks/dsa.py): the lightning indexer choosing the
 * top-k cached positions of each query, then latent attention over those positions only.
 *
 * The cache: latent attention's one row a position (`stride` floats, or int8 with one scale a row), its first `hd`
 * values the attended [k_pe ; latent], and at `k_off` the indexer's key of that position (`dim` values, already
 * LayerNorm-ed and rotated).
 *
 *   index:      for the query at position p = pos0 + t and every position s <= p,
 *                   I(t, s) = sum_h w[t][h] * w_scale * relu(scale * q[t][h] . k_s)
 *               sel[t] = every position 0..p when p + 1 <= top_k, else the top_k positions of largest I (ties to the
 *               earlier position), in increasing order; n_sel[t] their count.
 *   attention:  out[t][h] = softmax over s in sel[t] of (scale * q[t][h] . row_s[0:hd]) weighting row_s[0:hd]
 *               (the values are the keys' rows: latent attention absorbs its up-projections).
 *
 * A query's selection and output depend only on its own row and the rows it reads, in a fixed order: prefill and
 * token-by-token decode give the same bits, whatever T, the thread count or the split. The drivers run the active
 * path's dot products and attention blocks (kern_generic.h: online softmax over blocks of PT_ATTN_BLOCK gathered
 * rows, folded in order); pt_dsa_index_ref / pt_dsa_attention_ref are the plain scalar reference beside them
 * (tests/test_mla5.py holds the two together at odd sizes). Lock-free *_locked for the plan (which holds the lock). */
#include "internal.h"
#include <stdlib.h>

/* the value i of cached row s (float cache, or int8 with a scale a row) */
static inline float cached(const void *cache, const float *scales, int kv_int8, int64_t stride, int64_t s,
                           int64_t i) {
    if (kv_int8) return (float)((const int8_t *)cache)[s * stride + i] * scales[s];
    return ((const float *)cache)[s * stride + i];
}

static void row_of(const void *cache, const float *scales, int kv_int8, int64_t stride, int64_t s, int64_t off,
                   int64_t n, float *out) {
    if (!kv_int8) {
        memcpy(out, (const float *)cache + s * stride + off, (size_t)n * sizeof(float));
        return;
    }
    const int8_t *q = (const int8_t *)cache + s * stride + off;
    const float d = scales[s];
    for (int64_t i = 0; i < n; i++) out[i] = (float)q[i] * d;
}

static int index_args_ok(int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                         int64_t dim, int64_t top_k) {
    return T >= 0 && pos0 >= 0 && pos0 + T <= n_ctx && n_heads > 0 && dim > 0 && top_k > 0 && k_off >= 0 &&
           k_off + dim <= stride;
}

/* ---- the indexer ---- */
typedef pt_scored scored;

/* larger score first; equal scores: the earlier position first */
static int by_score(const void *a, const void *b) {
    const scored *x = (const scored *)a, *y = (const scored *)b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->s > y->s) - (x->s < y->s);
}

static int by_pos(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* sel = the top_k of n scored positions, increasing (the scored array is reordered): internal.h's contract */
int64_t pt_top_k_increasing(scored *sc, int64_t n, int64_t top_k, int32_t *sel) {
    if (n <= top_k) {
        for (int64_t i = 0; i < n; i++) sel[i] = (int32_t)i;
        return n;
    }
    /* quickselect the top_k to the front by (score desc, position asc), then sort their positions */
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const scored piv = sc[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (by_score(&sc[i], &piv) < 0) i++;
            while (by_score(&sc[j], &piv) > 0) j--;
            if (i <= j) {
                const scored tmp = sc[i];
                sc[i] = sc[j];
                sc[j] = tmp;
                i++;
                j--;
            }
        }
        if (top_k - 1 <= j) hi = j;
        else if (top_k - 1 >= i) lo = i;
        else break;
    }
    for (int64_t i = 0; i < top_k; i++) sel[i] = sc[i].s;
    qsort(sel, (size_t)top_k, sizeof(int32_t), by_pos);
    return top_k;
}

typedef struct {
    const float *q, *w;
    const void *cache;
    const float *scales;
    int kv_int8;
    int64_t stride, k_off, T, pos0, n_heads, dim, top_k;
    float scale, w_scale;
    int32_t *sel, *n_sel;
    const pt_kernels *k;
} index_job;

static void index_task(void *ctx, int64_t t, int ith) {
    const index_job *j = (const index_job *)ctx;
    const int64_t p = j->pos0 + t, n = p + 1, H = j->n_heads, D = j->dim;
    int32_t *sel = j->sel + t * j->top_k;
    if (n <= j->top_k) {            /* every position: nothing to score */
        j->n_sel[t] = (int32_t)pt_top_k_increasing(0, n, j->top_k, sel);
        return;
    }
    float *key = pt_scratch(ith, D + 2 * H + 2 * n + 2);
    float *wh = key + D, *d = wh + H;
    scored *sc = (scored *)(d + H);
    const float *q = j->q + t * H * D;
    for (int64_t h = 0; h < H; h++) wh[h] = j->w[t * H + h] * j->w_scale;
    for (int64_t s = 0; s < n; s++) {
        row_of(j->cache, j->scales, j->kv_int8, j->stride, s, j->k_off, D, key);
        /* the H dot products of the key with the query's heads, as one float matrix [H][D] times one row */
        j->k->rows_float(q, PT_F32, D, 0, H, key, 1, d, H, 0);
        float acc = 0.0f;
        for (int64_t h = 0; h < H; h++) {
            const float x = d[h] * j->scale;
            if (x > 0.0f) acc += wh[h] * x;
        }
        sc[s].v = acc;
        sc[s].s = (int32_t)s;
    }
    j->n_sel[t] = (int32_t)pt_top_k_increasing(sc, n, j->top_k, sel);
}

int pt_dsa_index_locked(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                        int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                        int64_t dim, float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel) {
    if (!index_args_ok(stride, k_off, n_ctx, T, pos0, n_heads, dim, top_k) || (kv_int8 && !scales)) return -1;
    if (T == 0) return 0;
    index_job j = {q, w, cache, scales, kv_int8, stride, k_off, T, pos0, n_heads, dim, top_k, scale, w_scale, sel,
                   n_sel, pt_active()};
    const int threads = pt_pool_threads();
    for (int i = 0; i < threads; i++)      /* scratch first: a task never meets a failed allocation */
        if (!pt_scratch(i, dim + 2 * n_heads + 2 * (pos0 + T) + 2)) return -3;
    pt_run_chunks(index_task, &j, T, (double)T * (double)(pos0 + T) * (double)(n_heads * dim));
    return 0;
}

int pt_dsa_index(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                 int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t dim,
                 float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel) {
    pt_lock();
    int rc = pt_dsa_index_locked(q, w, cache, scales, kv_int8, stride, k_off, n_ctx, T, pos0, n_heads, dim, scale,
                                 w_scale, top_k, sel, n_sel);
    pt_unlock();
    return rc;
}

/* the plain reference: every score by sequential float sums, every selection by a full sort */
int pt_dsa_index_ref(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                     int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                     int64_t dim, float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel) {
    if (!index_args_ok(stride, k_off, n_ctx, T, pos0, n_heads, dim, top_k) || (kv_int8 && !scales)) return -1;
    scored *sc = (scored *)malloc((size_t)(pos0 + T + 1) * sizeof(scored));
    if (!sc) return -3;
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t + 1;
        int32_t *out = sel + t * top_k;
        for (int64_t s = 0; s < n; s++) {
            float acc = 0.0f;
            for (int64_t h = 0; h < n_heads; h++) {
                float d = 0.0f;
                for (int64_t i = 0; i < dim; i++)
                    d += q[(t * n_heads + h) * dim + i] * cached(cache, scales, kv_int8, stride, s, k_off + i);
                d *= scale;
                if (d > 0.0f) acc += w[t * n_heads + h] * w_scale * d;
            }
            sc[s].v = acc;
            sc[s].s = (int32_t)s;
        }
        const int64_t m = n < top_k ? n : top_k;
        qsort(sc, (size_t)n, sizeof(scored), by_score);
        for (int64_t i = 0; i < m; i++) out[i] = sc[i].s;
        qsort(out, (size_t)m, sizeof(int32_t), by_pos);
        n_sel[t] = (int32_t)m;
    }
    free(sc);
    return 0;
}

/* ---- attention over the selected positions ---- */
typedef struct {
    const float *q;
    const void *cache;
    const float *scales;
    int kv_int8;
    int64_t stride, T, n_heads, hd, top_k, groups;
    float scale;
    const int32_t *sel, *n_sel;
    float *out;
    const pt_kernels *k;
    const float *sinks;         /* issue 36, fam36m: [n_heads] attention-sink logits (HY-V4), or NULL */
} attn_job;

#define BLOCK PT_ATTN_BLOCK

static int attn_args_ok(int64_t stride, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd,
                        int64_t top_k) {
    return T >= 0 && pos0 >= 0 && pos0 + T <= n_ctx && n_heads > 0 && hd > 0 && hd <= stride && top_k > 0;
}

/* a query's state (m, l) and o fold in a block's */
static void fold(float *ml, float *o, const float *bml, const float *bo, int64_t hd) {
    const float m = ml[0] > bml[0] ? ml[0] : bml[0];
    const float a = expf(ml[0] - m), c = expf(bml[0] - m);
    ml[0] = m;
    ml[1] = ml[1] * a + bml[1] * c;
    for (int64_t i = 0; i < hd; i++) o[i] = o[i] * a + bo[i] * c;
}

/* unit (token t, group g of heads): its selected rows gathered a block at a time, each block against the group's
 * heads, folded in position order */
static void attn_task(void *ctx, int64_t unit, int ith) {
    const attn_job *j = (const attn_job *)ctx;
    const int64_t t = unit / j->groups, g = unit % j->groups, hd = j->hd, H = j->n_heads;
    const int64_t h0 = g * H / j->groups, h1 = (g + 1) * H / j->groups, nh = h1 - h0;
    const int64_t n = j->n_sel[t];
    const int32_t *sel = j->sel + t * j->top_k;
    float *rows = pt_scratch(ith, BLOCK * hd + BLOCK + (hd + 2) * (nh + 1));
    float *scores = rows + BLOCK * hd, *bml = scores + BLOCK, *bo = bml + 2, *state = bo + hd;
    for (int64_t b0 = 0; b0 < n; b0 += BLOCK) {
        const int64_t m = n - b0 < BLOCK ? n - b0 : BLOCK;
        for (int64_t p = 0; p < m; p++)
            row_of(j->cache, j->scales, j->kv_int8, j->stride, sel[b0 + p], 0, hd, rows + p * hd);
        for (int64_t h = h0; h < h1; h++) {
            float *st = state + (h - h0) * (hd + 2);
            const float *qh = j->q + (t * H + h) * j->stride;
            if (b0 == 0) {
                j->k->attn_block(qh, rows, rows, m, hd, j->scale, 0.0f, 0.0f, 0.0f, scores, st + 2, st);
            } else {
                j->k->attn_block(qh, rows, rows, m, hd, j->scale, 0.0f, 0.0f, 0.0f, scores, bo, bml);
                fold(st, st + 2, bml, bo, hd);
            }
        }
    }
    for (int64_t h = h0; h < h1; h++) {
        const float *st = state + (h - h0) * (hd + 2);
        float *o = j->out + (t * H + h) * j->stride;
        float inv = 1.0f / st[1];
        if (j->sinks) {             /* a sink's share of the softmax, dropped (as kernels/attention.c's finish) */
            const float sk = j->sinks[h], m = st[0];
            inv = sk > m ? expf(m - sk) / (st[1] * expf(m - sk) + 1.0f) : 1.0f / (st[1] + expf(sk - m));
        }
        for (int64_t i = 0; i < hd; i++) o[i] = st[2 + i] * inv;
    }
}

static int sel_ok(const int32_t *sel, const int32_t *n_sel, int64_t T, int64_t pos0, int64_t top_k) {
    for (int64_t t = 0; t < T; t++) {
        if (n_sel[t] < 1 || n_sel[t] > top_k) return 0;
        for (int64_t i = 0; i < n_sel[t]; i++)
            if (sel[t * top_k + i] < 0 || sel[t * top_k + i] > pos0 + t) return 0;
    }
    return 1;
}

int pt_dsa_attention_locked(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                            int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                            const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks, float *out) {
    if (!attn_args_ok(stride, n_ctx, T, pos0, n_heads, hd, top_k) || (kv_int8 && !scales) ||
        !sel_ok(sel, n_sel, T, pos0, top_k))
        return -1;
    if (T == 0) return 0;
    const int threads = pt_pool_threads();
    /* decode (few tokens): the heads split in groups so that every thread has work */
    int64_t groups = T >= 2 * threads ? 1 : (2 * threads + T - 1) / T;
    if (groups > n_heads) groups = n_heads;
    attn_job j = {q, cache, scales, kv_int8, stride, T, n_heads, hd, top_k, groups, scale, sel, n_sel, out,
                  pt_active(), sinks};
    const int64_t per = (n_heads + groups - 1) / groups;
    for (int i = 0; i < threads; i++)
        if (!pt_scratch(i, BLOCK * hd + BLOCK + (hd + 2) * (per + 1))) return -3;
    double work = 0.0;
    for (int64_t t = 0; t < T; t++) work += (double)n_sel[t] * (double)(n_heads * hd) * 2.0;
    pt_run_chunks(attn_task, &j, T * groups, work);
    return 0;
}

int pt_dsa_attention(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                     int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                     const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks, float *out) {
    pt_lock();
    int rc = pt_dsa_attention_locked(q, cache, scales, kv_int8, stride, n_ctx, T, pos0, n_heads, hd, scale, sel,
                                     n_sel, top_k, sinks, out);
    pt_unlock();
    return rc;
}

/* the plain reference: two passes (the largest score, then the weights) over each query's selected rows */
int pt_dsa_attention_ref(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                         int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                         const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks, float *out) {
    if (!attn_args_ok(stride, n_ctx, T, pos0, n_heads, hd, top_k) || (kv_int8 && !scales) ||
        !sel_ok(sel, n_sel, T, pos0, top_k))
        return -1;
    float *s = (float *)malloc((size_t)top_k * sizeof(float));
    if (!s) return -3;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < n_heads; h++) {
            const float *qh = q + (t * n_heads + h) * stride;
            const int32_t *ps = sel + t * top_k;
            const int64_t n = n_sel[t];
            float m = -INFINITY, l = 0.0f;
            for (int64_t i = 0; i < n; i++) {
                float d = 0.0f;
                for (int64_t c = 0; c < hd; c++) d += qh[c] * cached(cache, scales, kv_int8, stride, ps[i], c);
                s[i] = d * scale;
                if (s[i] > m) m = s[i];
            }
            if (sinks && sinks[h] > m) m = sinks[h];        /* HY-V4 (fam36m): a sink term in the softmax */
            for (int64_t i = 0; i < n; i++) {
                s[i] = expf(s[i] - m);
                l += s[i];
            }
            if (sinks) l += expf(sinks[h] - m);
            float *o = out + (t * n_heads + h) * stride;
            for (int64_t c = 0; c < hd; c++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < n; i++) acc += s[i] * cached(cache, scales, kv_int8, stride, ps[i], c);
                o[c] = acc / l;
            }
        }
    free(s);
    return 0;
}
