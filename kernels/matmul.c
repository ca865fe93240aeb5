/* The matmul driver: activations quantized once per call for the integer kernels, then the rows of up to three
 * matrices that share one input split into chunks across the pool, each chunk run by the active path's kernel. */
#include "internal.h"
#include <stdlib.h>

/* ---- activation scratch, grown on demand (guarded by the lock) ---- */
typedef struct { int8_t *q; float *d; int32_t *s; int16_t *h; uint8_t *f6; int64_t cap; } act_buf;
static act_buf act, actk;      /* quant_act's blocks; pt_quant_act_k's super-blocks (the K-quants') */

static int buf_reserve(act_buf *b, int64_t n) {
    if (b->cap >= n) return 0;
    free(b->q); free(b->d); free(b->s); free(b->h); free(b->f6);
    b->q = (int8_t *)malloc((size_t)n);
    b->d = (float *)malloc((size_t)(n / QK + 1) * sizeof(float));
    b->s = (int32_t *)malloc((size_t)(n / QK + 1) * sizeof(int32_t));
    b->h = (int16_t *)malloc((size_t)(n / 16 + 1) * sizeof(int16_t));
    b->f6 = (uint8_t *)malloc((size_t)(n / 256 + 1));
    b->cap = b->q && b->d && b->s && b->h && b->f6 ? n : 0;
    return b->cap ? 0 : -1;
}
static int act_reserve(int64_t n) { return buf_reserve(&act, n); }

/* Q8_K's rule for the K-quants' activations (PT_KQ8): quant_act's (scale max|x| / 127, round half to even, |q| <=
 * 127, NaN in gives NaN out) over each super-block of 256 values, d[] the super-block's scale for each of its 8
 * blocks, s[] the blocks' sums, h[] the sums of 16. Plain C on every path: a token's quantization is a small part
 * of a product with it, and one copy gives every path the same activations. */
void pt_quant_act_k(const float *x, int64_t K, int8_t *q, float *d, int32_t *s, int16_t *h) {
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const float *xs = x + sb * 256;
        float amax = 0.0f;
        int nan = 0;
        for (int j = 0; j < 256; j++) { amax = fmaxf(amax, fabsf(xs[j])); nan |= isnan(xs[j]); }
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        if (!isfinite(id)) { db = 0.0f; id = 0.0f; }
        if (nan) { db = NAN; id = 0.0f; }
        for (int k = 0; k < 16; k++) {
            int32_t sum = 0;
            for (int j = 16 * k; j < 16 * k + 16; j++) {
                long v = lrintf(xs[j] * id);
                v = v > 127 ? 127 : (v < -127 ? -127 : v);
                q[sb * 256 + j] = (int8_t)v;
                sum += (int32_t)v;
            }
            h[sb * 16 + k] = (int16_t)sum;
        }
        for (int b = 0; b < 8; b++) {
            d[sb * 8 + b] = db;
            s[sb * 8 + b] = h[sb * 16 + 2 * b] + h[sb * 16 + 2 * b + 1];
        }
    }
}

void pt_q6_flags(const int8_t *q, int64_t K, uint8_t *f) {
    for (int64_t sb = 0; sb < K / 256; sb++) {
        int ok = 1;
        for (int g = 0; g < 32 && ok; g++) {            /* half-block g / 2, its even or odd pairs */
            const int8_t *x = q + sb * 256 + 16 * (g / 2) + 2 * (g % 2);
            int pos = 0, neg = 0;
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 2; l++) {
                    const int v = x[4 * k + l];
                    if (v > 0) pos += v;
                    else neg -= v;
                }
            ok = pos <= 520 && neg <= 520;
        }
        f[sb] = (uint8_t)ok;
    }
}

void pt_quantize_act(const float *x, int64_t T, int64_t K, int8_t *q, float *d, int32_t *s) {
    const pt_kernels *k = pt_active();
    for (int64_t t = 0; t < T; t++) k->quant_act(x + t * K, K, q + t * K, d + t * (K / QK), s + t * (K / QK));
}

typedef struct { const float *x; int64_t K; const pt_kernels *k; int q6; } quant_job;   /* q6: pt_q6_flags too */

/* BitNet's activation rule, per token: d = 127 / max(max |x|, 1e-5), q = clamp(round(x d), -128, 127) (half to even,
 * as torch.round), s = the sum of q (the ternary kernel's offset) */
