/* The two ops multi-head latent attention adds to a plan (DeepSeek-V2 / V3, petit/models/blocks/mla.py):
 *
 *   heads:  per head h, y[t][h] = W_h x[t][h] for the T tokens at once: each head's slice of its row (`x_stride`
 *           values a head, from `x_off`) gathered into one block, one matrix product per head, scattered back into
 *           y's rows (`y_stride` a head, at `y_off`). The absorbed W_uk_h^T on the query side, W_uv_h on the output.
 *   copy:   a strided copy of `width` values per (token, row) from x (at x_off of each x_stride) to y (at y_off of
 *           each y_stride): q_pe and k_pe into the front of the attention rows, the latent behind k_pe.
 *
 * Lock-free (the plan holds the lock); pt_heads takes it for a call from Python (the decoder's per-op oracle). */
#include "internal.h"

int pt_heads_locked(const pt_tensor **W, int64_t H, const float *x, int64_t x_stride, int64_t x_off, float *y,
                    int64_t y_stride, int64_t y_off, int64_t T, float *gin, float *gout) {
    if (H < 1 || T < 0) return -1;
    for (int64_t h = 0; h < H; h++) {
        const int64_t K = W[h]->cols, N = W[h]->rows;
        if (x_off + K > x_stride || y_off + N > y_stride) return -1;
        for (int64_t t = 0; t < T; t++)
            memcpy(gin + t * K, x + (t * H + h) * x_stride + x_off, (size_t)K * sizeof(float));
        const pt_tensor *Wh[1] = {W[h]};
        float *out[1] = {gout};
        int rc = pt_matmul_n_locked(Wh, out, 1, gin, T, 0);
        if (rc) return rc;
        for (int64_t t = 0; t < T; t++)
            memcpy(y + (t * H + h) * y_stride + y_off, gout + t * N, (size_t)N * sizeof(float));
    }
    return 0;
}

int pt_heads(const pt_tensor **W, int64_t H, const float *x, int64_t x_stride, int64_t x_off, float *y,
             int64_t y_stride, int64_t y_off, int64_t T, float *gin, float *gout) {
    pt_lock();
    int rc = pt_heads_locked(W, H, x, x_stride, x_off, y, y_stride, y_off, T, gin, gout);
    pt_unlock();
    return rc;
}

int pt_copy_rows(const float *x, int64_t x_stride, int64_t x_off, float *y, int64_t y_stride, int64_t y_off,
                 int64_t rows, int64_t width) {
    if (rows < 0 || width < 0 || x_off + width > x_stride || y_off + width > y_stride) return -1;
    for (int64_t i = 0; i < rows; i++)
        memcpy(y + i * y_stride + y_off, x + i * x_stride + x_off, (size_t)width * sizeof(float));
    return 0;
}
