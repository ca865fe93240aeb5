/* Context shift (issue 32, petit/generation/ctx_shift.py): one layer's KV cache rows [src, src + n) of each head
 * move down to [dst, dst + n) (dst < src), and the first rot_dim values of each moved key row turn by the rotation
 * (cos_d, sin_d)[t] ([n][rot_dim / 2]: from position src + t to dst + t; NULL tables: the rows only move). Pairs are
 * (j, j + rot_dim / 2), or (2j, 2j + 1) interleaved, as the store's RoPE. The rows of one head move in increasing
 * order, so a row is read before any later row overwrites it (dst < src).
 *
 * An int8 cache (the _q8 forms) keeps a float scale per row: a key row that turns is dequantized, turned and
 * quantized again as the store quantizes (q = round(x 127 / amax), scale = amax / 127); a row that only moves keeps
 * its bytes and scale. v (and v_scale) NULL: the values are the keys (latent attention's cache).
 *
 * The heads run in parallel on the pool. The reference is ctx_shift.py's numpy form (rerotate, shift_reference), which
 * tests/test_ctx_shift.py checks these against at odd sizes. -1 on a bad argument. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define MAX_ROW 4096

typedef struct {
    void *k, *v;
    float *ks, *vs;
    int64_t n_ctx, hd, src, dst, n, rot;
    const float *c, *s;
    int interleaved, q8;
} shift_job;

static void turn(float *x, int64_t rot, const float *c, const float *s, int interleaved) {
    const int64_t half = rot / 2;
    for (int64_t j = 0; j < half; j++) {
        float *pa = interleaved ? x + 2 * j : x + j, *pb = interleaved ? x + 2 * j + 1 : x + j + half;
        const float a = *pa, b = *pb;
        *pa = a * c[j] - b * s[j];
        *pb = b * c[j] + a * s[j];
    }
}

static void quant_row(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!isfinite(id)) { d = 0.0f; id = 0.0f; }
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)lrintf(x[i] * id);
    *scale = d;
}

/* one head's rows */
static void shift_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const shift_job *j = ctx;
    const int64_t hd = j->hd, half = j->rot / 2;
    const int turns = j->c != 0 && j->rot > 0;
    float row[MAX_ROW];
    for (int64_t t = 0; t < j->n; t++) {
        const int64_t from = h * j->n_ctx + j->src + t, to = h * j->n_ctx + j->dst + t;
        if (j->q8) {
            int8_t *k = j->k;
            if (turns) {
                for (int64_t i = 0; i < hd; i++) row[i] = (float)k[from * hd + i] * j->ks[from];
                turn(row, j->rot, j->c + t * half, j->s + t * half, j->interleaved);
                quant_row(row, hd, k + to * hd, j->ks + to);
            } else {
                memmove(k + to * hd, k + from * hd, (size_t)hd);
                j->ks[to] = j->ks[from];
            }
            if (j->v) {
                memmove((int8_t *)j->v + to * hd, (int8_t *)j->v + from * hd, (size_t)hd);
                j->vs[to] = j->vs[from];
            }
        } else {
            float *k = j->k;
            memmove(k + to * hd, k + from * hd, (size_t)hd * sizeof(float));
            if (turns) turn(k + to * hd, j->rot, j->c + t * half, j->s + t * half, j->interleaved);
            if (j->v) memmove((float *)j->v + to * hd, (float *)j->v + from * hd, (size_t)hd * sizeof(float));
        }
    }
}

static int shift_args_ok(int64_t n_heads, int64_t n_ctx, int64_t hd, int64_t src, int64_t dst, int64_t n,
                         int64_t rot) {
    return n_heads > 0 && hd > 0 && hd <= MAX_ROW && n >= 0 && dst >= 0 && dst < src && src + n <= n_ctx &&
           rot >= 0 && rot <= hd && rot % 2 == 0;
}

static int run(shift_job *j, int64_t n_heads) {
    pt_lock();
    pt_run_chunks(shift_head, j, n_heads, (double)n_heads * (double)j->n * (double)j->hd * 4.0);
    pt_unlock();
    return 0;
}

static int shift_f32(float *k, float *v, int64_t n_heads, int64_t n_ctx, int64_t hd, int64_t src, int64_t dst,
                     int64_t n, int64_t rot, const float *cos_d, const float *sin_d, int interleaved) {
    if (!k || !shift_args_ok(n_heads, n_ctx, hd, src, dst, n, rot) || (cos_d != 0) != (sin_d != 0)) return -1;
    shift_job j = {k, v, 0, 0, n_ctx, hd, src, dst, n, rot, cos_d, sin_d, interleaved, 0};
    return run(&j, n_heads);
}

static int shift_q8(int8_t *k, float *ks, int8_t *v, float *vs, int64_t n_heads, int64_t n_ctx, int64_t hd,
                    int64_t src, int64_t dst, int64_t n, int64_t rot, const float *cos_d, const float *sin_d,
                    int interleaved) {
    if (!k || !ks || (v != 0) != (vs != 0) || !shift_args_ok(n_heads, n_ctx, hd, src, dst, n, rot) ||
        (cos_d != 0) != (sin_d != 0)) return -1;
    shift_job j = {k, v, ks, vs, n_ctx, hd, src, dst, n, rot, cos_d, sin_d, interleaved, 1};
    return run(&j, n_heads);
}

int pt_kv_shift(float *k, float *v, int64_t n_heads, int64_t n_ctx, int64_t head_dim, int64_t src, int64_t dst,
                int64_t n, int64_t rot_dim, const float *cos_d, const float *sin_d, int interleaved) {
    return shift_f32(k, v, n_heads, n_ctx, head_dim, src, dst, n, rot_dim, cos_d, sin_d, interleaved);
}

int pt_kv_shift_q8(int8_t *k, float *k_scale, int8_t *v, float *v_scale, int64_t n_heads, int64_t n_ctx,
                   int64_t head_dim, int64_t src, int64_t dst, int64_t n, int64_t rot_dim, const float *cos_d,
                   const float *sin_d, int interleaved) {
    return shift_q8(k, k_scale, v, v_scale, n_heads, n_ctx, head_dim, src, dst, n, rot_dim, cos_d, sin_d,
                    interleaved);
}
