/* Issue 36, the fam36g group (plan op ids 22-25): Laguna's attention output gate and ZAYA's CCA projection. Both are
 * plain scalar loops, their own reference (tests/test_fam36g5.py holds them to float64 at odd sizes).
 *
 * pt_head_gate: y [T][n][width] *= act(g [T][n]): each of a token's n gates scales `width` consecutive values of its
 * row (Laguna: width head_dim, one gate a head; width 1, one a value). act 0 sigmoid, 1 softplus (torch's: x above
 * 20 is itself). -1 on a bad argument.
 *
 * pt_cca_step: transformers' ZayaCCAProjection (ZAYA's compressed convolutional attention) over one sequence's T
 * rows, in place. With X(t) = [q_t | k_t] the raw projections (C = (n_heads + n_kv) head_dim channels; X before the
 * sequence's first position is 0, and the two before pos0 are the state's rows), the causal depthwise conv (kernel 2,
 * bias) and the grouped conv (kernel 2, one group a head, bias) of transformers, which pads X with two zero rows:
 *     A(t) = dw0 X(t-2) + dw1 X(t-1) + db,   B(t) = dw0 X(t-1) + dw1 X(t) + db       (per channel)
 *     Y(t)[o] = gb[o] + sum_j gw[o][j][0] A(t)[g hd + j] + gw[o][j][1] B(t)[g hd + j]   (g = o's head)
 * then q_h = Y_q,h + (q_h + k_kv(h)) / 2 and k_j = Y_k,j + the mean over kv head j's query heads of (q_h + k_j) / 2
 * (the raw q and k). v [T][n_kv head_dim]: its first half is the current token's, its second half (v_proj_delayed)
 * moves one position later: row t gets row t - 1's, row 0 the state's (at pos0 0: v0, v_proj_delayed of a zero
 * input, or zeros). The state (qk_state [2][C]: X(pos - 2), X(pos - 1); v_state [n_kv head_dim / 2]: the last
 * delayed half) is updated for the next step. -1 on a bad argument. */
#include "internal.h"

int pt_head_gate(int act, const float *g, float *y, int64_t T, int64_t n, int64_t width) {
    if (!g || !y || T < 0 || n < 1 || width < 1 || (act != 0 && act != 1)) return -1;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n; j++) {
            const float x = g[t * n + j];
            const float s = act ? (x > 20.0f ? x : log1pf(expf(x))) : 1.0f / (1.0f + expf(-x));
            float *r = y + (t * n + j) * width;
            for (int64_t i = 0; i < width; i++) r[i] *= s;
        }
    return 0;
}

/* X(t)'s channel c: the raw q / k rows for t >= 0, the state's rows for t = -2, -1 (zeros at the sequence start) */
static inline float x_at(const pt_cca *c, const float *q, const float *k, const float *state, int64_t pos0,
                         int64_t t, int64_t ch) {
    const int64_t Cq = c->n_heads * c->head_dim, C = Cq + c->n_kv * c->head_dim;
    if (t < 0) return pos0 > 0 ? state[(2 + t) * C + ch] : 0.0f;
    return ch < Cq ? q[t * Cq + ch] : k[t * (C - Cq) + ch - Cq];
}

int pt_cca_step(const pt_cca *c, float *q, float *k, float *v, int64_t T, int64_t pos0, float *qk_state,
                float *v_state) {
    if (!c || !q || !k || !v || !qk_state || !v_state || !c->tmp || T < 1 || pos0 < 0) return -1;
    const int64_t H = c->n_heads, KV = c->n_kv, hd = c->head_dim;
    if (H < 1 || KV < 1 || hd < 1 || H % KV || (KV * hd) % 2) return -1;
    const int64_t Cq = H * hd, Ck = KV * hd, C = Cq + Ck, G = H / KV, Vh = Ck / 2;
    float *A = c->tmp, *B = A + C, *Y = B + C, *saved = Y + C, *vsave = saved + 2 * C;
    for (int64_t r = 0; r < 2; r++)                     /* the next step's state, before anything is written */
        for (int64_t ch = 0; ch < C; ch++) saved[r * C + ch] = x_at(c, q, k, qk_state, pos0, T - 2 + r, ch);
    memcpy(vsave, v + (T - 1) * Ck + Vh, (size_t)Vh * sizeof(float));
    for (int64_t t = T - 1; t >= 0; t--) {              /* last first: rows t - 1, t - 2 are still raw */
        for (int64_t ch = 0; ch < C; ch++) {
            const float a2 = x_at(c, q, k, qk_state, pos0, t - 2, ch), a1 = x_at(c, q, k, qk_state, pos0, t - 1, ch);
            const float a0 = x_at(c, q, k, qk_state, pos0, t, ch);
            A[ch] = c->dw[2 * ch] * a2 + c->dw[2 * ch + 1] * a1 + c->db[ch];
            B[ch] = c->dw[2 * ch] * a1 + c->dw[2 * ch + 1] * a0 + c->db[ch];
        }
        for (int64_t o = 0; o < C; o++) {
            const float *w = c->gw + o * hd * 2, *a = A + (o / hd) * hd, *b = B + (o / hd) * hd;
            float s = c->gb[o];
            for (int64_t j = 0; j < hd; j++) s += w[2 * j] * a[j] + w[2 * j + 1] * b[j];
            Y[o] = s;
        }
        float *qt = q + t * Cq, *kt = k + t * Ck;
        for (int64_t j = 0; j < KV; j++)
            for (int64_t d = 0; d < hd; d++) {
                float sum = 0.0f;
                for (int64_t i = 0; i < G; i++) {
                    const float r = (qt[(j * G + i) * hd + d] + kt[j * hd + d]) * 0.5f;
                    sum += r;
                    Y[(j * G + i) * hd + d] += r;
                }
                Y[Cq + j * hd + d] += sum / (float)G;
            }
        memcpy(qt, Y, (size_t)Cq * sizeof(float));
        memcpy(kt, Y + Cq, (size_t)Ck * sizeof(float));
    }
    for (int64_t t = T - 1; t > 0; t--) memcpy(v + t * Ck + Vh, v + (t - 1) * Ck + Vh, (size_t)Vh * sizeof(float));
    for (int64_t i = 0; i < Vh; i++) v[Vh + i] = pos0 > 0 ? v_state[i] : c->v0 ? c->v0[i] : 0.0f;
    memcpy(qk_state, saved, (size_t)(2 * C) * sizeof(float));
    memcpy(v_state, vsave, (size_t)Vh * sizeof(float));
    return 0;
}
