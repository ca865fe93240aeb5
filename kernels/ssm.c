/* Mamba's mixer (Mamba-1 and Falcon-Mamba) for one sequence's T tokens, in one call, carrying its recurrent state:
 *
 *   xz = in_proj x                          [T][2 di]: x part, then the gate z
 *   u = silu(causal depthwise conv1d(x))     over the last d_conv - 1 inputs of the state, then this call's
 *   dbc = x_proj u                           [T][dt_rank + 2 ds]: dt, B, C (Falcon-Mamba: each RMS-normed, no weight)
 *   dt = softplus(dt_proj dt + dt_bias)      [T][di]
 *   (Zamba: H heads of di / H channels, each with its own x_proj and dt_proj, so its own dt, B and C)
 *   s[d][n] = exp(dt[d] A[d][n]) s[d][n] + dt[d] B[n] u[d];   y[d] = sum_n s[d][n] C[n] + D[d] u[d]
 *   out = out_proj (y * silu(z))             [T][hidden]
 *
 * The scan is sequential in time (a recurrence), parallel over the di channels: each worker takes a block of channels
 * through all T tokens, so its state rows stay in cache; the result does not depend on the split. It runs in
 * kernels/selscan.c, a token at a time or chunked over a prompt. The conv state
 * keeps the last d_conv - 1 inputs of each channel ([di][d_conv - 1], oldest first) and the ssm state s ([di][ds]);
 * both are float32 and updated in place. Lock-free (the plan holds the lock); pt_mamba_run takes it for Python.
 *
 * Mamba-2 (version 2, the SSD recurrence): in_proj gives z, xBC and dt per token; the conv (and silu) runs over the
 * xBC channels; x is [H][P], B and C [G][ds], head j reading group j / (H / G); dt = clamp(softplus(dt + dt_bias));
 * S_j = exp(dt_j A_j) S_j + dt_j x_j B^T (S_j [P][ds]), y_j = S_j C + D_j x_j; then RMSNorm(y silu(z)) * norm_w
 * over all di channels, and out_proj. Parallel over heads. A prompt's scan runs chunked (kernels/ssd.c).
 *
 * Qwen3-Next's Gated DeltaNet (version 4): in_proj gives q, k [Hk][dk], v, z [Hv][dv] and b, a [Hv] (Petit's order,
 * regrouped at load); the causal conv (no bias) and silu over q | k | v, then the delta rule per value head
 * (kernels/deltanet.c: recurrent, or chunked for a prompt).
 * LFM2's short convolution (version 3): in_proj gives B, C and x ([3][D]); v = B x, the causal conv of v over the
 * state's last d_conv - 1 values (no bias, no activation), times C, then out_proj. The ssm state is not used. */
#include "internal.h"

static inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
static inline float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* RMS norm of n values in place, times w when given (Falcon-Mamba's B, C and dt: no weight; Jamba's: weights) */
static void rms_plain(float *x, int64_t n, float eps, const float *w) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    const float r = 1.0f / sqrtf(s / (float)n + eps);
    for (int64_t i = 0; i < n; i++) x[i] = w ? x[i] * r * w[i] : x[i] * r;
}

/* one step of a causal depthwise conv: bias + the K - 1 kept inputs and x against the channel's K weights; the
 * kept inputs then shift by one and x joins them (cs: [K - 1], oldest first) */
static inline float conv_step(float *cs, const float *w, int64_t K, float bias, float x) {
    float acc = bias;
    for (int64_t k = 0; k < K - 1; k++) acc += w[k] * cs[k];
    acc += w[K - 1] * x;
    for (int64_t k = 0; k + 1 < K - 1; k++) cs[k] = cs[k + 1];
    if (K > 1) cs[K - 2] = x;
    return acc;
}

typedef struct {
    const pt_mamba *m;
    int64_t T;
    float *conv_state, *ssm_state;
} scan_job;

#define CHANNELS 16             /* channels per chunk of the pool's work */

