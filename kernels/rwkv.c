/* RWKV-6 (Finch) blocks as llama.cpp runs them (its src/models/rwkv6.cpp, rwkv6-base.cpp), issue 30's recur group:
 * pt_mamba version 6, one call = one whole block (time mixing, then channel mixing, each on a LayerNorm of the
 * stream, both adds, and the halving of the stream when the block ends a rescale group) for one sequence's T tokens:
 *
 *   h = LN1(x);  sx = shift(h) - h               shift: the previous token's h (the conv state's row 0 at t = 0)
 *   xxx = tanh(w1 (h + sx maa_x))  [5][E]        the token-shift LoRA, then m_i = w2_i xxx_i  (i: w, k, v, r, g)
 *   x_i = h + sx (maa_i + m_i);  r, k, v = W_r x_r, W_k x_k, W_v x_v;  g = silu(W_g x_g)
 *   w = exp(-exp(decay + dec_w2 tanh(dec_w1 x_w)))
 *   per head (N = head size), S [N][N]:  y_j = sum_i r_i (u_i k_i v_j + S_ij);  S_ij = w_i S_ij + k_i v_j
 *   x1 = x + W_o ((GroupNorm_heads(y) lnx_w + lnx_b) g)                (the group norm without affine, eps gn_eps)
 *   h2 = LN2(x1);  sx = shift(h2) - h2;  xk = h2 + sx cm_k;  xr = h2 + sx cm_r
 *   x2 = x1 + sigmoid(C_r xr) (C_v relu(C_k xk)^2);  x2 / 2 when `halve`
 *
 * rwkv_scale multiplies both sublayers' outputs before their adds: 2^-(layer // rescale_every) for a Hugging Face
 * checkpoint (the remote code's inference rescaling; llama.cpp's converter divides W_o and C_v by it instead), 1 for
 * a GGUF file.
 *
 * The conv state is [2][D] (the last h and h2 of the previous call), the ssm state [H][N][N]. pt_wkv6_heads is the
 * WKV kernel (parallel over heads, the value index innermost so the compiler vectorises it); pt_wkv6_ref its plain
 * scalar reference, exposed with pt_wkv6 for the parity tests (tests/test_recur5.py). */
#include <stdlib.h>

#include "internal.h"

typedef struct {
    const float *r, *k, *v, *w, *u;
    int64_t T, H, N, ld;
    float *S, *y;
} wkv_job;

static void wkv6_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const wkv_job *j = (const wkv_job *)ctx;
    const int64_t N = j->N, c0 = h * N;
    float *S = j->S + h * N * N;
    const float *u = j->u + c0;
    for (int64_t t = 0; t < j->T; t++) {
        const float *r = j->r + t * j->ld + c0, *k = j->k + t * j->ld + c0, *v = j->v + t * j->ld + c0;
        const float *w = j->w + t * j->ld + c0;
        float *y = j->y + t * j->ld + c0;
        for (int64_t jj = 0; jj < N; jj++) y[jj] = 0.0f;
        for (int64_t i = 0; i < N; i++) {
            const float ri = r[i], ki = k[i], ui = u[i], wi = w[i];
            float *Si = S + i * N;
#pragma omp simd
            for (int64_t jj = 0; jj < N; jj++) {
                const float kv = ki * v[jj];
                y[jj] += ri * (ui * kv + Si[jj]);
                Si[jj] = Si[jj] * wi + kv;
            }
        }
    }
}

int pt_wkv6_heads(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T,
                  int64_t H, int64_t N, int64_t ld, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1 || ld < H * N) return -1;
    wkv_job j = {r, k, v, w, u, T, H, N, ld, S, y};
    pt_run_chunks(wkv6_head, &j, H, (double)T * (double)H * (double)N * (double)N * 3.0);
    return 0;
}

int pt_wkv6(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t H,
            int64_t N, float *S, float *y) {
    pt_lock();
    const int rc = pt_wkv6_heads(r, k, v, w, u, T, H, N, H * N, S, y);
    pt_unlock();
    return rc;
}

