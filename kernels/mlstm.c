/* issue 36, the fam36n group: xLSTM's mLSTM layer (pt_mamba version 9) for one sequence's T tokens, carrying its
 * recurrent state, in transformers' recurrent (stabilized) form, which its chunkwise form equals up to rounding:
 *
 *   xz = in_proj x + in_b                    [T][2 Dk + 2 Dv + 2 H]: q, k [H][dk], v, o [H][dv], then i, f [H]
 *   i, f = cap tanh(i / cap), cap tanh(f / cap)         (gate_soft_cap, m->dt_max; 0: none)
 *   m' = max(logsigmoid(f) + m, i);  a = exp(logsigmoid(f) + m - m');  b = exp(i - m')
 *   C = a C + b k v^T;  n = a n + b k;  h = (q / sqrt(dk)) C / (max(|(q / sqrt(dk)) . n|, exp(-m')) + eps)
 *   y = LayerNorm(h) per head (no bias, m->eps) * norm_w * sigmoid(o);   out = out_proj y
 *
 * eps is m->gn_eps (the mLSTM's eps). The state of a head is C [dk][dv], n [dk], m (float32), in ssm_state
 * [H][dk dv + dk + 1], zero at the start (m starts at 0, as transformers' cache does). The heads run in parallel,
 * each through all T tokens in order, so the result does not depend on the split. Lock-free (the plan holds it). */
#include "internal.h"

typedef struct {
    const pt_mamba *m;
    int64_t T;
    float *state;
} mlstm_job;

static inline float logsigmoid_f(float x) { return x >= 0.0f ? -log1pf(expf(-x)) : x - log1pf(expf(x)); }

/* the plain scalar recurrence of head h through the job's T tokens (its gates, state, normed and gated output) */
static void mlstm_head(const mlstm_job *j, int64_t h) {
    const pt_mamba *m = j->m;
    const int64_t H = m->n_heads, dk = m->d_state, dv = m->head_dim, Dk = H * dk, Dv = H * dv;
    const int64_t row = 2 * Dk + 2 * Dv + 2 * H;
    float *C = j->state + h * (dk * dv + dk + 1), *n = C + dk * dv, *mst = n + dk;
    const float scale = 1.0f / sqrtf((float)dk), cap = m->dt_max, eps = m->gn_eps;
    for (int64_t t = 0; t < j->T; t++) {
        const float *r = m->xz + t * row, *q = r + h * dk, *k = r + Dk + h * dk, *v = r + 2 * Dk + h * dv;
        const float *o = r + 2 * Dk + Dv + h * dv;
        float ig = r[2 * Dk + 2 * Dv + h], fg = r[2 * Dk + 2 * Dv + H + h];
        if (cap > 0.0f) {
            ig = cap * tanhf(ig / cap);
            fg = cap * tanhf(fg / cap);
        }
        const float lf = logsigmoid_f(fg), mn = fmaxf(lf + *mst, ig);
        const float a = expf(lf + *mst - mn), b = expf(ig - mn);
        *mst = mn;
        float qn = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            n[i] = a * n[i] + b * k[i];
            qn += q[i] * scale * n[i];
        }
        float *y = m->y + t * Dv + h * dv;
        for (int64_t e = 0; e < dv; e++) y[e] = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            float *Ci = C + i * dv;
            const float bk = b * k[i], qi = q[i] * scale;
            for (int64_t e = 0; e < dv; e++) {
                Ci[e] = a * Ci[e] + bk * v[e];
                y[e] += qi * Ci[e];
            }
        }
        const float den = fmaxf(fabsf(qn), expf(-mn)) + eps;
        float mean = 0.0f, var = 0.0f;
        for (int64_t e = 0; e < dv; e++) mean += (y[e] /= den);
        mean /= (float)dv;
        for (int64_t e = 0; e < dv; e++) var += (y[e] - mean) * (y[e] - mean);
        const float rs = 1.0f / sqrtf(var / (float)dv + m->eps);
        const float *w = m->norm_w + h * dv;
        for (int64_t e = 0; e < dv; e++) y[e] = (y[e] - mean) * rs * w[e] * (1.0f / (1.0f + expf(-o[e])));
    }
}

static void mlstm_chunk(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    mlstm_head((const mlstm_job *)ctx, chunk);
}

int pt_mlstm_locked(const pt_mamba *m, const float *x, int64_t T, float *ssm_state, float *out, int accumulate) {
    const int64_t H = m->n_heads, dk = m->d_state, dv = m->head_dim;
    if (T < 1 || T > m->cap || H < 1 || dk < 1 || dv < 1 || !m->norm_w || !m->in_b || m->d_inner != H * dv ||
        m->in_proj->rows != 2 * H * dk + 2 * H * dv + 2 * H)
        return -1;
    const pt_tensor *W[1] = {m->in_proj};
    float *y[1] = {m->xz};
    int rc = pt_matmul_n_locked(W, y, 1, x, T, 0);
    if (rc) return rc;
    const int64_t row = m->in_proj->rows;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < row; c++) m->xz[t * row + c] += m->in_b[c];
    mlstm_job j = {m, T, ssm_state};
    pt_run_chunks(mlstm_chunk, &j, H, (double)T * (double)H * (double)dk * (double)dv * 4.0);
    W[0] = m->out_proj;
    y[0] = out;
    return pt_matmul_n_locked(W, y, 1, m->y, T, accumulate);
}
