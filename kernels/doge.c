/* Issue 36, the fam36d group: SmallDoge's dynamic mask attention (transformers' `doge`) on the ordinary attention
 * kernel. Each kv head's key at position j carries a learned score bias dt_j = exp(A softplus(z_j)) (z: dt_proj of
 * the values), added to every query's score of that key. The family gives every head one more value than its
 * head_dim (`slot`, beyond the rotated ones): the key's slot holds dt_j and every query's slot 1 / scale, so
 * scale * (q . k) gains exactly dt_j; the values' and the output's slots stay 0.
 *
 * pt_doge_dt: z [T][n_kv] -> k [T][n_kv][hd] slot = exp(A[j] * softplus(z)) (torch's softplus: z above 20 is
 * itself), q [T][n_heads][hd] slot = q_value. pt_scale_cols: y [rows][width] *= w [width] (Doge's residual scales:
 * resid = w * resid + sublayer). -1 on a bad argument. Both are plain scalar loops: their own reference. */
#include "internal.h"

int pt_doge_dt(const float *z, const float *A, int64_t T, int64_t n_heads, int64_t n_kv, int64_t hd, int64_t slot,
               float q_value, float *q, float *k) {
    if (!z || !A || !q || !k || T < 0 || n_heads < 1 || n_kv < 1 || slot < 0 || slot >= hd) return -1;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < n_kv; j++) {
            const float x = z[t * n_kv + j];
            const float sp = x > 20.0f ? x : log1pf(expf(x));
            k[(t * n_kv + j) * hd + slot] = expf(A[j] * sp);
        }
        for (int64_t h = 0; h < n_heads; h++) q[(t * n_heads + h) * hd + slot] = q_value;
    }
    return 0;
}

int pt_scale_cols(float *y, const float *w, int64_t rows, int64_t width) {
    if (!y || !w || rows < 0 || width < 1) return -1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < width; i++) y[r * width + i] *= w[i];
    return 0;
}
