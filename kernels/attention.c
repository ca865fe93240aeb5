/* Attention and what feeds it: RoPE applied to q and k as k and v are stored into the KV cache (float or int8 rows
 * with one scale each), and the attention driver, which cuts each query's positions into blocks, runs them through
 * the active path's block kernel over the pool and folds them in order (the split is described below). */
#include "internal.h"
#include <stdlib.h>

static void rope_vec(float *x, int64_t hd, const float *c, const float *s, int interleaved) {
    const int64_t half = hd / 2;
    if (interleaved) {
        for (int64_t j = 0; j < half; j++) {
            float a = x[2 * j], b = x[2 * j + 1];
            x[2 * j] = a * c[j] - b * s[j];
            x[2 * j + 1] = a * s[j] + b * c[j];
        }
    } else {
        for (int64_t j = 0; j < half; j++) {
            float a = x[j], b = x[j + half];
            x[j] = a * c[j] - b * s[j];
            x[j + half] = b * c[j] + a * s[j];
        }
    }
}

/* rotate the first rot_dim values of each head (all of them when rot_dim == head_dim; none for rot_dim 0 or a
 * NULL table: a layer without RoPE) */
static int rope_args_ok(int64_t T, int64_t head_dim, int64_t rot_dim, int64_t pos0, int64_t n_pos, int64_t n_ctx,
                        const float *cos_tab) {
    if (pos0 < 0 || pos0 + T > n_ctx || rot_dim < 0 || rot_dim > head_dim || rot_dim % 2) return 0;
    return !(cos_tab && rot_dim && pos0 + T > n_pos);
}

/* the first rot_dim values of each of one token's n heads, in place (both cache kinds rotate the queries alike) */
static void rope_heads(float *x, int64_t n, int64_t head_dim, int64_t rot_dim, const float *c, const float *s,
                       int interleaved) {
    for (int64_t h = 0; h < n; h++) rope_vec(x + h * head_dim, rot_dim, c, s, interleaved);
}

int pt_rope_store(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                  int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                  int64_t n_pos, int interleaved, float *k_cache, float *v_cache, int64_t n_ctx) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, n_ctx, cos_tab)) return -1;
    const int rotate = cos_tab && rot_dim;
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = pos0 + t;
        const float *c = rotate ? cos_tab + pos * half : 0, *s = rotate ? sin_tab + pos * half : 0;
        if (rotate) rope_heads(q + t * n_heads * head_dim, n_heads, head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            float *kc = k_cache + (h * n_ctx + pos) * head_dim, *vc = v_cache + (h * n_ctx + pos) * head_dim;
            memcpy(kc, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (vc != kc) memcpy(vc, v + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(kc, rot_dim, c, s, interleaved);
        }
    }
    return 0;
}

int pt_rope(float *q, float *k, int64_t T, int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t rot_dim,
            int64_t pos0, const float *cos_tab, const float *sin_tab, int64_t n_pos, int interleaved) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, pos0 + T, cos_tab)) return -1;
    if (!cos_tab || !rot_dim) return 0;
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        const float *c = cos_tab + (pos0 + t) * half, *s = sin_tab + (pos0 + t) * half;
        rope_heads(q + t * n_heads * head_dim, n_heads, head_dim, rot_dim, c, s, interleaved);
        rope_heads(k + t * n_kv * head_dim, n_kv, head_dim, rot_dim, c, s, interleaved);
    }
    return 0;
}

/* one row of an int8 cache: q = round(x * 127 / amax), scale = amax / 127 */
static void quant_row_i8(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!isfinite(id)) { d = 0.0f; id = 0.0f; }
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)lrintf(x[i] * id);
    *scale = d;
}

int pt_rope_store_q8(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                     int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                     int64_t n_pos, int interleaved, int8_t *k_cache, float *k_scale, int8_t *v_cache,
                     float *v_scale, int64_t n_ctx) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, n_ctx, cos_tab) || head_dim > 1024) return -1;
    const int rotate = cos_tab && rot_dim;
    const int64_t half = rot_dim / 2;
    float row[1024];
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = pos0 + t;
        const float *c = rotate ? cos_tab + pos * half : 0, *s = rotate ? sin_tab + pos * half : 0;
        if (rotate) rope_heads(q + t * n_heads * head_dim, n_heads, head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            const int64_t at = h * n_ctx + pos;
            memcpy(row, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(row, rot_dim, c, s, interleaved);
            quant_row_i8(row, head_dim, k_cache + at * head_dim, k_scale + at);
            if (v_cache != k_cache)   /* the same buffer: the values are the keys (latent attention's cache) */
                quant_row_i8(v + (t * n_kv + h) * head_dim, head_dim, v_cache + at * head_dim, v_scale + at);
        }
    }
    return 0;
}

