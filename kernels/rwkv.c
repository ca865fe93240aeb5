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

/* ---- gated linear attention (QRWKV's time mixing, issue 30's ggufx group): per head S [N][N] (key x value),
 * S_ij = S_ij w_i + k_i v_j, then y_j = scale sum_i r_i S_ij (the state after the token, no bonus) ---- */
typedef struct {
    const float *r, *k, *v, *w;
    float scale;
    int64_t T, H, N, ld;
    float *S, *y;
} gla_job;

static void gla_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const gla_job *j = (const gla_job *)ctx;
    const int64_t N = j->N, c0 = h * N;
    float *S = j->S + h * N * N;
    for (int64_t t = 0; t < j->T; t++) {
        const int64_t o = t * j->ld + c0;
        const float *r = j->r + o, *k = j->k + o, *v = j->v + o, *w = j->w + o;
        float *y = j->y + o;
        for (int64_t jj = 0; jj < N; jj++) y[jj] = 0.0f;
        for (int64_t i = 0; i < N; i++) {
            const float ri = r[i], ki = k[i], wi = w[i];
            float *Si = S + i * N;
#pragma omp simd
            for (int64_t jj = 0; jj < N; jj++) {
                const float s = Si[jj] * wi + ki * v[jj];
                Si[jj] = s;
                y[jj] += ri * s;
            }
        }
        for (int64_t jj = 0; jj < N; jj++) y[jj] *= j->scale;
    }
}

int pt_gla_heads(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
                 int64_t N, int64_t ld, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1 || ld < H * N) return -1;
    gla_job j = {r, k, v, w, scale, T, H, N, ld, S, y};
    pt_run_chunks(gla_head, &j, H, (double)T * (double)H * (double)N * (double)N * 3.0);
    return 0;
}

int pt_gla(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
           int64_t N, float *S, float *y) {
    pt_lock();
    const int rc = pt_gla_heads(r, k, v, w, scale, T, H, N, H * N, S, y);
    pt_unlock();
    return rc;
}

/* the plain scalar reference: token, head, the state's update, then each value index's sum over the keys */
int pt_gla_ref(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
               int64_t N, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1) return -1;
    const int64_t D = H * N;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float *Sh = S + h * N * N;
            const int64_t c0 = t * D + h * N;
            for (int64_t i = 0; i < N; i++)
                for (int64_t jj = 0; jj < N; jj++)
                    Sh[i * N + jj] = Sh[i * N + jj] * w[c0 + i] + k[c0 + i] * v[c0 + jj];
            for (int64_t jj = 0; jj < N; jj++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < N; i++) acc += r[c0 + i] * Sh[i * N + jj];
                y[c0 + jj] = acc * scale;
            }
        }
    return 0;
}

/* the mix-only blocks' end (rwkv6qwen2, arwkv7): W_o's output d [T][D] is the block's, written or added */
static void mix_out(const float *d, int64_t n, float *out, int accumulate) {
    for (int64_t i = 0; i < n; i++) out[i] = accumulate ? out[i] + d[i] : d[i];
}

