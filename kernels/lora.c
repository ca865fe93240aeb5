/* issue 33 (LoRA fine-tuning): the transposed product of a frozen weight matrix, dx[t][c] = sum_r W[r][c] dy[t][r],
 * the backward of y = W x through the base weights as they are stored (f32, f16, bf16, q8_0, q4_0, their interleaved
 * layouts, and every GGUF block type Petit decodes): the base stays quantized while adapters train on it.
 *
 * Each task owns a range of the T rows of dx (so the sums are in one fixed order whatever the thread count) and walks
 * W in panels of LORA_PANEL rows, decoded once per panel into its thread's scratch; the active path's mt_panel
 * (kern_generic.h, compiled for each path's vectors and checked against the scalar one at start-up) then takes the
 * panel's rows times their dy values in register tiles. pt_matmul_t_ref is the plain scalar reference the
 * parity test holds it to (one row decoded at a time, the same order of additions; the SIMD clones may fuse a
 * multiply-add, so the two agree to float rounding, not bit for bit). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define LORA_PANEL 32

typedef struct {
    const pt_tensor *W;
    const float *dy;
    float *dx;
    int64_t T, per, rb;
    int accumulate;
} mt_job;

static int mt_args(const pt_tensor *W, const float *dy, int64_t T, float *dx) {
    return !W || !W->data || !dy || !dx || T < 0 || W->rows < 0 || W->cols < 1 || pt_row_bytes(W->dtype, W->cols) < 0;
}

/* rows t0..t1-1 of dx over the whole of W */
static void mt_rows(const mt_job *j, int64_t t0, int64_t t1, float *panel) {
    const int64_t R = j->W->rows, C = j->W->cols;
    if (!j->accumulate)
        memset(j->dx + t0 * C, 0, (size_t)((t1 - t0) * C) * sizeof(float));
    for (int64_t r0 = 0; r0 < R; r0 += LORA_PANEL) {
        const int64_t n = R - r0 < LORA_PANEL ? R - r0 : LORA_PANEL;
        for (int64_t p = 0; p < n; p++) pt_tensor_row(j->W, j->rb, r0 + p, panel + p * C);
        pt_active()->mt_panel(panel, n, C, j->dy + r0, R, j->dx, t0, t1);
    }
}

static void mt_task(void *ctx, int64_t chunk, int ith) {
    const mt_job *j = (const mt_job *)ctx;
    const int64_t t0 = chunk * j->per, t1 = t0 + j->per < j->T ? t0 + j->per : j->T;
    if (t0 < t1) mt_rows(j, t0, t1, pt_scratch(ith, LORA_PANEL * j->W->cols));
}

int pt_matmul_t(const pt_tensor *W, const float *dy, int64_t T, float *dx, int accumulate) {
    if (mt_args(W, dy, T, dx)) return -1;
    if (T == 0) return 0;
    mt_job j = {W, dy, dx, T, 0, pt_row_bytes(W->dtype, W->cols), accumulate != 0};
    pt_lock();
    const int threads = pt_pool_threads();
    for (int i = 0; i < threads; i++)
        if (!pt_scratch(i, LORA_PANEL * W->cols)) {
            pt_unlock();
            return -3;
        }
    /* a few T ranges a thread: each range decodes W once, so fewer, larger ranges read the weights less often */
    const int64_t chunks = T < 2 * (int64_t)threads ? T : 2 * (int64_t)threads;
    j.per = (T + chunks - 1) / chunks;
    pt_run_chunks(mt_task, &j, (T + j.per - 1) / j.per, (double)T * (double)W->rows * (double)W->cols);
    pt_unlock();
    return 0;
}

int pt_matmul_t_ref(const pt_tensor *W, const float *dy, int64_t T, float *dx, int accumulate) {
    if (mt_args(W, dy, T, dx)) return -1;
    const int64_t R = W->rows, C = W->cols, rb = pt_row_bytes(W->dtype, W->cols);
    float *row = (float *)malloc((size_t)C * sizeof(float));
    if (!row) return -3;
    if (!accumulate) memset(dx, 0, (size_t)(T * C) * sizeof(float));
    for (int64_t r = 0; r < R; r++) {
        pt_tensor_row(W, rb, r, row);
        for (int64_t t = 0; t < T; t++) {
            const float a = dy[t * R + r];
            if (a == 0.0f) continue;
            for (int64_t c = 0; c < C; c++) dx[t * C + c] += a * row[c];
        }
    }
    free(row);
    return 0;
}
