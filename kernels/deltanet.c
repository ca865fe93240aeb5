/* Qwen3-Next's Gated DeltaNet (pt_mamba version 4): the delta rule of each value head over the tokens of one call,
 * after kernels/ssm.c has run in_proj and the causal conv. Per value head h, its key head kh = h / (Hv / Hk) gives q
 * and k (l2-normed, q times dk^-1/2), beta = sigmoid(b) (times beta_scale when set), the log decay g = A softplus(a + dt_bias); S [dk][dv] decays
 * by e^g, takes the delta rule's correction k (beta (v - S^T k))^T, and o = S^T q is RMS-normed with norm_w, times
 * silu(z).
 *
 * Two forms of the same recurrence, chosen per call, both the active path's: the recurrent one, a token at a time
 * (kern_scan.h's delta_step_g: decode, short prompts),
 * and the chunked one (kern_scan.h, chunks of PT_SCAN_CHUNK tokens as small matrix products: prompts of at least
 * DELTA_CHUNKED_MIN tokens). They agree to float32 rounding, not to the bit (tests/test_scan.py states the bound).
 * pt_mamba.scan forces one form (1 recurrent, 2 chunked; 0 chooses). Both run in parallel over the value heads;
 * a head's result does not depend on the split. pt_delta_rule is the bare rule over prepared inputs, for the tests
 * and bench/bench_scan.py. */
#include "internal.h"

#define DELTA_MAX_DIM 512
/* auto: calls of at least this many tokens take the chunked form (bench/bench_scan.py: on AVX2 it is faster from 4
 * tokens, when a chunk fills the products' 4-row tiles; below, slower) */
#define DELTA_CHUNKED_MIN 8

static inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
static inline float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

typedef struct {
    const pt_mamba *m;
    int64_t T, cw, row;
    float *S;
} delta_job;

/* token t of value head h: q and k normed into q, k; beta; the log decay */
static void delta_prep(const delta_job *j, int64_t t, int64_t h, float *q, float *k, float *beta, float *g) {
    const pt_mamba *m = j->m;
    const int64_t dk = m->d_state, dv = m->head_dim, Hv = m->n_heads, Hk = m->n_groups, kd = Hk * dk, vd = Hv * dv;
    const int64_t kh = h / (Hv / Hk);
    const float *u = m->u + t * j->cw, *row = m->xz + t * j->row;
    float qq = 0.0f, kk = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        q[i] = u[kh * dk + i];
        k[i] = u[kd + kh * dk + i];
        qq += q[i] * q[i];
        kk += k[i] * k[i];
    }
    const float rq = 1.0f / sqrtf(qq + 1e-6f) / sqrtf((float)dk), rk = 1.0f / sqrtf(kk + 1e-6f);
    for (int64_t i = 0; i < dk; i++) {
        q[i] *= rq;
        k[i] *= rk;
    }
    *beta = 1.0f / (1.0f + expf(-row[2 * kd + 2 * vd + h]));
    if (m->beta_scale > 0.0f) *beta *= m->beta_scale;      /* OLMo Hybrid: 2 sigmoid(b) */
    *g = m->A[h] * softplus_f(row[2 * kd + 2 * vd + Hv + h] + m->dt_bias[h]);
}

/* the gated norm of head h's output o at token t into y (o may be y) */
static void delta_out(const delta_job *j, int64_t t, int64_t h, const float *o, float *y) {
    const pt_mamba *m = j->m;
    const int64_t dv = m->head_dim, kd = m->n_groups * m->d_state, vd = m->n_heads * dv;
    const float *z = m->xz + t * j->row + 2 * kd + vd + h * dv;
    float ss = 0.0f;
    for (int64_t c = 0; c < dv; c++) ss += o[c] * o[c];
    const float r = 1.0f / sqrtf(ss / (float)dv + m->eps);
    if (m->kda)                             /* Kimi Delta Attention: a sigmoid gate */
        for (int64_t c = 0; c < dv; c++) y[c] = o[c] * r * m->norm_w[c] * (1.0f / (1.0f + expf(-z[c])));
    else
        for (int64_t c = 0; c < dv; c++) y[c] = o[c] * r * m->norm_w[c] * silu_f(z[c]);
}

/* issue 30, the hybrid group: Kimi Delta Attention's value head h through all T tokens, a token at a time, in plain
 * scalar C: the state decays per key channel i by exp(A[h] softplus(f[h][i] + dt_bias[h][i])) (issue 36, fam36m:
 * or Ling 3's bounded exp(lower_bound sigmoid(-A[h] (f + dt_bias)))), then the delta rule */