/* the plain scalar reference: token, head, value index, key index, in the order of the formula */
int pt_wkv6_ref(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T,
                int64_t H, int64_t N, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1) return -1;
    const int64_t D = H * N;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float *Sh = S + h * N * N;
            const int64_t c0 = t * D + h * N;
            for (int64_t jj = 0; jj < N; jj++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < N; i++)
                    acc += r[c0 + i] * (u[h * N + i] * k[c0 + i] * v[c0 + jj] + Sh[i * N + jj]);
                y[c0 + jj] = acc;
            }
            for (int64_t i = 0; i < N; i++)
                for (int64_t jj = 0; jj < N; jj++)
                    Sh[i * N + jj] = Sh[i * N + jj] * w[c0 + i] + k[c0 + i] * v[c0 + jj];
        }
    return 0;
}

static void layer_norm(const float *x, float *y, int64_t D, const float *w, const float *b, float eps) {
    float mean = 0.0f, var = 0.0f;
    for (int64_t d = 0; d < D; d++) mean += x[d];
    mean /= (float)D;
    for (int64_t d = 0; d < D; d++) var += (x[d] - mean) * (x[d] - mean);
    const float inv = 1.0f / sqrtf(var / (float)D + eps);
    for (int64_t d = 0; d < D; d++) {
        const float v = (x[d] - mean) * inv;
        y[d] = w ? v * w[d] + (b ? b[d] : 0.0f) : v;
    }
}

/* y [T][rows] = x [T][cols] M^T for a float matrix M [rows][cols] (the LoRAs: small, kept in float32) */
typedef struct {
    const float *M, *x;
    int64_t rows, cols, ldx, ldy;
    float *y;
    int tanh_out;
} small_job;

static void small_rows(void *ctx, int64_t t, int ith) {
    (void)ith;
    const small_job *j = (const small_job *)ctx;
    const float *x = j->x + t * j->ldx;
    float *y = j->y + t * j->ldy;
    for (int64_t r = 0; r < j->rows; r++) {
        const float *m = j->M + r * j->cols;
        float acc = 0.0f;
        for (int64_t c = 0; c < j->cols; c++) acc += m[c] * x[c];
        y[r] = j->tanh_out ? tanhf(acc) : acc;
    }
}

static void small_mm(const float *M, int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y, int64_t ldy,
                     int64_t T, int tanh_out) {
    small_job j = {M, x, rows, cols, ldx, ldy, y, tanh_out};
    pt_run_chunks(small_rows, &j, T, (double)T * (double)rows * (double)cols);
}

static int mm(const pt_tensor *W, const float *x, int64_t T, float *y) {
    const pt_tensor *Wt[1] = {W};
    float *yy[1] = {y};
    return pt_matmul_n_locked(Wt, yy, 1, x, T, 0);
}