/* channels [d0, d1) through all T tokens: the causal conv and its silu into m->u */
static void conv_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const scan_job *j = (const scan_job *)ctx;
    const int64_t d0 = chunk * CHANNELS, d1 = d0 + CHANNELS < j->m->d_inner ? d0 + CHANNELS : j->m->d_inner;
    const pt_mamba *m = j->m;
    const int64_t di = m->d_inner, K = m->d_conv, T = j->T;
    for (int64_t d = d0; d < d1; d++) {
        float *cs = j->conv_state + d * (K - 1);
        const float *w = m->conv_w + d * K;
        for (int64_t t = 0; t < T; t++) {
            const float acc = conv_step(cs, w, K, m->conv_b ? m->conv_b[d] : 0.0f, m->xz[t * 2 * di + d]);
            m->u[t * di + d] = silu_f(acc);
        }
    }
}

/* Mamba-2: the conv over channel block `chunk` of xBC (its width in `cw`, read from xz at column z_off) */
typedef struct {
    const pt_mamba *m;
    int64_t T, cw, row, x_off;
    float *conv_state, *ssm_state;
} ssd_job;

static void conv2_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const ssd_job *j = (const ssd_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t K = m->d_conv, c0 = chunk * CHANNELS, c1 = c0 + CHANNELS < j->cw ? c0 + CHANNELS : j->cw;
    for (int64_t c = c0; c < c1; c++) {
        float *cs = j->conv_state + c * (K - 1);
        const float *w = m->conv_w + c * K;
        for (int64_t t = 0; t < j->T; t++) {
            const float acc = conv_step(cs, w, K, m->conv_b ? m->conv_b[c] : 0.0f, m->xz[t * j->row + j->x_off + c]);
            m->u[t * j->cw + c] = silu_f(acc);
        }
    }
}

/* head `h` through all T tokens */
static void ssd_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const ssd_job *j = (const ssd_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t P = m->head_dim, N = m->d_state, H = m->n_heads, di = m->d_inner;
    const int64_t g = h / (H / m->n_groups);
    const float *x = m->u + h * P, *B = m->u + di + g * N, *C = m->u + di + m->n_groups * N + g * N;
    pt_active()->ssd_steps(j->ssm_state + h * P * N, x, j->cw, B, C, j->cw, m->dt + h, H, m->A[h], j->T, P, N,
                           m->y + h * P, di);
    for (int64_t t = 0; t < j->T; t++)
        for (int64_t p = 0; p < P; p++) m->y[t * di + h * P + p] += m->Dp[h] * x[t * j->cw + p];
}

