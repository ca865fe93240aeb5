/* The per-layer ops' entry points: LayerNorm and RMSNorm with optional per-head weights and bias, bias +
 * activation, gated activations. Each checks its arguments and runs the active path's kernel (kern_generic.h,
 * compiled for every path; the scalar path's copy is the reference the others are tested against). They run on the
 * calling thread: a norm or an activation is a small share of a token's time beside the matrix products. */
#include "internal.h"

int pt_norm(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
            int64_t w_rows, float *y) {
    if ((kind != 0 && kind != 1) || D <= 0 || w_rows <= 0) return -1;
    pt_active()->norm(kind, x, w, b, eps, rows, D, w_rows, y);
    return 0;
}

int pt_bias_act(float *y, const float *b, int64_t T, int64_t N, int act) {
    if (act < 0 || act > 4) return -1;
    pt_active()->bias_act(y, b, T, N, act);
    return 0;
}

int pt_glu(int act, const float *gate, const float *up, int64_t n, float *out) {
    if (act < 0 || act > 5) return -1;
    pt_active()->glu(act, gate, up, n, out);
    return 0;
}

/* y += a * x (a residual add with a multiplier, Granite): one line the compiler vectorises at any target */
void pt_axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