/* ---- the attention driver ----
 * A query at position pos sees the positions [first, pos] (first > 0 under a sliding window; an encoder's, issue 35,
 * [first, seen) past pos). They are cut into
 * blocks of PT_ATTN_BLOCK aligned to absolute positions; the active path's kernel turns one query head and one block
 * into the block's largest score, its sum of exponentials and its weighted sum of values (online softmax), and
 * fold() merges a query's blocks in position order. Which blocks a query has depends only on its position and the
 * window, and the fold's order is fixed: so a query gets the same bits whatever T, the thread count and the way the
 * work is split, and token-by-token decode gives prefill's bits (a reused KV cache gives a fresh prefill's logits).
 *
 * The work is split two ways, chosen per call (neither changes a bit):
 *  - tiles (prefill, and short contexts): a unit is a few tokens x the query heads of one kv head (or a single
 *    (token, head) when there are too few tokens to balance the threads). It walks its blocks in order, each block
 *    against every query of the tile while the block's keys and values are in cache, and folds into per-query
 *    state in the thread's scratch: nothing grows with the context but one block of scores. Tiles are handed out
 *    latest tokens first, the longest first, so the short ones fill in at the end.
 *  - blocks (decode and a few tokens over a long context): a unit is one block of one token for the query heads of
 *    one kv head, so every thread has work even for a single token; each writes its partial result to a shared
 *    buffer, and a second pass folds each query's blocks in order. */
typedef struct {
    const float *q, *kc, *vc;
    float *out;
    int64_t n_ctx, n_heads, n_kv, hd, pos0, T, window;
    float scale, softcap;
    const float *sinks;         /* [n_heads] attention sinks (gpt-oss), or NULL */
    int64_t chunk;              /* > 0: chunked attention (Llama 4) */
    float temp_floor, temp_scale;   /* temp_floor > 0: Llama 4's temperature-tuned scores */
    int32_t temp_at_p;          /* 1: floor(p / temp_floor) (Ministral 3), 0: floor((p + 1) / temp_floor) */
    const float *alibi;         /* [n_heads] ALiBi slopes (BLOOM, MPT, Falcon), or NULL */
    int32_t bidirectional;      /* 1: every query sees positions 0..pos0+T-1 (an encoder, issue 35); with a window
                                 * w, those within w - 1 of it either side */
    const int8_t *kq, *vq;      /* the int8 cache, when kc / vc are NULL */
    const float *ks, *vs;
    const pt_kernels *k;
    /* the split: tiles of tile_t tokens x tile_h heads, or (blocks) units of one block, partials in part */
    int64_t tile_t, tile_h, n_tiles_t, n_sub, max_blocks;
    float *part;                /* blocks: [T][n_heads][max_blocks][hd + 2] */
} attn_job;

#define BLOCK PT_ATTN_BLOCK

/* the positions query t sees: [*first, *seen) */
static void span(const attn_job *j, int64_t t, int64_t *first, int64_t *seen) {
    const int64_t p = j->pos0 + t;
    /* an encoder's query sees the whole call, the positions after it too */
    *seen = j->bidirectional ? j->pos0 + j->T : p + 1;
    /* a sliding window of w positions: the query and the w - 1 before it; an encoder's also the w - 1 after it
     * (ModernBERT's local layers, issue 35) */
    *first = j->window > 0 && j->window <= p ? p + 1 - j->window : 0;
    if (j->bidirectional && j->window > 0 && p + j->window < *seen) *seen = p + j->window;
    /* chunks of c positions: the query's own chunk, from its start */
    if (j->chunk > 0 && (*seen - 1) / j->chunk * j->chunk > *first) *first = (*seen - 1) / j->chunk * j->chunk;
}

/* the float rows of kv head kvh at positions [p0, p1): the cache itself, or for the int8 cache the rows
 * dequantized (k8[p] * ks[p]) into buf (2 x PT_ATTN_BLOCK x hd floats), once for every query that reads them */
typedef struct { const float *k, *v; int64_t p0; } kv_rows;