static int mamba2_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state,
                         float *out, int accumulate) {
    const int64_t di = m->d_inner, H = m->n_heads, N = m->d_state, G = m->n_groups;
    const int64_t cw = di + 2 * G * N, row = di + cw + H;
    if (T < 1 || T > m->cap || H < 1 || G < 1 || H % G || m->head_dim * H != di || m->in_proj->rows != row) return -1;
    if (m->norm_mode < 0 || m->norm_mode > 3 || (m->norm_mode != 2 && !m->norm_w) ||
        (m->norm_groups > 1 && di % m->norm_groups))
        return -1;
    const pt_tensor *W[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(W, y, 1, x, T, 0);
    if (rc) return rc;
    ssd_job j = {m, T, cw, row, di, conv_state, ssm_state};
    pt_run_chunks(conv2_chunk, &j, (cw + CHANNELS - 1) / CHANNELS, (double)T * (double)cw * (double)m->d_conv);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            float v = softplus_f(m->xz[t * row + di + cw + h] + m->dt_bias[h]);
            v = v < m->dt_min ? m->dt_min : v;
            m->dt[t * H + h] = v > m->dt_max ? m->dt_max : v;
        }
    if (pt_ssd_chunked(m->scan, T)) {          /* a prompt: chunked (kernels/ssd.c) */
        if ((rc = pt_ssd_heads(m, T, cw, ssm_state))) return rc;
    } else {
        pt_run_chunks(ssd_head, &j, H, (double)T * (double)di * (double)N * 4.0);
    }
    /* the gate and the gated RMSNorm: over all di channels (transformers' Mamba-2), or per group (Falcon-H1) */
    const int64_t ng = m->norm_groups > 1 ? m->norm_groups : 1, gw = di / ng;
    for (int64_t t = 0; t < T; t++) {
        float *yt = m->y + t * di;
        const float *z = m->xz + t * row;
        if (m->norm_mode == 0 || m->norm_mode == 2)
            for (int64_t d = 0; d < di; d++) yt[d] *= silu_f(z[d]);
        if (m->norm_mode == 2) continue;
        for (int64_t g = 0; g < ng; g++) {
            float ss = 0.0f, *yg = yt + g * gw;
            for (int64_t d = 0; d < gw; d++) ss += yg[d] * yg[d];
            const float r = 1.0f / sqrtf(ss / (float)gw + m->eps);
            for (int64_t d = 0; d < gw; d++) yg[d] = yg[d] * r * m->norm_w[g * gw + d];
        }
        if (m->norm_mode == 1)
            for (int64_t d = 0; d < di; d++) yt[d] *= silu_f(z[d]);
        if (m->norm_mode == 3)             /* MiniMax's lightning attention: norm, then sigmoid(gate) */
            for (int64_t d = 0; d < di; d++) yt[d] *= 1.0f / (1.0f + expf(-z[d]));
    }
    W[0] = m->out_proj;
    y[0] = out;
    return pt_matmul_n_locked(W, y, 1, m->y, T, accumulate);
}

/* LFM2's short convolution, channel block `chunk`: v = B x, a causal conv of v (no bias, no activation), times C */
static void short_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const scan_job *j = (const scan_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t D = m->d_inner, K = m->d_conv, c0 = chunk * CHANNELS, c1 = c0 + CHANNELS < D ? c0 + CHANNELS : D;
    for (int64_t c = c0; c < c1; c++) {
        float *cs = j->conv_state + c * (K - 1);
        const float *w = m->conv_w + c * K;
        for (int64_t t = 0; t < j->T; t++) {
            const float *row = m->xz + t * 3 * D;
            const float acc = conv_step(cs, w, K, m->conv_b ? m->conv_b[c] : 0.0f, row[c] * row[2 * D + c]);
            m->y[t * D + c] = row[D + c] * acc;
        }
    }
}

