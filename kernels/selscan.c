/* Mamba-1's selective scan (pt_mamba version 1: mamba, falcon_mamba, jamba) after kernels/ssm.c has run in_proj, the
 * conv, x_proj and dt_proj, and pt_selective_scan, the bare scan for the tests and bench/bench_scan.py. Per channel d
 * and state i: s <- e^{dt A[d][i]} s + dt u B_i, y = sum_i s C_i + D_d u, times silu(z) in the mixer.
 *
 * Two forms of the same recurrence, both the active path's (kern_scan.h), chosen per call: a token at a time
 * (sel_steps_g: decode and calls under SEL_CHUNKED_MIN tokens) or PT_SEL_CHUNK tokens at a time with the chunk's exps
 * in one vectorised pass (sel_chunk_g). They agree to float32 rounding, not to the bit (tests/test_scan.py).
 * pt_mamba.scan forces one (1 recurrent, 2 chunked; 0 chooses). Parallel over blocks of PT_SEL_BLOCK channels: a
 * channel's result does not depend on the split. Either form takes the tokens PT_SEL_CHUNK at a time, all blocks of
 * one span before the next: a block reads one cache line of each [T][di] row, and walking one block through all T
 * rows (6 KB apart in mamba-130m, no prefetcher follows) missed the cache on nearly every row; within a span the
 * next block's lines are the neighbours of the ones just read (1.7x at T = 512, bench/bench_scan.py). */
#include "internal.h"

/* auto: calls of at least this many tokens take the chunked form (bench/bench_scan.py --mixer mamba --T 1,2,3,4:
 * one thread, recurrent / chunked 0.78-1.07 at 1 token, 1.08-1.34 at 2, 1.36-1.49 at 3) */
#define SEL_CHUNKED_MIN 2

typedef struct {
    const float *A, *Dp, *dt, *u, *z, *B, *C;
    int64_t ld, ldz, ldbc, ldy, T, di, ds;
    int chunked;
    float *S, *y;
    int64_t t0, n;              /* the span of tokens the current job runs */
} sel_job;

/* channel block `blk` through all T tokens */
static void sel_block(void *ctx, int64_t blk, int ith) {
    const sel_job *j = (const sel_job *)ctx;
    const pt_kernels *kern = pt_active();
    const int64_t d0 = blk * PT_SEL_BLOCK, nd = j->di - d0 < PT_SEL_BLOCK ? j->di - d0 : PT_SEL_BLOCK, ds = j->ds;
    float *S = j->S + d0 * ds;
    const float *A = j->A + d0 * ds, *z = j->z ? j->z + d0 + j->t0 * j->ldz : 0;
    const float *dt = j->dt + j->t0 * j->ld + d0, *u = j->u + j->t0 * j->ld + d0;
    const float *B = j->B + j->t0 * j->ldbc, *C = j->C + j->t0 * j->ldbc;
    float *y = j->y + j->t0 * j->ldy + d0;
    if (j->chunked)
        kern->sel_chunk(S, A, j->Dp + d0, dt, u, j->ld, z, j->ldz, B, C, j->ldbc, j->n, nd, ds, y, j->ldy,
                        pt_scratch(ith, PT_SCAN_SEL_WORK(ds)));
    else
        kern->sel_steps(S, A, j->Dp + d0, dt, u, j->ld, z, j->ldz, B, C, j->ldbc, j->n, nd, ds, y, j->ldy);
}

/* the lock held */
static int sel_run(sel_job *j, int32_t mode) {
    j->chunked = mode == 2 || (mode == 0 && j->T >= SEL_CHUNKED_MIN);
    if (j->chunked)
        for (int i = 0; i < pt_pool_threads(); i++)
            if (!pt_scratch(i, PT_SCAN_SEL_WORK(j->ds))) return -3;
    for (j->t0 = 0; j->t0 < j->T; j->t0 += PT_SEL_CHUNK) {
        j->n = j->T - j->t0 < PT_SEL_CHUNK ? j->T - j->t0 : PT_SEL_CHUNK;
        pt_run_chunks(sel_block, j, (j->di + PT_SEL_BLOCK - 1) / PT_SEL_BLOCK,
                      (double)j->n * (double)j->di * (double)j->ds * 4.0);
    }
    return 0;
}

int pt_sel_channels(const pt_mamba *m, int64_t T, float *ssm_state) {
    /* H heads (Zamba; 1 elsewhere): head h's di / H channels read B and C from its own block of each dbc row */
    const int64_t H = m->n_heads > 1 ? m->n_heads : 1;
    const int64_t di = m->d_inner, ds = m->d_state, nb = m->dt_rank + 2 * ds, hd = di / H;
    for (int64_t h = 0; h < H; h++) {
        const int64_t c = h * hd;
        const float *B = m->dbc + h * nb + m->dt_rank;
        sel_job j = {m->A + c * ds, m->Dp + c, m->dt + c, m->u + c, m->xz + di + c, B, B + ds, di, 2 * di, H * nb,
                     di, T, hd, ds, 0, ssm_state + c * ds, m->y + c, 0, 0};
        const int rc = sel_run(&j, m->scan);
        if (rc) return rc;
    }
    return 0;
}

int pt_selective_scan(const float *u, const float *dt, const float *A, const float *B, const float *C,
                      const float *D, const float *z, int64_t T, int64_t di, int64_t ds, float *S, float *y,
                      int mode) {
    if (T < 1 || di < 1 || ds < 1 || mode < 0 || mode > 2) return -1;
    sel_job j = {A, D, dt, u, z, B, C, di, di, ds, di, T, di, ds, 0, S, y, 0, 0};
    pt_lock();
    const int rc = sel_run(&j, mode);
    pt_unlock();
    return rc;
}