static kv_rows rows_of(const attn_job *j, int64_t kvh, int64_t p0, int64_t p1, float *buf) {
    const int64_t row = kvh * j->n_ctx + p0, hd = j->hd;
    if (j->kc) return (kv_rows){j->kc + row * hd, j->vc + row * hd, p0};
    float *k = buf, *v = buf + BLOCK * hd;
    for (int64_t p = 0; p < p1 - p0; p++) {
        const int8_t *kq = j->kq + (row + p) * hd, *vq = j->vq + (row + p) * hd;
        const float ks = j->ks[row + p], vs = j->vs[row + p];
        for (int64_t i = 0; i < hd; i++) {
            k[p * hd + i] = (float)kq[i] * ks;
            v[p * hd + i] = (float)vq[i] * vs;
        }
    }
    return (kv_rows){k, v, p0};
}

/* query (t, h) over absolute block b (clipped to its span), whose rows r holds: ml and o as the kernels' contract
 * says */
static void block(const attn_job *j, int64_t t, int64_t h, int64_t b, kv_rows r, float *scores, float *o, float *ml) {
    int64_t first, seen;
    span(j, t, &first, &seen);
    const int64_t p0 = b * BLOCK > first ? b * BLOCK : first, p1 = (b + 1) * BLOCK < seen ? (b + 1) * BLOCK : seen;
    const int64_t off = (p0 - r.p0) * j->hd;
    float scale = j->scale;
    if (j->temp_floor > 0.0f && j->temp_at_p == 2)    /* Beam: q x exp(a ln(1 + (p + 1) / f)) (issue 36, fam36i) */
        scale *= expf(j->temp_scale * log1pf((float)(j->pos0 + t + 1) / j->temp_floor));
    else if (j->temp_floor > 0.0f)  /* q x (1 + a ln(1 + floor((p + 1) / f))), folded into the score's scale;
                                     * Ministral 3: floor(p / f) */
        scale *= 1.0f + j->temp_scale * logf(floorf((float)(j->pos0 + t + (j->temp_at_p ? 0 : 1)) / j->temp_floor)
                                             + 1.0f);
    const float slope = j->alibi ? j->alibi[h] : 0.0f;
    j->k->attn_block(j->q + (t * j->n_heads + h) * j->hd, r.k + off, r.v + off, p1 - p0, j->hd, scale, j->softcap,
                     slope, (float)(p0 - (j->pos0 + t)), scores, o, ml);
}

/* a query's state (m, l, o) folds in the next block's (bm, bl, bo): the one merge both splits use */
static void fold(float *ml, float *o, const float *bml, const float *bo, int64_t hd) {
    const float m = ml[0] > bml[0] ? ml[0] : bml[0];
    const float a = expf(ml[0] - m), c = expf(bml[0] - m);
    ml[0] = m;
    ml[1] = ml[1] * a + bml[1] * c;
    for (int64_t i = 0; i < hd; i++) o[i] = o[i] * a + bo[i] * c;
}

/* out = o / l; with a sink logit s (the head's extra softmax term whose share is dropped): o / (l + e^(s - m)),
 * computed so that neither exponential can overflow */
static void finish(const float *ml, const float *o, int64_t hd, const float *sink, float *out) {
    float inv = 1.0f / ml[1];
    if (sink) {
        const float s = *sink, m = ml[0];
        if (s > m) {
            const float c = expf(m - s);
            inv = c / (ml[1] * c + 1.0f);
        } else {
            inv = 1.0f / (ml[1] + expf(s - m));
        }
    }
    for (int64_t i = 0; i < hd; i++) out[i] = o[i] * inv;
}

static int64_t first_block(const attn_job *j, int64_t t) {
    int64_t first, seen;
    span(j, t, &first, &seen);
    return first / BLOCK;
}

static int64_t last_block(const attn_job *j, int64_t t) {
    int64_t first, seen;
    span(j, t, &first, &seen);
    return (seen - 1) / BLOCK;
}

/* per-thread scratch of a tile: one block of scores, one block's result, and the state of each query */
static int64_t tile_scratch(const attn_job *j) {
    return BLOCK * (1 + 2 * j->hd) + (j->hd + 2) * (1 + j->tile_t * j->tile_h);
}