static void kda_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const delta_job *j = (const delta_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t dk = m->d_state, dv = m->head_dim, Hv = m->n_heads, kd = m->n_groups * dk, vd = Hv * dv;
    float *S = j->S + h * dk * dv;
    float q[DELTA_MAX_DIM], k[DELTA_MAX_DIM], d[DELTA_MAX_DIM], kv[DELTA_MAX_DIM], o[DELTA_MAX_DIM], beta, g0;
    for (int64_t t = 0; t < j->T; t++) {
        delta_prep(j, t, h, q, k, &beta, &g0);
        const float *f = m->xz + t * j->row + 2 * kd + 2 * vd + Hv + h * dk;
        const float *v = m->u + t * j->cw + 2 * kd + h * dv;
        if (m->kda_lower_bound < 0.0f)      /* Ling 3 (fam36m): lower_bound sigmoid(exp(A_log) (f + dt_bias)) */
            for (int64_t i = 0; i < dk; i++)
                d[i] = expf(m->kda_lower_bound / (1.0f + expf(m->A[h] * (f[i] + m->dt_bias[h * dk + i]))));
        else
            for (int64_t i = 0; i < dk; i++) d[i] = expf(m->A[h] * softplus_f(f[i] + m->dt_bias[h * dk + i]));
        for (int64_t c = 0; c < dv; c++) kv[c] = 0.0f;
        for (int64_t i = 0; i < dk; i++)
            for (int64_t c = 0; c < dv; c++) {
                S[i * dv + c] *= d[i];
                kv[c] += S[i * dv + c] * k[i];
            }
        for (int64_t c = 0; c < dv; c++) {
            kv[c] = beta * (v[c] - kv[c]);
            o[c] = 0.0f;
        }
        for (int64_t i = 0; i < dk; i++)
            for (int64_t c = 0; c < dv; c++) {
                S[i * dv + c] += k[i] * kv[c];
                o[c] += S[i * dv + c] * q[i];
            }
        delta_out(j, t, h, o, m->y + t * vd + h * dv);
    }
}

/* value head h through all T tokens, a token at a time */
static void delta_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const delta_job *j = (const delta_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t dk = m->d_state, dv = m->head_dim, kd = m->n_groups * dk, vd = m->n_heads * dv;
    float *S = j->S + h * dk * dv;
    const pt_kernels *kern = pt_active();
    float q[DELTA_MAX_DIM], k[DELTA_MAX_DIM], kv[DELTA_MAX_DIM], o[DELTA_MAX_DIM], beta, g;
    for (int64_t t = 0; t < j->T; t++) {
        delta_prep(j, t, h, q, k, &beta, &g);
        kern->delta_step(S, q, k, m->u + t * j->cw + 2 * kd + h * dv, beta, expf(g), o, dk, dv, kv);
        delta_out(j, t, h, o, m->y + t * vd + h * dv);
    }
}

/* the chunked form's scratch per thread: q, k of a chunk, its g and beta, the chunk's work */
static int64_t delta_scratch(int64_t dk, int64_t dv) {
    return 2 * PT_SCAN_CHUNK * dk + 2 * PT_SCAN_CHUNK + PT_SCAN_DELTA_WORK(dk, dv);
}

/* value head h through all T tokens, PT_SCAN_CHUNK at a time; its outputs normed in place at the end */
static void delta_head_chunked(void *ctx, int64_t h, int ith) {
    const delta_job *j = (const delta_job *)ctx;
    const pt_mamba *m = j->m;
    const pt_kernels *kern = pt_active();
    const int64_t dk = m->d_state, dv = m->head_dim, kd = m->n_groups * dk, vd = m->n_heads * dv;
    float *S = j->S + h * dk * dv;
    float *q = pt_scratch(ith, delta_scratch(dk, dv)), *k = q + PT_SCAN_CHUNK * dk, *g = k + PT_SCAN_CHUNK * dk;
    float *beta = g + PT_SCAN_CHUNK, *work = beta + PT_SCAN_CHUNK;
    for (int64_t t0 = 0; t0 < j->T; t0 += PT_SCAN_CHUNK) {
        const int64_t n = j->T - t0 < PT_SCAN_CHUNK ? j->T - t0 : PT_SCAN_CHUNK;
        for (int64_t t = 0; t < n; t++) delta_prep(j, t0 + t, h, q + t * dk, k + t * dk, beta + t, g + t);
        kern->delta_chunk(S, q, k, dk, m->u + t0 * j->cw + 2 * kd + h * dv, j->cw, g, beta, n, dk, dv,
                          m->y + t0 * vd + h * dv, vd, work);
    }
    for (int64_t t = 0; t < j->T; t++) delta_out(j, t, h, m->y + t * vd + h * dv, m->y + t * vd + h * dv);
}