/* k or v of Hk heads [T][Hk N] (src) repeated into [T][H N] (dst): head h reads kv head h / (H / Hk) */
static void kv_repeat(const float *src, float *dst, int64_t T, int64_t H, int64_t Hk, int64_t N) {
    const int64_t rep = H / Hk;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            memcpy(dst + (t * H + h) * N, src + (t * Hk + h / rep) * N, (size_t)N * sizeof(float));
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
    if (T < 1 || T > m->cap || H * N != D || E < 1 || DE < 1 || (F < 1 && !m->rwkv_mix_only) || !m->ws ||
        !(m->rwkv_scale > 0.0f))
        return -1;
    for (int i = 0; i < (m->rwkv_mix_only ? 5 : 8); i++)
        if (!m->rwkv_w[i]) return -1;
    const pt_kernels *kern = pt_active();
    float *ws = m->ws;
    float *h = ws, *sx = h + T * D, *mix = sx + T * D;           /* mix: [5][T][D] (w, k, v, r, g) */
    float *rr = mix + 5 * T * D, *kk = rr + T * D, *vv = kk + T * D, *gg = vv + T * D, *ww = gg + T * D;
    float *yy = ww + T * D, *x1 = yy + T * D, *lora = x1 + T * D;    /* lora: [T][max(5E, DE)] */
    const int64_t LW = 5 * E > DE ? 5 * E : DE;
    float *ff = lora + T * LW;                                      /* ff: [T][F] */
    int rc;
    const int64_t Hk = m->rwkv_gla && m->rwkv_kv_heads > 0 ? m->rwkv_kv_heads : H;
    if (m->rwkv_gla && (H % Hk || !m->rwkv_mix_only)) return -1;
    /* time mixing */
    if (m->rwkv_mix_only) memcpy(h, x, (size_t)(T * D) * sizeof(float));     /* the layer's RMSNorm ran */
    else for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, h + t * D, D, m->ln1_w, m->ln1_b, m->eps);
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
    if (m->rwkv_gla) {                      /* QRWKV: k / v of Hk heads (into scratch), biases, sigmoid gate */
        if ((rc = mm(m->rwkv_w[0], mix + 3 * T * D, T, rr)) || (rc = mm(m->rwkv_w[1], mix + 1 * T * D, T, yy)) ||
            (rc = mm(m->rwkv_w[2], mix + 2 * T * D, T, x1)) || (rc = mm(m->rwkv_w[3], mix + 4 * T * D, T, gg)))
            return rc;
        const float *bias[3] = {m->rwkv_rb, m->rwkv_kb, m->rwkv_vb};
        float *dst[3] = {rr, yy, x1};
        for (int b = 0; b < 3; b++) {
            const int64_t width = b ? Hk * N : D;
            if (bias[b])
                for (int64_t t = 0; t < T; t++)
                    for (int64_t d = 0; d < width; d++) dst[b][t * width + d] += bias[b][d];
        }
        kv_repeat(yy, kk, T, H, Hk, N);
        kv_repeat(x1, vv, T, H, Hk, N);
        for (int64_t i = 0; i < T * D; i++) gg[i] = 1.0f / (1.0f + expf(-gg[i]));
    } else {
        if ((rc = mm(m->rwkv_w[0], mix + 3 * T * D, T, rr)) || (rc = mm(m->rwkv_w[1], mix + 1 * T * D, T, kk)) ||
            (rc = mm(m->rwkv_w[2], mix + 2 * T * D, T, vv)) || (rc = mm(m->rwkv_w[3], mix + 4 * T * D, T, gg)))
            return rc;
        kern->bias_act(gg, NULL, T, D, 1);                          /* silu */
    }
    small_mm(m->dec_w1, DE, D, mix, D, lora, LW, T, 1);
    small_mm(m->dec_w2, D, DE, lora, LW, ww, D, T, 0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++) ww[t * D + d] = expf(-expf(ww[t * D + d] + m->decay[d]));
    if (m->rwkv_gla) {                      /* k (1 - w), as llama.cpp computes it: k - k w */
        for (int64_t i = 0; i < T * D; i++) kk[i] = kk[i] - kk[i] * ww[i];
        if ((rc = pt_gla_heads(rr, kk, vv, ww, (float)pow((double)N, -0.5), T, H, N, D, S, yy))) return rc;
        for (int64_t i = 0; i < T * D; i++) yy[i] *= gg[i];
        if ((rc = mm(m->rwkv_w[4], yy, T, x1))) return rc;
        mix_out(x1, T * D, out, accumulate);
        return 0;
    }
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

/* ---- RWKV-7 (Goose), llama.cpp's src/models/rwkv7.cpp and rwkv7-base.cpp: pt_mamba version 7 ----
 *
 *   h = LN1(x); sx = shift(h) - h; x_i = h + sx maa_i  (i: r, w, k, v, a, g)
 *   r, k, v = W_r x_r, W_k x_k, W_v x_v;  w = exp(-e^-1/2 sigmoid(w0 + w2 tanh(w1 x_w)))
 *   layer 0 keeps v as v_first; later layers: v += (v_first - v) sigmoid(v0 + v2 v1 x_v)
 *   g = g2 sigmoid(g1 x_g);  a = sigmoid(a0 + a2 a1 x_a);  kk = l2norm_heads(k k_k);  k = k (1 + (a - 1) k_a)
 *   per head, S [N][N] (value i, key j): S_ij = S_ij w_j + v_i k_j + (sum_l -kk_l S_il) kk_j a_j;  y_i = sum_j S_ij r_j
 *   y = GroupNorm_heads(y) lnx_w + lnx_b + v sum_head(r k r_k);  x1 = x + W_o (y g)
 *   h2 = LN2(x1); xk = h2 + (shift(h2) - h2) cm_k;  x2 = x1 + C_v relu(C_k xk)^2
 *
 * v_first is one step's rows of layer 0's values, shared by the layers through `vfirst` (the scratch of every
 * version-7 mixer of the same sizes): a sequence's rows are found by its x's offset from the first sequence's (the
 * step's rows stack the sequences; layer 0 records the base). */
