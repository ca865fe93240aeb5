/* Element-wise and normalisation ops that the model families beyond Llama need: LayerNorm and RMSNorm with optional
 * per-head weights and bias, bias + activation, gated activations. Plain C: they are a small share of a token's time
 * (the matrix products dominate), and each is its own reference, tested against NumPy. */
#include "internal.h"

/* y[r] = norm(x[r]) * w[r % w_rows] (+ b[r % w_rows]) for rows r < rows of D values; in place allowed.
 * kind 0: RMSNorm x / sqrt(mean(x^2) + eps); kind 1: LayerNorm (x - mean) / sqrt(var + eps). w, b may be NULL. */
int pt_norm(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
            int64_t w_rows, float *y) {
    if ((kind != 0 && kind != 1) || D <= 0 || w_rows <= 0) return -1;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * D, *wr = w ? w + (r % w_rows) * D : 0, *br = b ? b + (r % w_rows) * D : 0;
        float *yr = y + r * D, mean = 0.0f, ss = 0.0f;
        if (kind == 1) {
            for (int64_t i = 0; i < D; i++) mean += xr[i];
            mean /= (float)D;
        }
        for (int64_t i = 0; i < D; i++) ss += (xr[i] - mean) * (xr[i] - mean);
        const float inv = 1.0f / sqrtf(ss / (float)D + eps);
        for (int64_t i = 0; i < D; i++) {
            float v = (xr[i] - mean) * inv;
            if (wr) v *= wr[i];
            if (br) v += br[i];
            yr[i] = v;
        }
    }
    return 0;
}

static inline float act1(int act, float x) {
    switch (act) {
    case 1: return x / (1.0f + expf(-x));                                                    /* silu */
    case 2: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));  /* gelu tanh */
    case 3: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));                       /* gelu (erf) */
    case 4: return x > 0.0f ? x : 0.0f;                                                       /* relu */
    default: return x;
    }
}

/* y[t][i] = act(y[t][i] + b[i]) for t < T, i < N; b may be NULL. act: 0 none, 1 silu, 2 gelu_tanh, 3 gelu, 4 relu */
int pt_bias_act(float *y, const float *b, int64_t T, int64_t N, int act) {
    if (act < 0 || act > 4) return -1;
    for (int64_t t = 0; t < T; t++) {
        float *yt = y + t * N;
        for (int64_t i = 0; i < N; i++) yt[i] = act1(act, b ? yt[i] + b[i] : yt[i]);
    }
    return 0;
}

/* out[i] = act(gate[i]) * up[i] (SwiGLU with act 1, GeGLU with 2 or 3) */
int pt_glu(int act, const float *gate, const float *up, int64_t n, float *out) {
    if (act < 0 || act > 4) return -1;
    if (act == 1) { pt_active()->swiglu(gate, up, n, out); return 0; }
    for (int64_t i = 0; i < n; i++) out[i] = act1(act, gate[i]) * up[i];
    return 0;
}

/* y += a * x (a residual add with a multiplier, Granite) */
void pt_axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