static void quant_token_task(void *ctx, int64_t t, int ith) {
    (void)ith;
    const quant_job *j = (const quant_job *)ctx;
    const float *x = j->x + t * j->K;
    float amax = 0.0f;
    for (int64_t i = 0; i < j->K; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float d = 127.0f / (amax > 1e-5f ? amax : 1e-5f);
    int8_t *q = act.q + t * j->K;
    int32_t s = 0;
    for (int64_t i = 0; i < j->K; i++) {
        float v = rintf(x[i] * d);
        v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
        q[i] = (int8_t)v;
        s += q[i];
    }
    act.d[t] = d;
    act.s[t] = s;
}

static void quant_task(void *ctx, int64_t t, int ith) {
    (void)ith;
    quant_job *j = (quant_job *)ctx;
    j->k->quant_act(j->x + t * j->K, j->K, act.q + t * j->K, act.d + t * (j->K / QK), act.s + t * (j->K / QK));
}

static void quant_k_task(void *ctx, int64_t t, int ith) {
    (void)ith;
    const quant_job *j = (const quant_job *)ctx;
    const int64_t K = j->K;
    pt_quant_act_k(j->x + t * K, K, actk.q + t * K, actk.d + t * (K / QK), actk.s + t * (K / QK), actk.h + t * (K / 16));
    if (j->q6) pt_q6_flags(actk.q + t * K, K, actk.f6 + t * (K / 256));
}

/* ---- matmul ---- */
#define MAX_MATS 3
#define PREFILL_TOKENS 40          /* tokens per chunk of a prefill: 5 of the x86 kernels' 8-token tiles */
#define AMX_PREFILL_TOKENS 48      /* with AMX on: 3 of its 16-token tiles */
#define PREFILL_BYTES (64 * 1024)  /* weight bytes per chunk of a prefill */
typedef struct {
    const pt_tensor *W[MAX_MATS];
    float *y[MAX_MATS];
    int64_t end[MAX_MATS];      /* cumulative chunk counts */
    int n;
    int64_t rows_per_chunk;
    int64_t tokens_per_chunk, token_chunks;   /* a prefill splits its tokens too (token_chunks per row range) */
    const float *x;
    pt_act a, ak;               /* the activations as quant_act makes them; as pt_quant_act_k (PT_KQ8's) */
    int64_t T;
    int accumulate;
    const pt_kernels *k;        /* the path, read once for the whole call */
} matmul_job;

static void matmul_task(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    matmul_job *j = (matmul_job *)ctx;
    int m = 0;
    while (chunk >= j->end[m]) m++;
    const pt_tensor *W = j->W[m];
    int64_t local = chunk - (m ? j->end[m - 1] : 0);
    int64_t r0 = local / j->token_chunks * j->rows_per_chunk, r1 = r0 + j->rows_per_chunk;
    if (r1 > W->rows) r1 = W->rows;
    /* the chunk's tokens: a token's result does not depend on the batch it is computed in, so any split gives the
     * bits of one call over all tokens */
    int64_t t0 = local % j->token_chunks * j->tokens_per_chunk, T = j->T - t0;
    if (T > j->tokens_per_chunk) T = j->tokens_per_chunk;
    const int64_t K = W->cols, nb = K / QK, rb = pt_row_bytes(W->dtype, K);
    float *y = j->y[m] + t0 * W->rows;
    const uint8_t *data = (const uint8_t *)W->data;
    const pt_act a = {j->a.q + t0 * K, j->a.d + t0 * nb, j->a.s + t0 * nb, K, NULL, NULL};
    if (W->dtype == PT_TQ2) {                   /* per-token activations: one scale and one sum a token */
        const pt_act at = {j->a.q + t0 * K, j->a.d + t0, j->a.s + t0, K, NULL, NULL};
        j->k->rows_tq2(data, rb, r0, r1, &at, T, y, W->rows, j->accumulate);
    } else if (W->dtype == PT_Q8_0 || W->dtype == PT_Q4_0) {
        (W->dtype == PT_Q8_0 ? j->k->rows_q8 : j->k->rows_q4)(data, rb, r0, r1, &a, T, y, W->rows, j->accumulate);
    } else if (W->dtype >= PT_GGUF && PT_KQ8(W->dtype - PT_GGUF)) {
        const pt_act ak = {j->ak.q + t0 * K, j->ak.d + t0 * nb, j->ak.s + t0 * nb, K, j->ak.h + t0 * (K / 16),
                           j->ak.f6 ? j->ak.f6 + t0 * (K / 256) : NULL};
        j->k->rows_gguf(W->dtype - PT_GGUF, data, rb, r0, r1, &ak, T, y, W->rows, j->accumulate);
    } else if (W->dtype >= PT_GGUF) {
        j->k->rows_gguf(W->dtype - PT_GGUF, data, rb, r0, r1, &a, T, y, W->rows, j->accumulate);
    } else if (W->dtype == PT_Q8_0_X8 || W->dtype == PT_Q4_0_X8) {
        /* whole groups of 8 (a chunk starts at a multiple of 8), then the plain rows after the last group */
        const int q8 = W->dtype == PT_Q8_0_X8;
        const int64_t groups_end = W->rows / 8 * 8, mid = r1 < groups_end ? r1 : groups_end;
        if (r0 < mid) (q8 ? j->k->rows_q8x8 : j->k->rows_q4x8)(data, r0, mid, &a, T, y, W->rows, j->accumulate);
        if (mid < r1)
            (q8 ? j->k->rows_q8 : j->k->rows_q4)(data, rb, r0 > mid ? r0 : mid, r1, &a, T, y, W->rows, j->accumulate);
    } else {
        j->k->rows_float(W->data, W->dtype, K, r0, r1, j->x + t0 * K, T, y, W->rows, j->accumulate);
    }
}

/* the product itself; the caller holds the lock (pt_plan_run holds it for a whole forward step) */
int pt_matmul_n_locked(const pt_tensor **W, float **y, int n, const float *x, int64_t T, int accumulate) {
    if (T <= 0) return 0;
    int quantized = 0, blocks = 0, supers = 0, q6 = 0;   /* q6: a Q6_K matrix, whose prefill tile reads f6 */
    for (int m = 0; m < n; m++) {
        if (!W[m] || !y[m] || W[m]->cols != W[0]->cols || W[m]->rows <= 0) return -1;
        if (pt_row_bytes(W[m]->dtype, W[m]->cols) < 0) return -1;
        /* ternary matrices take per-token activations: they share a call only with each other */
        if ((W[m]->dtype == PT_TQ2) != (W[0]->dtype == PT_TQ2)) return -1;
        quantized |= W[m]->dtype >= PT_Q8_0;     /* q8_0, q4_0, plain or interleaved */
        const int kq8 = W[m]->dtype >= PT_GGUF && PT_KQ8(W[m]->dtype - PT_GGUF);
        supers |= kq8;
        q6 |= W[m]->dtype == PT_GGUF + 14 && T > 1;
        blocks |= W[m]->dtype >= PT_Q8_0 && !kq8;
    }
    const int64_t K = W[0]->cols;
    matmul_job j = {.n = n, .x = x, .T = T, .accumulate = accumulate, .k = pt_active()};
    if (W[0]->dtype == PT_TQ2) {
        if (act_reserve(T * K) < 0) return -3;      /* its d and s hold more than T entries (K >= 32) */
        quant_job qj = {x, K, j.k, 0};
        pt_run_chunks(quant_token_task, &qj, T, (double)T * (double)K);
        j.a = (pt_act){act.q, act.d, act.s, K, NULL, NULL};
    } else if (quantized) {
        quant_job qj = {x, K, j.k, q6};
        if (blocks) {
            if (act_reserve(T * K) < 0) return -3;
            pt_run_chunks(quant_task, &qj, T, (double)T * (double)K);
            j.a = (pt_act){act.q, act.d, act.s, K, NULL, NULL};
        }
        if (supers) {
            if (buf_reserve(&actk, T * K) < 0) return -3;
            pt_run_chunks(quant_k_task, &qj, T, (double)T * (double)K);
            j.ak = (pt_act){actk.q, actk.d, actk.s, K, actk.h, q6 ? actk.f6 : NULL};
        }
    }
    /* chunks: small enough that 2-8 threads balance, big enough that a chunk streams a few KB at least; a job the
     * caller runs alone (one thread, or the pool measured slower on a busy machine) in chunks of up to 256 rows */
    int64_t total_rows = 0;
    for (int m = 0; m < n; m++) total_rows += W[m]->rows;
    int64_t target = pt_pool_alone() ? 1 : (int64_t)pt_pool_threads() * 16;
    int64_t rpc = total_rows / (target > 0 ? target : 1);
    /* multiples of 16: the x86 kernels take rows in groups of 8, AVX-512's interleaved one in pairs of groups (the
     * scalar kernel, same bits, takes what is left) */
    rpc = rpc < 16 ? 16 : (rpc > 256 ? 256 : rpc & ~(int64_t)15);
    if (T > 1 && rpc > 32) rpc = 32;
    j.tokens_per_chunk = T;
    j.token_chunks = 1;
    if (quantized && T >= 2 * PREFILL_TOKENS) {
        /* a prefill: chunks of PREFILL_TOKENS tokens x the rows of about PREFILL_BYTES of weights, which the
         * kernel's token tiles reuse from L2 while each tile's activations stay in L1 (AMX's tiles take 16 tokens:
         * 48 then) */
        const int64_t chunk_tokens = pt_amx_on() ? AMX_PREFILL_TOKENS : PREFILL_TOKENS;
        int64_t rb = pt_row_bytes(W[0]->dtype, K);
        rpc = PREFILL_BYTES / (rb > 0 ? rb : 1);
        /* at least 16 rows: the AVX-512 kernel takes interleaved groups in pairs (an odd one at half the speed) */
        rpc = rpc < 16 ? 16 : (rpc > 256 ? 256 : rpc & ~(int64_t)15);
        j.tokens_per_chunk = chunk_tokens;
        j.token_chunks = (T + chunk_tokens - 1) / chunk_tokens;
        int gguf = 0;
        for (int m = 0; m < n; m++) gguf |= W[m]->dtype >= PT_GGUF;
        if (gguf) {
            /* a GGUF block type's kernel unpacks 8 rows once per call: every token in one chunk, so the unpacking
             * is paid once per row, and the rows cut for balance, about 4 chunks per thread */
            const int64_t per = (int64_t)pt_pool_threads() * 4;
            rpc = total_rows / (per > 0 ? per : 1);
            rpc = rpc < 8 ? 8 : (rpc > 256 ? 256 : rpc & ~(int64_t)7);
            j.tokens_per_chunk = T;
            j.token_chunks = 1;
        }
    }
    const double work = (double)total_rows * (double)K * (double)T;
    if (work < PT_SERIAL_WORK) {
        /* run on the calling thread (pt_run_chunks): one chunk per matrix, not the pool's split, whose many small
         * calls cost the bundled model's 2-thread decode about 5 % (a token's bits do not depend on the split) */
        int64_t most = 8;
        for (int m = 0; m < n; m++) most = W[m]->rows > most ? W[m]->rows : most;
        rpc = (most + 7) & ~(int64_t)7;
        j.tokens_per_chunk = T;
        j.token_chunks = 1;
    }
    j.rows_per_chunk = rpc;
    int64_t chunks = 0;
    for (int m = 0; m < n; m++) {
        j.W[m] = W[m];
        j.y[m] = y[m];
        chunks += (W[m]->rows + rpc - 1) / rpc * j.token_chunks;
        j.end[m] = chunks;
    }
    pt_run_chunks(matmul_task, &j, chunks, work);
    return 0;
}

static int matmul_n(const pt_tensor **W, float **y, int n, const float *x, int64_t T, int accumulate) {
    pt_lock();
    int rc = pt_matmul_n_locked(W, y, n, x, T, accumulate);
    pt_unlock();
    return rc;
}

int pt_matmul(const pt_tensor *W, const float *x, int64_t T, float *y, int accumulate) {
    const pt_tensor *Ws[1] = {W};
    float *ys[1] = {y};
    return matmul_n(Ws, ys, 1, x, T, accumulate != 0);
}

int pt_matmul3(const pt_tensor *W0, const pt_tensor *W1, const pt_tensor *W2, const float *x, int64_t T,
               float *y0, float *y1, float *y2) {
    const pt_tensor *Ws[3] = {W0, W1, W2};
    float *ys[3] = {y0, y1, y2};
    return matmul_n(Ws, ys, W2 ? 3 : 2, x, T, 0);
}