static void tile_task(void *ctx, int64_t unit, int ith) {
    const attn_job *j = (const attn_job *)ctx;
    const int64_t per_kv = j->n_sub, hd = j->hd, group = j->n_heads / j->n_kv;
    const int64_t tile = j->n_tiles_t - 1 - unit / (j->n_kv * per_kv), rest = unit % (j->n_kv * per_kv);
    const int64_t h0 = rest / per_kv * group + rest % per_kv * j->tile_h;
    const int64_t t0 = tile * j->tile_t, t1 = t0 + j->tile_t < j->T ? t0 + j->tile_t : j->T;
    const int64_t nh = j->tile_h, stride = hd + 2;
    float *scores = pt_scratch(ith, tile_scratch(j)), *buf = scores + BLOCK, *bml = buf + 2 * BLOCK * hd;
    float *bo = bml + 2, *state = bo + hd;
    const int64_t b_lo = first_block(j, t0), b_hi = last_block(j, t1 - 1), kvh = h0 / group;
    int64_t first0, seen0, first1, seen1;     /* the tile reads [first of t0, seen of t1 - 1) */
    span(j, t0, &first0, &seen0);
    span(j, t1 - 1, &first1, &seen1);
    for (int64_t b = b_lo; b <= b_hi; b++) {
        const int64_t p0 = b * BLOCK > first0 ? b * BLOCK : first0;
        const int64_t p1 = (b + 1) * BLOCK < seen1 ? (b + 1) * BLOCK : seen1;
        const kv_rows r = rows_of(j, kvh, p0, p1, buf);
        for (int64_t t = t0; t < t1; t++) {
            const int64_t fb = first_block(j, t);
            if (b < fb || b > last_block(j, t)) continue;
            for (int64_t h = h0; h < h0 + nh; h++) {
                float *st = state + ((t - t0) * nh + (h - h0)) * stride;
                if (b == fb) {
                    block(j, t, h, b, r, scores, st + 2, st);
                } else {
                    block(j, t, h, b, r, scores, bo, bml);
                    fold(st, st + 2, bml, bo, hd);
                }
            }
        }
    }
    for (int64_t t = t0; t < t1; t++)
        for (int64_t h = h0; h < h0 + nh; h++)
            finish(state + ((t - t0) * nh + (h - h0)) * stride, state + ((t - t0) * nh + (h - h0)) * stride + 2, hd,
                   j->sinks ? j->sinks + h : 0, j->out + (t * j->n_heads + h) * hd);
}

/* blocks: unit (t, kv head, block index within the token's blocks) writes its partials */
static void block_task(void *ctx, int64_t unit, int ith) {
    const attn_job *j = (const attn_job *)ctx;
    const int64_t group = j->n_heads / j->n_kv, nb = j->max_blocks, stride = j->hd + 2;
    const int64_t t = unit / (j->n_kv * nb), kvh = unit / nb % j->n_kv, i = unit % nb, b = first_block(j, t) + i;
    if (b > last_block(j, t)) return;
    float *scores = pt_scratch(ith, BLOCK * (1 + 2 * j->hd));
    int64_t first, seen;
    span(j, t, &first, &seen);
    const int64_t p0 = b * BLOCK > first ? b * BLOCK : first, p1 = (b + 1) * BLOCK < seen ? (b + 1) * BLOCK : seen;
    const kv_rows r = rows_of(j, kvh, p0, p1, scores + BLOCK);
    for (int64_t h = kvh * group; h < (kvh + 1) * group; h++) {
        float *p = j->part + ((t * j->n_heads + h) * nb + i) * stride;
        block(j, t, h, b, r, scores, p + 2, p);
    }
}

/* blocks, second pass: each query folds its blocks in order (in place over its first block's partials) */
static void merge_task(void *ctx, int64_t item, int ith) {
    (void)ith;
    const attn_job *j = (const attn_job *)ctx;
    const int64_t t = item / j->n_heads, nb = j->max_blocks, stride = j->hd + 2;
    const int64_t n = last_block(j, t) - first_block(j, t) + 1;
    float *p = j->part + item * nb * stride;
    for (int64_t i = 1; i < n; i++) fold(p, p + 2, p + i * stride, p + i * stride + 2, j->hd);
    finish(p, p + 2, j->hd, j->sinks ? j->sinks + item % j->n_heads : 0, j->out + item * j->hd);
}

/* the partials of the block split: shared by the threads of one call, kept between calls (under the lock) */
static float *part_buf;
static int64_t part_cap;

static float *partials(int64_t n) {
    if (part_cap < n) {
        free(part_buf);
        part_cap = n + n / 2;
        part_buf = (float *)malloc((size_t)part_cap * sizeof(float));
        if (!part_buf) part_cap = 0;
    }
    return part_buf;
}

static void with_extra(attn_job *j, const pt_attn_extra *e) {
    if (!e) return;
    j->sinks = e->sinks;
    j->chunk = e->chunk;
    j->temp_floor = e->temp_floor;
    j->temp_scale = e->temp_scale;
    j->temp_at_p = e->temp_at_p;
    j->alibi = e->alibi;
    j->bidirectional = e->bidirectional != 0;
}