typedef struct {
    const float *r, *w, *k, *v, *a, *b;
    int64_t T, H, N, ld;
    float *S, *y;
} wkv7_job;

static void wkv7_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const wkv7_job *j = (const wkv7_job *)ctx;
    const int64_t N = j->N, c0 = h * N;
    float *S = j->S + h * N * N;
    for (int64_t t = 0; t < j->T; t++) {
        const int64_t o = t * j->ld + c0;
        const float *r = j->r + o, *w = j->w + o, *k = j->k + o, *v = j->v + o, *a = j->a + o, *b = j->b + o;
        float *y = j->y + o;
        for (int64_t i = 0; i < N; i++) {
            float *Si = S + i * N;
            float sa = 0.0f, acc = 0.0f;
            for (int64_t jj = 0; jj < N; jj++) sa += a[jj] * Si[jj];
            const float vi = v[i];
#pragma omp simd reduction(+:acc)
            for (int64_t jj = 0; jj < N; jj++) {
                const float s = Si[jj] * w[jj] + vi * k[jj] + sa * b[jj];
                Si[jj] = s;
                acc += s * r[jj];
            }
            y[i] = acc;
        }
    }
}

int pt_wkv7_heads(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b,
                  int64_t T, int64_t H, int64_t N, int64_t ld, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1 || ld < H * N) return -1;
    wkv7_job j = {r, w, k, v, a, b, T, H, N, ld, S, y};
    pt_run_chunks(wkv7_head, &j, H, (double)T * (double)H * (double)N * (double)N * 4.0);
    return 0;
}

int pt_wkv7(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b, int64_t T,
            int64_t H, int64_t N, float *S, float *y) {
    pt_lock();
    const int rc = pt_wkv7_heads(r, w, k, v, a, b, T, H, N, H * N, S, y);
    pt_unlock();
    return rc;
}

/* the plain scalar reference, in the order of the formula */
int pt_wkv7_ref(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b,
                int64_t T, int64_t H, int64_t N, float *S, float *y) {
    if (T < 1 || H < 1 || N < 1) return -1;
    const int64_t D = H * N;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t c0 = t * D + h * N;
            float *Sh = S + h * N * N;
            for (int64_t i = 0; i < N; i++) {
                float sa = 0.0f;
                for (int64_t jj = 0; jj < N; jj++) sa += a[c0 + jj] * Sh[i * N + jj];
                float acc = 0.0f;
                for (int64_t jj = 0; jj < N; jj++) {
                    Sh[i * N + jj] = Sh[i * N + jj] * w[c0 + jj] + v[c0 + i] * k[c0 + jj] + sa * b[c0 + jj];
                    acc += Sh[i * N + jj] * r[c0 + jj];
                }
                y[c0 + i] = acc;
            }
        }
    return 0;
}

/* y [T][rows] = act(x M^T + bias): act 0 none, 1 tanh, 2 sigmoid */
static void lora_mm(const float *M, int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y, int64_t ldy,
                    int64_t T, int act, const float *bias) {
    small_mm(M, rows, cols, x, ldx, y, ldy, T, act == 1);
    if (act == 2 || bias)
        for (int64_t t = 0; t < T; t++)
            for (int64_t r = 0; r < rows; r++) {
                float v = y[t * ldy + r] + (bias ? bias[r] : 0.0f);
                y[t * ldy + r] = act == 2 ? 1.0f / (1.0f + expf(-v)) : v;
            }
}

