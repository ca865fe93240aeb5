/* Attention and what feeds it: RoPE applied to q and k as k and v are stored into the KV cache (float or int8 rows
 * with one scale each), and the attention driver, which splits (token, head) items across the pool and runs each
 * through the active path's attention kernel. */
#include "internal.h"

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

int pt_rope_store(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                  int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                  int64_t n_pos, int interleaved, float *k_cache, float *v_cache, int64_t n_ctx) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, n_ctx, cos_tab)) return -1;
    const int rotate = cos_tab && rot_dim;
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = pos0 + t;
        const float *c = rotate ? cos_tab + pos * half : 0, *s = rotate ? sin_tab + pos * half : 0;
        if (rotate)
            for (int64_t h = 0; h < n_heads; h++) rope_vec(q + (t * n_heads + h) * head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            float *kc = k_cache + (h * n_ctx + pos) * head_dim, *vc = v_cache + (h * n_ctx + pos) * head_dim;
            memcpy(kc, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            memcpy(vc, v + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(kc, rot_dim, c, s, interleaved);
        }
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
        if (rotate)
            for (int64_t h = 0; h < n_heads; h++) rope_vec(q + (t * n_heads + h) * head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            const int64_t at = h * n_ctx + pos;
            memcpy(row, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(row, rot_dim, c, s, interleaved);
            quant_row_i8(row, head_dim, k_cache + at * head_dim, k_scale + at);
            quant_row_i8(v + (t * n_kv + h) * head_dim, head_dim, v_cache + at * head_dim, v_scale + at);
        }
    }
    return 0;
}

typedef struct {
    const float *q, *kc, *vc;
    float *out;
    int64_t n_ctx, n_heads, n_kv, hd, pos0, items_per_chunk, n_items, window;
    float scale, softcap;
    const int8_t *kq, *vq;      /* the int8 cache, when kc / vc are NULL */
    const float *ks, *vs;
    const pt_kernels *k;
} attn_job;

static void attn_task(void *ctx, int64_t chunk, int ith) {
    attn_job *j = (attn_job *)ctx;
    const int64_t group = j->n_heads / j->n_kv;
    for (int64_t it = chunk * j->items_per_chunk; it < (chunk + 1) * j->items_per_chunk && it < j->n_items; it++) {
        const int64_t t = it / j->n_heads, h = it % j->n_heads, kvh = h / group, seen = j->pos0 + t + 1;
        /* a sliding window of w positions: the query and the w - 1 before it */
        const int64_t n = j->window > 0 && j->window < seen ? j->window : seen, first = seen - n;
        float *scores = pt_scratch(ith, n);
        const int64_t row = kvh * j->n_ctx + first, off = row * j->hd;
        if (j->kc)
            j->k->attn_head(j->q + it * j->hd, j->kc + off, j->vc + off, n, j->hd, j->scale, j->softcap, scores,
                            j->out + it * j->hd);
        else
            j->k->attn_head_q8(j->q + it * j->hd, j->kq + off, j->ks + row, j->vq + off, j->vs + row, n, j->hd,
                               j->scale, j->softcap, scores, j->out + it * j->hd);
    }
}

/* the caller holds the lock */
static int run_attention_locked(attn_job *j, int64_t T, int64_t pos0) {
    if (j->n_kv <= 0 || j->n_heads % j->n_kv || pos0 < 0 || pos0 + T > j->n_ctx || j->window < 0) return -1;
    j->k = pt_active();
    /* scratch first, on this thread's slot set, so a task never meets a failed allocation */
    for (int i = 0; i < pt_pool_threads(); i++) {
        if (!pt_scratch(i, pos0 + T)) return -3;
    }
    int64_t target = (int64_t)pt_pool_threads() * 8;
    j->items_per_chunk = j->n_items / target > 1 ? j->n_items / target : 1;
    int64_t chunks = (j->n_items + j->items_per_chunk - 1) / j->items_per_chunk;
    /* work ~ query heads x positions x head_dim, twice (scores and values) */
    pt_run_chunks(attn_task, j, chunks, (double)j->n_items * (double)(pos0 + T) * (double)j->hd * 2.0);
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
                        int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window, float *out) {
    attn_job j = {.q = q, .out = out, .n_ctx = n_ctx, .n_heads = n_heads, .n_kv = n_kv, .hd = head_dim,
                  .pos0 = pos0, .n_items = T * n_heads, .scale = scale, .softcap = softcap, .window = window};
    if (kv_int8) {
        j.kq = (const int8_t *)k_cache; j.vq = (const int8_t *)v_cache; j.ks = k_scale; j.vs = v_scale;
    } else {
        j.kc = (const float *)k_cache; j.vc = (const float *)v_cache;
    }
    return run_attention_locked(&j, T, pos0);
}

int pt_attention(const float *q, const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T,
                 int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t pos0, float scale, float softcap,
                 int64_t window, float *out) {
    attn_job j = {.q = q, .kc = k_cache, .vc = v_cache, .out = out, .n_ctx = n_ctx, .n_heads = n_heads,
                  .n_kv = n_kv, .hd = head_dim, .pos0 = pos0, .n_items = T * n_heads, .scale = scale,
                  .softcap = softcap, .window = window};
    return run_attention(&j, T, pos0);
}

int pt_attention_q8(const float *q, const int8_t *k_cache, const float *k_scale, const int8_t *v_cache,
                    const float *v_scale, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                    int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window, float *out) {
    attn_job j = {.q = q, .out = out, .n_ctx = n_ctx, .n_heads = n_heads, .n_kv = n_kv, .hd = head_dim,
                  .pos0 = pos0, .n_items = T * n_heads, .scale = scale, .softcap = softcap, .window = window,
                  .kq = k_cache, .vq = v_cache, .ks = k_scale, .vs = v_scale};
    return run_attention(&j, T, pos0);
}
