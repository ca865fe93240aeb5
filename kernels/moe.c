/* Routed experts (mixture of experts): the MLP of an MoE block, for a step of T tokens, in one call.
 *
 *   1. router logits [T][E] = x W_router^T (+ its bias) (a float matrix: the router stays in float);
 *   2. per token: softmax over the E logits, the top_k largest (ties: the lower expert first), their probabilities
 *      as the weights, renormalised to sum 1 with norm_topk (Mixtral, Qwen3-MoE's norm_topk_prob);
 *   3. per expert, in order, the tokens that chose it gathered into one block of rows: gate|up (+ biases),
 *      act(gate) * up, down (+ bias), each one matrix product for the whole group; each row added to its token's
 *      output times its weight;
 *   4. a shared expert (Qwen2-MoE), when given, over every token, times sigmoid(x w_shared_gate), added after;
 *   5. y = the sum (or y += it, with accumulate).
 * An expert no token chose is not read: a decode step touches top_k experts' matrices, so memory read per token
 * follows the active parameters (`matrices_used` counts the expert matrices multiplied, for tests). The sums are
 * float32 in transformers' order (expert by expert, the shared expert last). Lock-free (the plan's lock is held);
 * pt_moe_run takes the lock for a call from Python (the decoder's per-op oracle). */
#include "internal.h"

static void route(const pt_moe *m, int64_t T) {
    const int64_t E = m->n_experts, k = m->top_k;
    for (int64_t t = 0; t < T; t++) {
        float *l = m->logits + t * E, mx = l[0], s = 0.0f;
        for (int64_t e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int64_t e = 0; e < E; e++) {
            l[e] = expf(l[e] - mx);
            s += l[e];
        }
        for (int64_t e = 0; e < E; e++) l[e] /= s;
        int32_t *sel = m->sel + t * k;
        float *wt = m->wt + t * k, ws = 0.0f;
        for (int64_t j = 0; j < k; j++) {           /* k small: the largest left, k times */
            int32_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                int taken = 0;
                for (int64_t i = 0; i < j; i++) taken |= sel[i] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = (int32_t)e;
            }
            sel[j] = best;
            wt[j] = l[best];
            ws += wt[j];
        }
        if (m->norm_topk)
            for (int64_t j = 0; j < k; j++) wt[j] /= ws;
    }
}

static void add_bias(float *y, const float *b, int64_t n, int64_t width) {
    if (b)
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < width; c++) y[i * width + c] += b[c];
}

/* act(gate x + bg) * (up x + bu), then down (+ bd): n rows of xs into yo; the biases may be NULL */
static int expert(const pt_tensor *gate, const pt_tensor *up, const pt_tensor *down, const float *bg, const float *bu,
                  const float *bd, const float *xs, int64_t n, int act, const pt_moe *m) {
    const pt_tensor *W[2] = {gate, up};
    float *y[2] = {m->g, m->u};
    int rc = pt_matmul_n_locked(W, y, 2, xs, n, 0);
    if (rc) return rc;
    add_bias(m->g, bg, n, gate->rows);
    add_bias(m->u, bu, n, up->rows);
    pt_glu(act, m->g, m->u, n * gate->rows, m->g);
    const pt_tensor *D[1] = {down};
    float *yo[1] = {m->yo};
    rc = pt_matmul_n_locked(D, yo, 1, m->g, n, 0);
    add_bias(m->yo, bd, n, down->rows);
    return rc;
}

int pt_moe_locked(pt_moe *m, const float *x, int64_t T, float *y, int accumulate) {
    const int64_t E = m->n_experts, k = m->top_k, D = m->hidden;
    if (T < 1 || T > m->cap || k < 1 || k > E) return -1;
    const pt_tensor *R[1] = {m->router};
    float *lr[1] = {m->logits};
    int rc = pt_matmul_n_locked(R, lr, 1, x, T, 0);
    if (rc) return rc;
    add_bias(m->logits, m->router_b, T, E);
    route(m, T);
    memset(m->out, 0, (size_t)(T * D) * sizeof(float));
    for (int64_t e = 0; e < E; e++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++)
                if (m->sel[t * k + j] == e) {
                    m->rows[n] = (int32_t)t;
                    m->rw[n] = m->wt[t * k + j];
                    memcpy(m->xg + n * D, x + t * D, (size_t)D * sizeof(float));
                    n++;
                }
        if (!n) continue;
        rc = expert(m->gate[e], m->up[e], m->down[e], m->gate_b ? m->gate_b[e] : 0, m->up_b ? m->up_b[e] : 0,
                    m->down_b ? m->down_b[e] : 0, m->xg, n, m->act, m);
        if (rc) return rc;
        m->matrices_used += 3;
        for (int64_t i = 0; i < n; i++) {
            float *o = m->out + m->rows[i] * D;
            const float *v = m->yo + i * D, w = m->rw[i];
            for (int64_t d = 0; d < D; d++) o[d] += v[d] * w;
        }
    }
    if (m->sh_gate) {
        rc = expert(m->sh_gate, m->sh_up, m->sh_down, 0, 0, 0, x, T, m->act, m);
        if (rc) return rc;
        m->matrices_used += 3;
        if (m->sh_router) {
            const pt_tensor *S[1] = {m->sh_router};
            float *sg[1] = {m->logits};                 /* [T][1]: the routing is done with */
            rc = pt_matmul_n_locked(S, sg, 1, x, T, 0);
            if (rc) return rc;
        }
        for (int64_t t = 0; t < T; t++) {
            const float g = m->sh_router ? 1.0f / (1.0f + expf(-m->logits[t])) : 1.0f;
            for (int64_t d = 0; d < D; d++) m->out[t * D + d] += g * m->yo[t * D + d];
        }
    }
    if (accumulate)
        for (int64_t i = 0; i < T * D; i++) y[i] += m->out[i];
    else
        memcpy(y, m->out, (size_t)(T * D) * sizeof(float));
    return 0;
}

int pt_moe_run(pt_moe *m, const float *x, int64_t T, float *y, int accumulate) {
    pt_lock();
    int rc = pt_moe_locked(m, x, T, y, accumulate);
    pt_unlock();
    return rc;
}