int pt_rwkv7_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate) {
    const int64_t D = m->hidden, N = m->head_dim, H = m->n_heads, F = m->rwkv_f, cap = m->cap;
    const int64_t Rw = m->r7_rank[0], Ra = m->r7_rank[1], Rv = m->r7_rank[2], Rg = m->r7_rank[3];
    if (T < 1 || T > cap || H * N != D || F < 1 || !m->ws || !m->vfirst || Rw < 1 || Ra < 1 || Rg < 1 ||
        (!m->rwkv_first && Rv < 1))
        return -1;
    for (int i = 0; i < 6; i++)
        if (!m->rwkv_w[i]) return -1;
    /* this sequence's rows of v_first */
    uintptr_t base;
    memcpy(&base, m->vfirst, sizeof base);
    const uintptr_t px = (uintptr_t)x;
    if (m->rwkv_first && (base == 0 || px <= base || (px - base) / sizeof(float) / (uintptr_t)D + T > (uintptr_t)cap)) {
        base = px;
        memcpy(m->vfirst, &base, sizeof base);
    }
    if (base == 0 || px < base || (px - base) % (sizeof(float) * (uintptr_t)D)) return -1;
    const int64_t row0 = (int64_t)((px - base) / sizeof(float) / (uintptr_t)D);
    if (row0 + T > cap) return -1;
    float *vf = m->vfirst + 16 + row0 * D;
    const pt_kernels *kern = pt_active();
    float *h = m->ws, *sx = h + T * D, *mix = sx + T * D;            /* mix: [6][T][D] (r, w, k, v, a, g) */
    float *rr = mix + 6 * T * D, *kk = rr + T * D, *vv = kk + T * D, *ww = vv + T * D, *gg = ww + T * D;
    float *aa = gg + T * D, *kn = aa + T * D, *yy = kn + T * D, *x1 = yy + T * D, *lora = x1 + T * D;
    const int64_t LW = 16 + (Rw > Ra ? Rw : Ra) + (Rv > Rg ? Rv : Rg);
    float *ff = lora + T * LW;
    int rc;
    for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, h + t * D, D, m->ln1_w, m->ln1_b, m->eps);
    for (int64_t t = 0; t < T; t++) {
        const float *prev = t ? h + (t - 1) * D : shift;
        for (int64_t d = 0; d < D; d++) sx[t * D + d] = prev[d] - h[t * D + d];
    }
    memcpy(shift, h + (T - 1) * D, (size_t)D * sizeof(float));
    for (int64_t i = 0; i < 6; i++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                mix[(i * T + t) * D + d] = h[t * D + d] + sx[t * D + d] * m->maa[i * D + d];
    if ((rc = mm(m->rwkv_w[0], mix, T, rr)) || (rc = mm(m->rwkv_w[1], mix + 2 * T * D, T, kk)) ||
        (rc = mm(m->rwkv_w[2], mix + 3 * T * D, T, vv)))
        return rc;
    lora_mm(m->r7_w1, Rw, D, mix + T * D, D, lora, LW, T, 1, NULL);
    lora_mm(m->r7_w2, D, Rw, lora, LW, ww, D, T, 2, m->r7_w0);
    for (int64_t i = 0; i < T * D; i++) ww[i] = expf(-0.606531f * ww[i]);
    if (m->rwkv_first) {
        memcpy(vf, vv, (size_t)(T * D) * sizeof(float));
    } else {
        lora_mm(m->r7_v1, Rv, D, mix + 3 * T * D, D, lora, LW, T, 0, NULL);
        lora_mm(m->r7_v2, D, Rv, lora, LW, yy, D, T, 2, m->r7_v0);
        for (int64_t i = 0; i < T * D; i++) vv[i] += (vf[i] - vv[i]) * yy[i];
    }
    lora_mm(m->r7_g1, Rg, D, mix + 5 * T * D, D, lora, LW, T, 2, NULL);
    lora_mm(m->r7_g2, D, Rg, lora, LW, gg, D, T, 0, NULL);
    lora_mm(m->r7_a1, Ra, D, mix + 4 * T * D, D, lora, LW, T, 0, NULL);
    lora_mm(m->r7_a2, D, Ra, lora, LW, aa, D, T, 2, m->r7_a0);
    for (int64_t t = 0; t < T; t++)
        for (int64_t hh = 0; hh < H; hh++) {
            const int64_t c0 = t * D + hh * N;
            float ss = 0.0f;
            for (int64_t n = 0; n < N; n++) {
                kn[c0 + n] = kk[c0 + n] * m->r7_kk[hh * N + n];
                ss += kn[c0 + n] * kn[c0 + n];
            }
            float nrm = sqrtf(ss);
            const float inv = 1.0f / (nrm > 1e-12f ? nrm : 1e-12f);
            for (int64_t n = 0; n < N; n++) kn[c0 + n] *= inv;
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < D; d++) {
            const int64_t i = t * D + d;
            const float ka = kk[i] * m->r7_ka[d];
            kk[i] = kk[i] + (aa[i] * ka - ka);
            mix[i] = -kn[i];                         /* the state's a (mix's r rows are spent) */
            mix[T * D + i] = kn[i] * aa[i];          /* and b (the w rows) */
        }
    if ((rc = pt_wkv7_heads(rr, ww, kk, vv, mix, mix + T * D, T, H, N, D, S, yy))) return rc;
    for (int64_t t = 0; t < T; t++)
        for (int64_t hh = 0; hh < H; hh++) {
            const int64_t c0 = t * D + hh * N;
            layer_norm(yy + c0, yy + c0, N, NULL, NULL, m->gn_eps);
            float rk = 0.0f;
            for (int64_t n = 0; n < N; n++) rk += rr[c0 + n] * kk[c0 + n] * m->r7_rk[hh * N + n];
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = c0 + n, d = hh * N + n;
                yy[i] = (yy[i] * m->lnx_w[d] + m->lnx_b[d] + vv[i] * rk) * gg[i];
            }
        }
    if ((rc = mm(m->rwkv_w[3], yy, T, x1))) return rc;
    for (int64_t i = 0; i < T * D; i++) x1[i] += x[i];
    for (int64_t t = 0; t < T; t++) layer_norm(x1 + t * D, h + t * D, D, m->ln2_w, m->ln2_b, m->eps);
    for (int64_t t = 0; t < T; t++) {
        const float *prev = t ? h + (t - 1) * D : shift + D;
        for (int64_t d = 0; d < D; d++) mix[t * D + d] = h[t * D + d] + (prev[d] - h[t * D + d]) * m->cm_k[d];
    }
    memcpy(shift + D, h + (T - 1) * D, (size_t)D * sizeof(float));
    if ((rc = mm(m->rwkv_w[4], mix, T, ff))) return rc;
    for (int64_t i = 0; i < T * F; i++) ff[i] = ff[i] > 0.0f ? ff[i] * ff[i] : 0.0f;
    if ((rc = mm(m->rwkv_w[5], ff, T, kk))) return rc;
    for (int64_t i = 0; i < T * D; i++) {
        const float x2 = x1[i] + kk[i];
        if (!accumulate) out[i] = x2 - x[i];
        else if (out == x) out[i] = x2;
        else out[i] += x2 - x[i];
    }
    (void)kern;
    return 0;
}

