/* Mamba-2's SSD scan (pt_mamba version 2) in its chunked form for prompts, and the bare scan for the tests and
 * bench/bench_scan.py. Per head h (group g = h / (H / G)): S <- e^{dt A_h} S + dt x B^T (S [P][N]), y = S C + D_h x.
 * kernels/ssm.c keeps the recurrent form (kern_scan.h's ssd_steps_g, the active path's), a token at a time, for
 * decode and calls under SSD_CHUNKED_MIN tokens; over
 * a prompt each chunk of PT_SCAN_CHUNK tokens is a few small matrix products (kern_scan.h's ssd_chunk_g). The two
 * forms agree to float32 rounding, not to the bit (tests/test_scan.py). Parallel over heads. */
#include "internal.h"

/* auto: calls of at least this many tokens take the chunked form (bench/bench_scan.py) */
#define SSD_CHUNKED_MIN 8

int pt_ssd_chunked(int32_t mode, int64_t T) { return mode == 2 || (mode == 0 && T >= SSD_CHUNKED_MIN); }

typedef struct {
    const float *x, *B, *C, *dt, *A;
    int64_t ldx, ldbc, lddt, ldy, T, H, G, P, N;
    float *S, *y;
} ssd_scan_job;

/* head h through all T tokens, PT_SCAN_CHUNK at a time */
static void ssd_head_chunked(void *ctx, int64_t h, int ith) {
    const ssd_scan_job *j = (const ssd_scan_job *)ctx;
    const pt_kernels *kern = pt_active();
    const int64_t P = j->P, N = j->N, g = h / (j->H / j->G);
    float *dt = pt_scratch(ith, PT_SCAN_CHUNK + PT_SCAN_SSD_WORK(P, N)), *work = dt + PT_SCAN_CHUNK;
    for (int64_t t0 = 0; t0 < j->T; t0 += PT_SCAN_CHUNK) {
        const int64_t n = j->T - t0 < PT_SCAN_CHUNK ? j->T - t0 : PT_SCAN_CHUNK;
        for (int64_t t = 0; t < n; t++) dt[t] = j->dt[(t0 + t) * j->lddt + h];
        kern->ssd_chunk(j->S + h * P * N, j->x + t0 * j->ldx + h * P, j->ldx, j->B + t0 * j->ldbc + g * N,
                        j->C + t0 * j->ldbc + g * N, j->ldbc, dt, j->A[h], n, P, N, j->y + t0 * j->ldy + h * P,
                        j->ldy, work);
    }
}

/* the heads over rows at strides (x ldx, B and C ldbc, dt lddt, y ldy), y without D x; the lock held */
static int ssd_run_chunked(ssd_scan_job *j) {
    for (int i = 0; i < pt_pool_threads(); i++)
        if (!pt_scratch(i, PT_SCAN_CHUNK + PT_SCAN_SSD_WORK(j->P, j->N))) return -3;
    pt_run_chunks(ssd_head_chunked, j, j->H, (double)j->T * (double)j->H * (double)j->P * (double)j->N * 4.0);
    return 0;
}

int pt_ssd_heads(const pt_mamba *m, int64_t T, int64_t cw, float *ssm_state) {
    const int64_t H = m->n_heads, P = m->head_dim, N = m->d_state, G = m->n_groups, di = m->d_inner;
    ssd_scan_job j = {m->u, m->u + di, m->u + di + G * N, m->dt, m->A, cw, cw, H, di, T, H, G, P, N, ssm_state,
                      m->y};
    int rc = ssd_run_chunked(&j);
    if (rc) return rc;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t p = 0; p < P; p++) m->y[t * di + h * P + p] += m->Dp[h] * m->u[t * cw + h * P + p];
    return 0;
}

/* one head a token at a time (the active path's ssd_steps_g, as kernels/ssm.c runs decode) */
static void ssd_head_recurrent(void *ctx, int64_t h, int ith) {
    (void)ith;
    const ssd_scan_job *j = (const ssd_scan_job *)ctx;
    const int64_t P = j->P, N = j->N, g = h / (j->H / j->G);
    pt_active()->ssd_steps(j->S + h * P * N, j->x + h * P, j->ldx, j->B + g * N, j->C + g * N, j->ldbc, j->dt + h,
                           j->lddt, j->A[h], j->T, P, N, j->y + h * P, j->ldy);
}

int pt_ssd_scan(const float *x, const float *B, const float *C, const float *dt, const float *A, int64_t T,
                int64_t H, int64_t G, int64_t P, int64_t N, float *S, float *y, int mode) {
    if (T < 1 || H < 1 || G < 1 || H % G || P < 1 || N < 1 || mode < 0 || mode > 2) return -1;
    ssd_scan_job j = {x, B, C + 0, dt, A, H * P, G * N, H, H * P, T, H, G, P, N, S, y};
    int rc = 0;
    pt_lock();
    if (pt_ssd_chunked(mode, T))
        rc = ssd_run_chunked(&j);
    else
        pt_run_chunks(ssd_head_recurrent, &j, H, (double)T * (double)H * (double)P * (double)N * 4.0);
    pt_unlock();
    return rc;
}