int pt_rwkv6_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate) {
    const int64_t D = m->hidden, N = m->head_dim, H = m->n_heads, E = m->rwkv_e, DE = m->rwkv_de;
    const int64_t F = m->rwkv_f;
    if (T < 1 || T > m->cap || H * N != D || E < 1 || DE < 1 || F < 1 || !m->ws || !(m->rwkv_scale > 0.0f))
        return -1;
    for (int i = 0; i < 8; i++)
        if (!m->rwkv_w[i]) return -1;
    const pt_kernels *kern = pt_active();
    float *ws = m->ws;
    float *h = ws, *sx = h + T * D, *mix = sx + T * D;           /* mix: [5][T][D] (w, k, v, r, g) */
    float *rr = mix + 5 * T * D, *kk = rr + T * D, *vv = kk + T * D, *gg = vv + T * D, *ww = gg + T * D;
    float *yy = ww + T * D, *x1 = yy + T * D, *lora = x1 + T * D;    /* lora: [T][max(5E, DE)] */
    const int64_t LW = 5 * E > DE ? 5 * E : DE;
    float *ff = lora + T * LW;                                      /* ff: [T][F] */
    int rc;
    /* time mixing */
    for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, h + t * D, D, m->ln1_w, m->ln1_b, m->eps);
    for (int64_t t = 0; t < T; t++) {
        const float *prev = t ? h + (t - 1) * D : shift;
        for (int64_t d = 0; d < D; d++) sx[t * D + d] = prev[d] - h[t * D + d];
    }
    memcpy(shift, h + (T - 1) * D, (size_t)D * sizeof(float));
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++) yy[t * D + d] = h[t * D + d] + sx[t * D + d] * m->maa_x[d];
    small_mm(m->maa_w1, 5 * E, D, yy, D, lora, LW, T, 1);
    for (int64_t i = 0; i < 5; i++) {
        float *mi = mix + i * T * D;
        small_mm(m->maa_w2 + i * D * E, D, E, lora + i * E, LW, mi, D, T, 0);
        const float *lerp = m->maa + i * D;
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                mi[t * D + d] = h[t * D + d] + sx[t * D + d] * (mi[t * D + d] + lerp[d]);
    }
    if ((rc = mm(m->rwkv_w[0], mix + 3 * T * D, T, rr)) || (rc = mm(m->rwkv_w[1], mix + 1 * T * D, T, kk)) ||
        (rc = mm(m->rwkv_w[2], mix + 2 * T * D, T, vv)) || (rc = mm(m->rwkv_w[3], mix + 4 * T * D, T, gg)))
        return rc;
    kern->bias_act(gg, NULL, T, D, 1);                              /* silu */
    small_mm(m->dec_w1, DE, D, mix, D, lora, LW, T, 1);
    small_mm(m->dec_w2, D, DE, lora, LW, ww, D, T, 0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++) ww[t * D + d] = expf(-expf(ww[t * D + d] + m->decay[d]));
    if ((rc = pt_wkv6_heads(rr, kk, vv, ww, m->bonus, T, H, N, D, S, yy))) return rc;
    for (int64_t t = 0; t < T; t++)
        for (int64_t hh = 0; hh < H; hh++) {
            float *yh = yy + t * D + hh * N;
            layer_norm(yh, yh, N, NULL, NULL, m->gn_eps);
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++)
            yy[t * D + d] = (yy[t * D + d] * m->lnx_w[d] + m->lnx_b[d]) * gg[t * D + d];
    if ((rc = mm(m->rwkv_w[4], yy, T, x1))) return rc;
    for (int64_t t = 0; t < T * D; t++) x1[t] = x[t] + m->rwkv_scale * x1[t];
    /* channel mixing */
    for (int64_t t = 0; t < T; t++) layer_norm(x1 + t * D, h + t * D, D, m->ln2_w, m->ln2_b, m->eps);
    for (int64_t t = 0; t < T; t++) {
        const float *prev = t ? h + (t - 1) * D : shift + D;
        for (int64_t d = 0; d < D; d++) {
            const float s = prev[d] - h[t * D + d];
            mix[t * D + d] = h[t * D + d] + s * m->cm_k[d];
            sx[t * D + d] = h[t * D + d] + s * m->cm_r[d];
        }
    }
    memcpy(shift + D, h + (T - 1) * D, (size_t)D * sizeof(float));
    if ((rc = mm(m->rwkv_w[5], mix, T, ff)) || (rc = mm(m->rwkv_w[7], sx, T, rr))) return rc;
    for (int64_t i = 0; i < T * F; i++) ff[i] = ff[i] > 0.0f ? ff[i] * ff[i] : 0.0f;
    if ((rc = mm(m->rwkv_w[6], ff, T, kk))) return rc;
    const float half = m->rwkv_halve ? 0.5f : 1.0f;
    for (int64_t i = 0; i < T * D; i++) {
        const float x2 = (x1[i] + m->rwkv_scale * (kk[i] / (1.0f + expf(-rr[i])))) * half;
        if (!accumulate) out[i] = x2 - x[i];
        else if (out == x) out[i] = x2;
        else out[i] += x2 - x[i];
    }
    return 0;
}