/* ---- RWKV-4, transformers' RwkvModel (modeling_rwkv.py): pt_mamba version 8 ----
 *
 *   h = LN1(x); sx = shift(h) - h; x_i = h + sx maa_i (maa = 1 - time_mix_i: transformers mixes h mix + shift (1 - mix))
 *   k = W_k x_k, v = W_v x_v, r = sigmoid(W_r x_r)
 *   per channel, the WKV-4 recurrence in transformers' running-maximum form (num, den, max; w = -exp(time_decay),
 *   u = time_first): o = max(mx, k + u), y = (e^(mx - o) num + e^(k + u - o) v) / (e^(mx - o) den + e^(k + u - o));
 *   m' = max(mx + w, k), num = e^(mx + w - m') num + e^(k - m') v, den alike, mx = m'
 *   x1 = x + scale W_o (r y); channel mixing as RWKV-6's; x2 / 2 when `halve`
 *
 * A fresh state is zeros (transformers starts max at -1e38): with num = den = 0 the first output is v and the state
 * holds the same num / den ratios, so only the representation differs. The conv state is [2][D], the ssm state
 * [3][D] (num, den, max). pt_wkv4 is the kernel, pt_wkv4_ref its plain scalar reference. */
typedef struct {
    const float *k, *v, *w, *u;
    int64_t T, D;
    float *S, *y;
} wkv4_job;

static inline float wkv4_step(float *num, float *den, float *mx, float k, float v, float w, float u) {
    const float o = *mx > k + u ? *mx : k + u;
    const float a = expf(*mx - o), b = expf(k + u - o);
    const float y = (a * *num + b * v) / (a * *den + b);
    const float ms = *mx + w > k ? *mx + w : k;
    const float c = expf(*mx + w - ms), d = expf(k - ms);
    *num = c * *num + d * v;
    *den = c * *den + d;
    *mx = ms;
    return y;
}