/* the caller holds the lock */
static int run_attention_locked(attn_job *j, int64_t T, int64_t pos0) {
    if (j->chunk < 0 || j->n_kv <= 0 || j->n_heads < 0 || j->n_heads % j->n_kv || pos0 < 0 || T < 0 || pos0 + T > j->n_ctx ||
        j->window < 0 || j->hd < 0)
        return -1;
    if (T == 0 || j->n_heads == 0) return 0;
    j->k = pt_active();
    j->T = T;
    const int threads = pt_pool_threads();
    const int64_t target = (int64_t)threads * 8, group = j->n_heads / j->n_kv;
    j->max_blocks = 1;
    for (int64_t t = 0; t < T; t++) {
        const int64_t nb = last_block(j, t) - first_block(j, t) + 1;
        if (nb > j->max_blocks) j->max_blocks = nb;
    }
    /* work ~ query heads x positions x head_dim, twice (scores and values) */
    const double work = (double)T * (double)j->n_heads * (double)(pos0 + T) * (double)j->hd * 2.0;
    if (j->max_blocks > 1 && T * j->n_kv < target) {
        /* few tokens over a long context: split the positions */
        const int64_t units = T * j->n_kv * j->max_blocks;
        if (!partials(T * j->n_heads * j->max_blocks * (j->hd + 2))) return -3;
        j->part = part_buf;
        for (int i = 0; i < threads; i++)
            if (!pt_scratch(i, BLOCK * (1 + 2 * j->hd))) return -3;
        pt_run_chunks(block_task, j, units, work);
        pt_run_chunks(merge_task, j, T * j->n_heads, (double)T * j->n_heads * j->max_blocks * j->hd);
        return 0;
    }
    if (T * j->n_kv >= target) {      /* tiles of several tokens x a kv head's query heads */
        j->tile_h = group;
        j->n_sub = 1;
        j->tile_t = T * j->n_kv / target;
        j->tile_t = j->tile_t < 1 ? 1 : (j->tile_t > 16 ? 16 : j->tile_t);
    } else {                          /* single (token, head) items */
        j->tile_h = 1;
        j->n_sub = group;
        j->tile_t = 1;
    }
    j->n_tiles_t = (T + j->tile_t - 1) / j->tile_t;
    /* scratch first, on this thread's slot set, so a task never meets a failed allocation */
    for (int i = 0; i < threads; i++)
        if (!pt_scratch(i, tile_scratch(j))) return -3;
    pt_run_chunks(tile_task, j, j->n_tiles_t * j->n_kv * j->n_sub, work);
    return 0;
}

static int run_attention(attn_job *j, int64_t T, int64_t pos0) {
    pt_lock();
    int rc = run_attention_locked(j, T, pos0);
    pt_unlock();
    return rc;
}

int pt_attention_locked(const float *q, const void *k_cache, const float *k_scale, const void *v_cache,
                        const float *v_scale, int kv_int8, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                        int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window,
                        const pt_attn_extra *extra, float *out) {
    attn_job j = {.q = q, .out = out, .n_ctx = n_ctx, .n_heads = n_heads, .n_kv = n_kv, .hd = head_dim,
                  .pos0 = pos0, .scale = scale, .softcap = softcap, .window = window};
    with_extra(&j, extra);
    if (kv_int8) {
        j.kq = (const int8_t *)k_cache; j.vq = (const int8_t *)v_cache; j.ks = k_scale; j.vs = v_scale;
    } else {
        j.kc = (const float *)k_cache; j.vc = (const float *)v_cache;
    }
    return run_attention_locked(&j, T, pos0);
}

int pt_attention(const float *q, const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T,
                 int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t pos0, float scale, float softcap,
                 int64_t window, const pt_attn_extra *extra, float *out) {
    attn_job j = {.q = q, .kc = k_cache, .vc = v_cache, .out = out, .n_ctx = n_ctx, .n_heads = n_heads,
                  .n_kv = n_kv, .hd = head_dim, .pos0 = pos0, .scale = scale,
                  .softcap = softcap, .window = window};
    with_extra(&j, extra);
    return run_attention(&j, T, pos0);
}

int pt_attention_q8(const float *q, const int8_t *k_cache, const float *k_scale, const int8_t *v_cache,
                    const float *v_scale, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                    int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window,
                    const pt_attn_extra *extra, float *out) {
    attn_job j = {.q = q, .out = out, .n_ctx = n_ctx, .n_heads = n_heads, .n_kv = n_kv, .hd = head_dim,
                  .pos0 = pos0, .scale = scale, .softcap = softcap, .window = window,
                  .kq = k_cache, .vq = v_cache, .ks = k_scale, .vs = v_scale};
    with_extra(&j, extra);
    return run_attention(&j, T, pos0);
}