/* 1: the chunked form for a call of T tokens (mode: pt_mamba.scan / pt_delta_rule's) */
static int chunked(int32_t mode, int64_t T) { return mode == 2 || (mode == 0 && T >= DELTA_CHUNKED_MIN); }

/* the heads of a version-4 mixer over m->u (the conv's output, rows of cw) and m->xz (rows of `row`); the lock is
 * held. 0, or -3 when the chunked form's scratch cannot be had */
int pt_delta_heads(const pt_mamba *m, int64_t T, int64_t cw, int64_t row, float *ssm_state) {
    const int64_t dk = m->d_state, dv = m->head_dim, Hv = m->n_heads;
    delta_job j = {m, T, cw, row, ssm_state};
    const double work = (double)T * (double)Hv * (double)dk * (double)dv * 4.0;
    if (m->kda) {                           /* Kimi Delta Attention: its recurrent form at every length */
        pt_run_chunks(kda_head, &j, Hv, work);
        return 0;
    }
    if (!chunked(m->scan, T)) {
        pt_run_chunks(delta_head, &j, Hv, work);
        return 0;
    }
    for (int i = 0; i < pt_pool_threads(); i++)
        if (!pt_scratch(i, delta_scratch(dk, dv))) return -3;
    pt_run_chunks(delta_head_chunked, &j, Hv, work);
    return 0;
}

typedef struct {
    const float *q, *k, *v, *g, *beta;
    int64_t T, H, dk, dv;
    float *S, *o;
} rule_job;

static void rule_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const rule_job *j = (const rule_job *)ctx;
    const int64_t H = j->H, dk = j->dk, dv = j->dv;
    const pt_kernels *kern = pt_active();
    float kv[DELTA_MAX_DIM];
    for (int64_t t = 0; t < j->T; t++)
        kern->delta_step(j->S + h * dk * dv, j->q + (t * H + h) * dk, j->k + (t * H + h) * dk, j->v + (t * H + h) * dv,
                   j->beta[t * H + h], expf(j->g[t * H + h]), j->o + (t * H + h) * dv, dk, dv, kv);
}

static void rule_head_chunked(void *ctx, int64_t h, int ith) {
    const rule_job *j = (const rule_job *)ctx;
    const pt_kernels *kern = pt_active();
    const int64_t H = j->H, dk = j->dk, dv = j->dv;
    float *g = pt_scratch(ith, 2 * PT_SCAN_CHUNK + PT_SCAN_DELTA_WORK(dk, dv)), *beta = g + PT_SCAN_CHUNK;
    for (int64_t t0 = 0; t0 < j->T; t0 += PT_SCAN_CHUNK) {
        const int64_t n = j->T - t0 < PT_SCAN_CHUNK ? j->T - t0 : PT_SCAN_CHUNK;
        for (int64_t t = 0; t < n; t++) {
            g[t] = j->g[(t0 + t) * H + h];
            beta[t] = j->beta[(t0 + t) * H + h];
        }
        kern->delta_chunk(j->S + h * dk * dv, j->q + (t0 * H + h) * dk, j->k + (t0 * H + h) * dk, H * dk,
                          j->v + (t0 * H + h) * dv, H * dv, g, beta, n, dk, dv, j->o + (t0 * H + h) * dv, H * dv,
                          beta + PT_SCAN_CHUNK);
    }
}

int pt_delta_rule(const float *q, const float *k, const float *v, const float *g, const float *beta, int64_t T,
                  int64_t H, int64_t dk, int64_t dv, float *S, float *o, int mode) {
    if (T < 1 || H < 1 || dk < 1 || dk > DELTA_MAX_DIM || dv < 1 || dv > DELTA_MAX_DIM || mode < 0 || mode > 2)
        return -1;
    rule_job j = {q, k, v, g, beta, T, H, dk, dv, S, o};
    const double work = (double)T * (double)H * (double)dk * (double)dv * 4.0;
    int rc = 0;
    pt_lock();
    if (!chunked(mode, T)) {
        pt_run_chunks(rule_head, &j, H, work);
    } else {
        for (int i = 0; i < pt_pool_threads() && !rc; i++)
            if (!pt_scratch(i, 2 * PT_SCAN_CHUNK + PT_SCAN_DELTA_WORK(dk, dv))) rc = -3;
        if (!rc) pt_run_chunks(rule_head_chunked, &j, H, work);
    }
    pt_unlock();
    return rc;
}