#define WKV4_CHANNELS 16
static void wkv4_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const wkv4_job *j = (const wkv4_job *)ctx;
    const int64_t D = j->D, c0 = chunk * WKV4_CHANNELS, c1 = c0 + WKV4_CHANNELS < D ? c0 + WKV4_CHANNELS : D;
    for (int64_t c = c0; c < c1; c++) {
        float num = j->S[c], den = j->S[D + c], mx = j->S[2 * D + c];
        const float w = -expf(j->w[c]), u = j->u[c];
        for (int64_t t = 0; t < j->T; t++)
            j->y[t * D + c] = wkv4_step(&num, &den, &mx, j->k[t * D + c], j->v[t * D + c], w, u);
        j->S[c] = num;
        j->S[D + c] = den;
        j->S[2 * D + c] = mx;
    }
}

static int wkv4_locked(const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t D, float *S,
                       float *y) {
    if (T < 1 || D < 1) return -1;
    wkv4_job j = {k, v, w, u, T, D, S, y};
    pt_run_chunks(wkv4_chunk, &j, (D + WKV4_CHANNELS - 1) / WKV4_CHANNELS, (double)T * (double)D * 16.0);
    return 0;
}

int pt_wkv4(const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t D, float *S,
            float *y) {
    pt_lock();
    const int rc = wkv4_locked(k, v, w, u, T, D, S, y);
    pt_unlock();
    return rc;
}

/* the plain scalar reference: token by token, channel by channel */
int pt_wkv4_ref(const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t D, float *S,
                float *y) {
    if (T < 1 || D < 1) return -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < D; c++)
            y[t * D + c] = wkv4_step(S + c, S + D + c, S + 2 * D + c, k[t * D + c], v[t * D + c], -expf(w[c]), u[c]);
    return 0;
}

int pt_rwkv4_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate) {
    const int64_t D = m->hidden, F = m->rwkv_f;
    if (T < 1 || T > m->cap || F < 1 || !m->ws || !(m->rwkv_scale > 0.0f)) return -1;
    for (int i = 0; i < 7; i++)
        if (!m->rwkv_w[i]) return -1;
    float *h = m->ws, *sx = h + T * D, *mix = sx + T * D;          /* mix [3][T][D]: k, v, r */
    float *kk = mix + 3 * T * D, *vv = kk + T * D, *rr = vv + T * D, *yy = rr + T * D, *x1 = yy + T * D;
    float *ff = x1 + T * D;
    int rc;
    for (int64_t t = 0; t < T; t++) layer_norm(x + t * D, h + t * D, D, m->ln1_w, m->ln1_b, m->eps);
    for (int64_t t = 0; t < T; t++) {
        const float *prev = t ? h + (t - 1) * D : shift;
        for (int64_t d = 0; d < D; d++) sx[t * D + d] = prev[d] - h[t * D + d];
    }
    memcpy(shift, h + (T - 1) * D, (size_t)D * sizeof(float));
    for (int64_t i = 0; i < 3; i++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++)
                mix[(i * T + t) * D + d] = h[t * D + d] + sx[t * D + d] * m->maa[i * D + d];
    if ((rc = mm(m->rwkv_w[0], mix, T, kk)) || (rc = mm(m->rwkv_w[1], mix + T * D, T, vv)) ||
        (rc = mm(m->rwkv_w[2], mix + 2 * T * D, T, rr)))
        return rc;
    if ((rc = wkv4_locked(kk, vv, m->decay, m->bonus, T, D, S, yy))) return rc;
    for (int64_t i = 0; i < T * D; i++) yy[i] *= 1.0f / (1.0f + expf(-rr[i]));
    if ((rc = mm(m->rwkv_w[3], yy, T, x1))) return rc;
    for (int64_t i = 0; i < T * D; i++) x1[i] = x[i] + m->rwkv_scale * x1[i];
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
    if ((rc = mm(m->rwkv_w[4], mix, T, ff)) || (rc = mm(m->rwkv_w[6], sx, T, rr))) return rc;
    for (int64_t i = 0; i < T * F; i++) ff[i] = ff[i] > 0.0f ? ff[i] * ff[i] : 0.0f;
    if ((rc = mm(m->rwkv_w[5], ff, T, kk))) return rc;
    const float half = m->rwkv_halve ? 0.5f : 1.0f;
    for (int64_t i = 0; i < T * D; i++) {
        const float x2 = (x1[i] + m->rwkv_scale * (kk[i] / (1.0f + expf(-rr[i])))) * half;
        if (!accumulate) out[i] = x2 - x[i];
        else if (out == x) out[i] = x2;
        else out[i] += x2 - x[i];
    }
    return 0;
}