static int short_conv_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *out,
                             int accumulate) {
    const int64_t D = m->d_inner;
    if (T < 1 || T > m->cap || m->in_proj->rows != 3 * D) return -1;
    const pt_tensor *W[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(W, y, 1, x, T, 0);
    if (rc) return rc;
    scan_job j = {m, T, conv_state, 0};
    pt_run_chunks(short_chunk, &j, (D + CHANNELS - 1) / CHANNELS, (double)T * (double)D * (double)m->d_conv);
    W[0] = m->out_proj;
    y[0] = out;
    return pt_matmul_n_locked(W, y, 1, m->y, T, accumulate);
}

/* Gated DeltaNet (version 4): in_proj and the conv here, the delta rule of each value head in kernels/deltanet.c */
#define DELTA_MAX_DIM 512
static int deltanet_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state,
                           float *out, int accumulate) {
    const int64_t dk = m->d_state, dv = m->head_dim, Hv = m->n_heads, Hk = m->n_groups;
    const int64_t kd = Hk * dk, vd = Hv * dv, cw = 2 * kd + vd;
    const int64_t row = 2 * kd + 2 * vd + Hv + (m->kda ? Hv * dk : Hv);     /* Kimi: a forget gate per key channel */
    if (T < 1 || T > m->cap || Hk < 1 || Hv % Hk || dk < 1 || dk > DELTA_MAX_DIM || dv < 1 || dv > DELTA_MAX_DIM ||
        m->d_inner != vd || m->in_proj->rows != row || !m->norm_w)
        return -1;
    const pt_tensor *W[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(W, y, 1, x, T, 0);
    if (rc) return rc;
    ssd_job j = {m, T, cw, row, 0, conv_state, ssm_state};
    pt_run_chunks(conv2_chunk, &j, (cw + CHANNELS - 1) / CHANNELS, (double)T * (double)cw * (double)m->d_conv);
    if ((rc = pt_delta_heads(m, T, cw, row, ssm_state))) return rc;
    W[0] = m->out_proj;
    y[0] = out;
    return pt_matmul_n_locked(W, y, 1, m->y, T, accumulate);
}

int pt_mamba_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state, float *out,
                    int accumulate) {
    if (m->version == 9) return pt_mlstm_locked(m, x, T, ssm_state, out, accumulate);     /* xLSTM (mlstm.c) */
    if (m->version == 8) return pt_rwkv4_block_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 7) return pt_rwkv7_block_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 6) return pt_rwkv6_block_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 5) return pt_rglru_mixer_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 4) return deltanet_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 2) return mamba2_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    if (m->version == 3) return short_conv_locked(m, x, T, conv_state, out, accumulate);
    /* Zamba's multi-head Mamba-1 (n_heads H > 1): head h's channels [h di/H, (h+1) di/H) read their own dt, B and
     * C; x_proj [H nb][di] and dt_proj [di][H R] are block-diagonal (zeros outside a head's block, set at load) */
    const int64_t H = m->n_heads > 1 ? m->n_heads : 1;
    const int64_t di = m->d_inner, ds = m->d_state, R = m->dt_rank, nb = R + 2 * ds, row = H * nb;
    if (T < 1 || T > m->cap || di < 1 || ds < 1 || m->d_conv < 1 || R < 1 || di % H || (H > 1 && m->inner_norm) ||
        m->x_proj->rows != row || m->dt_proj->cols != H * R)
        return -1;
    const pt_tensor *W[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(W, y, 1, x, T, 0);
    if (rc) return rc;
    scan_job j = {m, T, conv_state, ssm_state};
    const int64_t chunks = (di + CHANNELS - 1) / CHANNELS;
    pt_run_chunks(conv_chunk, &j, chunks, (double)T * (double)di * (double)m->d_conv);
    W[0] = m->x_proj;
    y[0] = m->dbc;
    if ((rc = pt_matmul_n_locked(W, y, 1, m->u, T, 0))) return rc;
    if (m->inner_norm)               /* Falcon-Mamba: dt, B and C each RMS-normed (no weight) */
        for (int64_t t = 0; t < T; t++) {
            rms_plain(m->dbc + t * nb, R, m->eps, m->dt_norm_w);
            rms_plain(m->dbc + t * nb + R, ds, m->eps, m->b_norm_w);
            rms_plain(m->dbc + t * nb + R + ds, ds, m->eps, m->c_norm_w);
        }
    /* dt_proj over the first R values of each head's dbc block: gathered into u's place is not possible (u is read
     * by the scan), so through the g buffer: dt = dt_proj [dbc_h[:, :R] for each head h] */
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            memcpy(m->g + (t * H + h) * R, m->dbc + t * row + h * nb, (size_t)R * sizeof(float));
    W[0] = m->dt_proj;
    y[0] = m->dt;
    if ((rc = pt_matmul_n_locked(W, y, 1, m->g, T, 0))) return rc;
    for (int64_t t = 0; t < T; t++)
        for (int64_t d = 0; d < di; d++) {
            float v = m->dt[t * di + d] + (m->dt_bias ? m->dt_bias[d] : 0.0f);
            m->dt[t * di + d] = softplus_f(v);
        }
    if ((rc = pt_sel_channels(m, T, ssm_state))) return rc;       /* the selective scan (kernels/selscan.c) */
    W[0] = m->out_proj;
    y[0] = out;
    return pt_matmul_n_locked(W, y, 1, m->y, T, accumulate);
}

int pt_mamba_run(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state, float *out,
                 int accumulate) {
    pt_lock();
    int rc = pt_mamba_locked(m, x, T, conv_state, ssm_state, out, accumulate);
    pt_unlock();
    return rc;
}
