/* Griffin's recurrent block (RecurrentGemma; pt_mamba version 5) for one sequence's T tokens, carrying its state:
 *
 *   xy = in_proj x + in_b                    [T][2 W]: the x branch, then the y branch (linear_x | linear_y)
 *   u = causal depthwise conv1d(x) + conv_b  over the last d_conv - 1 inputs of the state (no activation)
 *   per head of bw = W / H channels (block-diagonal gates, transformers' [H][bw][bw] as stored: in x out):
 *     i = sigmoid(u_h Wx_h + bx_h),  r = sigmoid(u_h Wa_h + ba_h)
 *     log a = -8 r softplus(c),  a = exp(log a),  m = sqrt(1 - exp(2 log a))  (m = 1 and a = 0 at position 0)
 *     h = a h + m (i u)                      the RG-LRU, a linear recurrence per channel
 *   out = out_proj (h gelu_tanh(y)) + out_b  [T][hidden]
 *
 * The ssm state is [W + 1]: h, then a flag set once a token has run (transformers resets at position 0, where the
 * state is zero and the flag is 0: a fresh cache, or one rewound to the start). The conv state is [W][d_conv - 1],
 * oldest first. Both float32, updated in place.
 *
 * pt_rglru_heads is the kernel (parallel over heads; the gate products in a loop over output channels the compiler
 * vectorises); pt_rglru_ref is its plain scalar reference (one channel at a time, in the order of the math above),
 * exposed with pt_rglru for the parity tests (tests/test_recur5.py). */
#include <stdlib.h>

#include "internal.h"

