/* issue 30, the dsv4 group: DeepSeek-V4's plan ops (ids 34-39, the table at the top of plan.c), over the kernels
 * of hc.c, compress.c, dsv4_attn.c and dsa.c.
 *
 * A V4 layer's cache slot (a values-are-keys cache, one "row" of P floats a position) is read here as regions, each
 * [n_ctx][width] and starting `off` * n_ctx floats into the slot: region 0 the window's keys (= values) [hd], roped
 * and normed; a compressed layer's entries [hd] (entry w: the pooled window w, normed, roped at w m), the raw
 * compressor kv and gate of every position [Wc] each (Wc = 2 hd with overlapping windows, else hd), and a CSA
 * layer's indexer likewise (its entries [di], its raw kv and gate [2 di]). Keeping every position's raw projections
 * (not only the pending window) makes a rewind to any position exact: an entry is written when its window closes
 * and read only by queries after that, so a step that runs again over rewound positions rewrites it.
 *
 * The RoPE of V4 rotates the *last* rot_dim values of each head on adjacent pairs, and the attention output's
 * slice is rotated back at minus its position. Lock-free: the plan holds the kernels' lock. */
#include "internal.h"
#include <math.h>
#include <stdlib.h>

/* rotate the last rd values of x [hd] by the table row (c, s) [rd / 2]; sign -1 rotates back */
static void rope_tail(float *x, int64_t hd, int64_t rd, const float *c, const float *s, float sign) {
    float *r = x + hd - rd;
    for (int64_t i = 0; i < rd / 2; i++) {
        const float a = r[2 * i], b = r[2 * i + 1], sn = sign * s[i];
        r[2 * i] = a * c[i] - b * sn;
        r[2 * i + 1] = b * c[i] + a * sn;
    }
}

static int table_ok(const pt_rope_table *t, int64_t rd, int64_t hd, int64_t last_pos) {
    return t && t->cos && t->sin && rd >= 0 && rd % 2 == 0 && rd <= hd && last_pos < t->n_pos;
}

/* the n rows [n][hd] rotated at positions pos0 .. pos0 + n - 1, heads rows each */
static void rope_rows(float *x, int64_t n, int64_t heads, int64_t hd, int64_t rd, int64_t pos0,
                      const pt_rope_table *t, float sign) {
    const int64_t half = rd / 2;
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++)
            rope_tail(x + (i * heads + h) * hd, hd, rd, t->cos + (pos0 + i) * half, t->sin + (pos0 + i) * half, sign);
}

int pt_dsv4_pool_step(const float *kv, const float *gate, const float *ape, const float *norm_w, float eps,
                      int64_t T, int64_t pos0, int64_t m, int64_t d, int overlap, int64_t rd,
                      const pt_rope_table *rope, float *raw_kv, float *raw_gate, float *entries, int64_t n_ctx) {
    const int64_t W = overlap ? 2 * d : d;
    if (!kv || !gate || !ape || !raw_kv || !raw_gate || !entries || T < 1 || pos0 < 0 || m < 1 || d < 1 ||
        pos0 + T > n_ctx || !table_ok(rope, rd, d, pos0 + T - 1))
        return -1;
    memcpy(raw_kv + pos0 * W, kv, (size_t)(T * W) * sizeof(float));
    memcpy(raw_gate + pos0 * W, gate, (size_t)(T * W) * sizeof(float));
    const int64_t w0 = pos0 / m, w1 = (pos0 + T) / m;     /* the windows closing in this step */
    float *prev = 0;
    if (overlap && w1 > w0 && w1 > 1 && !(prev = malloc((size_t)(2 * m * d) * sizeof(float)))) return -3;
    int rc = 0;
    for (int64_t w = w0; w < w1 && rc == 0; w++) {
        float *pk = 0, *pg = 0, *out = entries + w * d;
        if (overlap && w > 0) {            /* the previous window's first d channels, ape added: its state */
            pk = prev;
            pg = prev + m * d;
            for (int64_t i = 0; i < m; i++)
                for (int64_t c = 0; c < d; c++) {
                    pk[i * d + c] = raw_kv[((w - 1) * m + i) * W + c];
                    pg[i * d + c] = raw_gate[((w - 1) * m + i) * W + c] + ape[i * W + c];
                }
        }
        rc = pt_dsv4_pool(raw_kv + w * m * W, raw_gate + w * m * W, ape, 1, m, d, overlap, pk, pg, out);
        if (rc) break;
        float ss = 0.0f;
        for (int64_t c = 0; c < d; c++) ss += out[c] * out[c];
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t c = 0; c < d; c++) out[c] = out[c] * inv * (norm_w ? norm_w[c] : 1.0f);
        rope_rows(out, 1, 1, d, rd, w * m, rope, 1.0f);
    }
    free(prev);
    return rc;
}

