/* The per-layer ops' entry points: LayerNorm and RMSNorm with optional per-head weights and bias, bias +
 * activation, gated activations. Each checks its arguments and runs the active path's kernel (kern_generic.h,
 * compiled for every path; the scalar path's copy is the reference the others are tested against). They run on the
 * calling thread: a norm or an activation is a small share of a token's time beside the matrix products. */
#include "internal.h"

int pt_norm(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
            int64_t w_rows, float *y) {
    if (kind < 0 || kind > 3 || D <= 0 || w_rows <= 0) return -1;
    if (kind == 3) {            /* issue 36, fam36l: x w scaled down to an L2 norm of at most eps (Inkling 2's clips) */
        for (int64_t r = 0; r < rows; r++) {
            const float *wr = w ? w + (r % w_rows) * D : 0;
            float ss = 0.0f;
            for (int64_t i = 0; i < D; i++) {
                const float v = wr ? x[r * D + i] * wr[i] : x[r * D + i];
                y[r * D + i] = v;
                ss += v * v;
            }
            const float c = eps / (sqrtf(ss) + 1e-6f);
            if (c < 1.0f)
                for (int64_t i = 0; i < D; i++) y[r * D + i] *= c;
        }
        return 0;
    }
    if (kind == 2) {            /* issue 36, fam36g: no norm, (x + b) * w (ZAYA's residual scales), plain C */
        for (int64_t r = 0; r < rows; r++) {
            const float *wr = w ? w + (r % w_rows) * D : 0, *br = b ? b + (r % w_rows) * D : 0;
            for (int64_t i = 0; i < D; i++) {
                const float v = br ? x[r * D + i] + br[i] : x[r * D + i];
                y[r * D + i] = wr ? v * wr[i] : v;
            }
        }
        return 0;
    }
    pt_active()->norm(kind, x, w, b, eps, rows, D, w_rows, y);
    return 0;
}

int pt_bias_act(float *y, const float *b, int64_t T, int64_t N, int act) {
    if (act < 0 || act > 6 || act == 5) return -1;
    pt_active()->bias_act(y, b, T, N, act);
    return 0;
}

int pt_glu(int act, const float *gate, const float *up, int64_t n, float *out) {
    if (act < 0 || act > 7) return -1;
    pt_active()->glu(act, gate, up, n, out);
    return 0;
}

/* activations with parameters, in place, plain C on the calling thread (only a few families have them) */
int pt_param_act(int kind, float *y, int64_t n, const float *p) {
    switch (kind) {
    case 0:     /* clamp to [p0, p1] (OLMo's clip_qkv) */
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < p[0] ? p[0] : (y[i] > p[1] ? p[1] : y[i]);
        return 0;
    case 1:     /* xIELU (Apertus): p = alpha_p, alpha_n (both after their softplus), beta, eps */
        for (int64_t i = 0; i < n; i++) {
            const float x = y[i];
            y[i] = x > 0.0f ? p[0] * x * x + p[2] * x : (expm1f(x < p[3] ? x : p[3]) - x) * p[1] + p[2] * x;
        }
        return 0;
    case 2:     /* issue 36, fam36l: tanh (Inkling 2's loop message gates) */
        for (int64_t i = 0; i < n; i++) y[i] = tanhf(y[i]);
        return 0;
    default:
        return -1;
    }
}

/* y += a * x (a residual add with a multiplier, Granite): one line the compiler vectorises at any target */
void pt_axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