static inline float sigmoid_r(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float softplus_r(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

typedef struct {
    const float *u, *wx, *bx, *wa, *ba, *c;
    int64_t T, H, bw, ldu, ldy;
    float *gx, *ga;              /* scratch [T][W] each: the gates, then the normalised input and a */
    float *state, *y;
    int first;                   /* the call starts at position 0 */
} rglru_job;

/* head `h` through all T tokens */
static void rglru_head(void *ctx, int64_t h, int ith) {
    (void)ith;
    const rglru_job *j = (const rglru_job *)ctx;
    const int64_t bw = j->bw, W = j->H * bw, c0 = h * bw;
    const float *wx = j->wx + h * bw * bw, *wa = j->wa + h * bw * bw;
    for (int64_t t = 0; t < j->T; t++) {
        const float *u = j->u + t * j->ldu + c0;
        float *gx = j->gx + t * W + c0, *ga = j->ga + t * W + c0;
        for (int64_t o = 0; o < bw; o++) {
            gx[o] = 0.0f;
            ga[o] = 0.0f;
        }
        for (int64_t i = 0; i < bw; i++) {
            const float ui = u[i];
            const float *rx = wx + i * bw, *ra = wa + i * bw;
#pragma omp simd
            for (int64_t o = 0; o < bw; o++) {
                gx[o] += ui * rx[o];
                ga[o] += ui * ra[o];
            }
        }
        const int reset = j->first && t == 0;
        for (int64_t o = 0; o < bw; o++) {
            const float ig = sigmoid_r(gx[o] + j->bx[c0 + o]), rg = sigmoid_r(ga[o] + j->ba[c0 + o]);
            const float la = -8.0f * rg * softplus_r(j->c[c0 + o]);
            const float mult = reset ? 1.0f : sqrtf(1.0f - expf(2.0f * la));
            gx[o] = u[o] * ig * mult;
            ga[o] = reset ? 0.0f : expf(la);
        }
    }
    float *s = j->state + c0;
    for (int64_t t = 0; t < j->T; t++) {
        const float *nx = j->gx + t * W + c0, *a = j->ga + t * W + c0;
        float *y = j->y + t * j->ldy + c0;
#pragma omp simd
        for (int64_t o = 0; o < bw; o++) {
            s[o] = a[o] * s[o] + nx[o];
            y[o] = s[o];
        }
    }
}

static int rglru_check(int64_t T, int64_t H, int64_t bw) { return T < 1 || H < 1 || bw < 1 ? -1 : 0; }

int pt_rglru_heads(const float *u, int64_t ldu, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx,
                   const float *wa, const float *ba, const float *c, float *state, float *y, int64_t ldy, float *gx,
                   float *ga) {
    if (rglru_check(T, H, bw)) return -1;
    const int64_t W = H * bw;
    rglru_job j = {u, wx, bx, wa, ba, c, T, H, bw, ldu, ldy, gx, ga, state, y, state[W] == 0.0f};
    pt_run_chunks(rglru_head, &j, H, (double)T * (double)W * (double)(2 * bw + 8));
    state[W] = 1.0f;
    return 0;
}

/* the plain scalar reference: token by token, channel by channel */
int pt_rglru_ref(const float *u, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx, const float *wa,
                 const float *ba, const float *c, float *state, float *y) {
    if (rglru_check(T, H, bw)) return -1;
    const int64_t W = H * bw;
    for (int64_t t = 0; t < T; t++) {
        const int reset = state[W] == 0.0f;
        for (int64_t h = 0; h < H; h++)
            for (int64_t o = 0; o < bw; o++) {
                const int64_t ch = h * bw + o;
                float sx = 0.0f, sa = 0.0f;
                for (int64_t i = 0; i < bw; i++) {
                    sx += u[t * W + h * bw + i] * wx[(h * bw + i) * bw + o];
                    sa += u[t * W + h * bw + i] * wa[(h * bw + i) * bw + o];
                }
                const float ig = 1.0f / (1.0f + expf(-(sx + bx[ch]))), rg = 1.0f / (1.0f + expf(-(sa + ba[ch])));
                const float sp = c[ch] > 20.0f ? c[ch] : log1pf(expf(c[ch]));
                const float la = -8.0f * rg * sp;
                const float a = reset ? 0.0f : expf(la), mult = reset ? 1.0f : sqrtf(1.0f - expf(2.0f * la));
                state[ch] = a * state[ch] + u[t * W + ch] * ig * mult;
                y[t * W + ch] = state[ch];
            }
        state[W] = 1.0f;
    }
    return 0;
}

/* the kernel alone, for the tests: u, y [T][H bw], state [H bw + 1]; -1 on a bad argument, -3 out of memory */
int pt_rglru(const float *u, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx, const float *wa,
             const float *ba, const float *c, float *state, float *y) {
    if (rglru_check(T, H, bw)) return -1;
    float *g = malloc((size_t)(2 * T * H * bw) * sizeof(float));
    if (!g) return -3;
    pt_lock();
    const int rc = pt_rglru_heads(u, H * bw, T, H, bw, wx, bx, wa, ba, c, state, y, H * bw, g, g + T * H * bw);
    pt_unlock();
    free(g);
    return rc;
}

#define CONV_CHANNELS 16

typedef struct {
    const pt_mamba *m;
    int64_t T;
    float *conv_state;
} conv_job;

/* the x branch's causal conv (with bias, no activation) over a block of channels, into m->u */
static void rg_conv_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const conv_job *j = (const conv_job *)ctx;
    const pt_mamba *m = j->m;
    const int64_t W = m->d_inner, K = m->d_conv, c0 = chunk * CONV_CHANNELS;
    const int64_t c1 = c0 + CONV_CHANNELS < W ? c0 + CONV_CHANNELS : W;
    for (int64_t c = c0; c < c1; c++) {
        float *cs = j->conv_state + c * (K - 1);
        const float *w = m->conv_w + c * K;
        for (int64_t t = 0; t < j->T; t++) {
            const float x = m->xz[t * 2 * W + c];
            float acc = 0.0f;
            for (int64_t k = 0; k < K - 1; k++) acc += w[k] * cs[k];
            acc += w[K - 1] * x;
            for (int64_t k = 0; k + 1 < K - 1; k++) cs[k] = cs[k + 1];
            if (K > 1) cs[K - 2] = x;
            m->u[t * W + c] = acc + (m->conv_b ? m->conv_b[c] : 0.0f);
        }
    }
}

int pt_rglru_mixer_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state,
                          float *out, int accumulate) {
    const int64_t W = m->d_inner, H = m->n_heads;
    if (T < 1 || T > m->cap || H < 1 || W % H || m->head_dim * H != W || m->d_conv < 1 ||
        m->in_proj->rows != 2 * W || !m->lru_wx || !m->lru_bx || !m->lru_wa || !m->lru_ba || !m->lru_c)
        return -1;
    const pt_kernels *kern = pt_active();
    const pt_tensor *Wt[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(Wt, y, 1, x, T, 0);
    if (rc) return rc;
    if (m->in_b) kern->bias_act(m->xz, m->in_b, T, 2 * W, 0);
    conv_job cj = {m, T, conv_state};
    pt_run_chunks(rg_conv_chunk, &cj, (W + CONV_CHANNELS - 1) / CONV_CHANNELS, (double)T * (double)W * m->d_conv);
    if ((rc = pt_rglru_heads(m->u, W, T, H, m->head_dim, m->lru_wx, m->lru_bx, m->lru_wa, m->lru_ba, m->lru_c,
                             ssm_state, m->y, W, m->dbc, m->dt)))
        return rc;
    for (int64_t t = 0; t < T; t++) {            /* h gelu_tanh(y) */
        float *yb = m->xz + t * 2 * W + W;
        kern->bias_act(yb, NULL, 1, W, 2);
        kern->glu(0, m->y + t * W, yb, W, m->y + t * W);
    }
    Wt[0] = m->out_proj;
    y[0] = out;
    if ((rc = pt_matmul_n_locked(Wt, y, 1, m->y, T, accumulate))) return rc;
    if (m->out_b) kern->bias_act(out, m->out_b, T, m->hidden, 0);
    return 0;
}