/* one (token, head) of the attention per task: pt_dsv4_attention's own arithmetic for that pair, on the pool */
typedef struct {
    const float *q, *keys, *C, *sinks;
    const int32_t *sel, *n_sel;
    int64_t n_c, m, cap, pos0, H, hd, window;
    float scale;
    float *out;
    volatile int rc;
} attn_job;

static void attn_task(void *ctx, int64_t i, int ith) {
    attn_job *j = (attn_job *)ctx;
    const int64_t t = i / j->H, h = i % j->H;
    (void)ith;
    const int rc = pt_dsv4_attention(j->q + i * j->hd, j->keys, j->pos0 + t + 1, j->C, j->n_c, j->m,
                                     j->sel ? j->sel + t * j->cap : 0, j->sel ? j->n_sel + t : 0, j->cap, 1,
                                     j->pos0 + t, 1, j->hd, j->window, j->scale, j->sinks + h, j->out + i * j->hd);
    if (rc) j->rc = rc;
}

int pt_dsv4_attend_step(float *q, float *kv, const float *sinks, int64_t T, int64_t pos0, int64_t n_heads,
                        int64_t hd, int64_t rd, int64_t window, float scale, int64_t m, const int32_t *sel,
                        const int32_t *n_sel, int64_t top_k, const pt_rope_table *rope, float *keys,
                        const float *entries, int64_t n_ctx, float *out) {
    if (!q || !kv || !keys || !out || T < 1 || pos0 < 0 || pos0 + T > n_ctx || !table_ok(rope, rd, hd, pos0 + T - 1))
        return -1;
    rope_rows(q, T, n_heads, hd, rd, pos0, rope, 1.0f);
    rope_rows(kv, T, 1, hd, rd, pos0, rope, 1.0f);
    memcpy(keys + pos0 * hd, kv, (size_t)(T * hd) * sizeof(float));
    if (!sinks || n_heads < 1 || hd < 1 || window < 1 || m < 0 || (m > 0 && !entries) || (sel && (!n_sel || top_k < 1)))
        return -1;
    attn_job j = {q, keys, entries, sinks, sel, n_sel, m ? n_ctx : 0, m, top_k, pos0, n_heads, hd, window, scale, out, 0};
    const double keys_seen = (double)(window + (m ? (sel ? top_k : (pos0 + T) / m) : 0));
    pt_run_chunks(attn_task, &j, T * n_heads, (double)T * (double)n_heads * keys_seen * (double)hd * 2.0);
    if (j.rc) return j.rc;
    rope_rows(out, T, n_heads, hd, rd, pos0, rope, -1.0f);
    return 0;
}

int pt_dsv4_index_step(float *q, const float *w, int64_t T, int64_t pos0, int64_t n_heads, int64_t d, int64_t rd,
                       int64_t m, float scale, float w_scale, int64_t top_k, const pt_rope_table *rope,
                       const float *entries, int64_t n_ctx, int32_t *sel, int32_t *n_sel) {
    if (!q || !w || !entries || !sel || !n_sel || T < 1 || pos0 < 0 || m < 1 || pos0 + T > n_ctx ||
        !table_ok(rope, rd, d, pos0 + T - 1))
        return -1;
    rope_rows(q, T, n_heads, d, rd, pos0, rope, 1.0f);
    for (int64_t t = 0; t < T; t++) {
        const int64_t last = (pos0 + t + 1) / m - 1;      /* the query's last closed window */
        if (last < 0) {
            n_sel[t] = 0;
            continue;
        }
        int rc = pt_dsa_index_locked(q + t * n_heads * d, w + t * n_heads, entries, 0, 0, d, 0, n_ctx, 1, last,
                                     n_heads, d, scale, w_scale, top_k, sel + t * top_k, n_sel + t);
        if (rc) return rc;
    }
    return 0;
}

int pt_hash_route(const int32_t *ids, int64_t T, const int32_t *table, int64_t rows, int64_t k, int32_t *forced) {
    if (!ids || !table || !forced || k < 1) return -1;
    for (int64_t t = 0; t < T; t++) {
        if (ids[t] < 0 || ids[t] >= rows) return -2;
        memcpy(forced + t * k, table + (int64_t)ids[t] * k, (size_t)k * sizeof(int32_t));
    }
    return 0;
}
