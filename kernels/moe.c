/* Routed experts (mixture of experts): the MLP of an MoE block, for a step of T tokens, in one call.
 *
 *   1. router logits [T][E] = x W_router^T (+ its bias) (a float matrix: the router stays in float);
 *      (issue 36, fam36g: or the caller's, ext_logits: ZAYA's router MLP; soft-capped first with logit_softcap:
 *      Laguna; a zero-computation expert adding nothing with zero_skip: ZAYA's skip expert)
 *   2. per token: softmax over the E logits (or each one's sigmoid: Llama 4, DeepSeek-V3), the top_k largest (ties:
 *      the lower expert first) of those scores plus sel_bias (DeepSeek-V3), among the experts of the topk_group best
 *      groups when n_group > 1 (DeepSeek's group-limited routing), their scores as the weights, renormalised to sum 1
 *      with norm_topk (Mixtral, Qwen3-MoE's norm_topk_prob; over the sum + norm_eps: LFM2-MoE), times routed_scale; with scale_input the weight
 *      scales the expert's input instead of its output (Llama 4);
 *      (issue 36, fam36e: with bias_logits the choice is made on the raw logits plus sel_bias: Kolibri 1)
 *   3. per expert, in order, the tokens that chose it gathered into one block of rows: gate|up (+ biases),
 *      act(gate) * up, down (+ bias), each one matrix product for the whole group (plain experts, Nemotron-H:
 *      act(up), down); each row added to its token's output times its weight;
 *   3b. zero-computation experts (LongCat-Flash, n_zero > 0: the last n_zero router rows): each token's input
 *      times the sum of the weights it gave them, added after the real experts (transformers' identity_output);
 *      (issue 30, dsv4: scoring 3 sqrt(softplus); `forced` experts given per token, hash routing; the experts'
 *      gate <= swiglu_limit and |up| <= swiglu_limit before the activation, shared expert included)
 *      (issue 36, fam36h: with post_norm each row RMS-normed with its expert's weight row first: Ergo)
 *      (issue 36, fam36l: with gate_softcap the activation is Inkling 2's soft-capped SwiGLU)
 *      (issue 36, fam36m: with limit_after_act the clamp acts on act(gate) and up after the activation: Ling 3; the
 *      shared expert's clamp its own with sh_limit_own: HY-V4, Ling 3; group_fill_zero: the other groups' experts
 *      score 0 for the choice, not left out: A.X-K2)
 *   4. a shared expert (Qwen2-MoE), when given, over every token, times sigmoid(x w_shared_gate), added after
 *      (RMS-normed with sh_post_norm first when given: Ergo);
 *   5. y = the sum (or y += it, with accumulate).
 * An expert no token chose is not read: a decode step touches top_k experts' matrices, so memory read per token
 * follows the active parameters (`matrices_used` counts the expert matrices multiplied, for tests). The sums are
 * float32 in transformers' order (expert by expert, the shared expert last). Lock-free (the plan's lock is held);
 * pt_moe_run takes the lock for a call from Python (the decoder's per-op oracle). */
#include "internal.h"

/* the index of the largest of v[0..n) not yet in taken[0..k) that allow[] permits (ties: the lower index), -1 if none */
static int32_t best_of(const float *v, int64_t n, const int32_t *taken, int64_t k, const unsigned char *allow) {
    int32_t best = -1;
    for (int64_t e = 0; e < n; e++) {
        if (allow && !allow[e]) continue;
        int t = 0;
        for (int64_t i = 0; i < k; i++) t |= taken[i] == e;
        if (!t && (best < 0 || v[e] > v[best])) best = (int32_t)e;
    }
    return best;
}

#define MAX_EXPERTS 1024

/* PhiMoE's sparsemixer (transformers' `sparsemixer`, not training): for each choice j in turn, the best expert
 * not yet chosen (ties: the lower index), m = its logit; its weight is the softmax, taken at it, over the experts
 * not yet chosen whose (m - l_e) / max(|l_e|, m) is at most 2 eps (the others masked to -inf). The logits l are
 * left as they are; the weights are not renormalised. */
static void sparsemixer(const float *l, int64_t E, int64_t k, float eps, int32_t *sel, float *wt) {
    for (int64_t j = 0; j < k; j++) {
        int32_t e = best_of(l, E, sel, j, 0);
        sel[j] = e;
        const float mx = l[e];
        float s = 0.0f;
        for (int64_t i = 0; i < E; i++) {
            int taken = 0;
            for (int64_t q = 0; q < j; q++) taken |= sel[q] == i;
            if (taken) continue;
            const float a = fabsf(l[i]), factor = a > mx ? a : mx;
            if ((mx - l[i]) / factor > 2.0f * eps) continue;
            s += expf(l[i] - mx);
        }
        wt[j] = 1.0f / s;           /* exp(m - m) / s */
    }
}

static void route(const pt_moe *m, int64_t T) {
    const int64_t E = m->n_experts, k = m->top_k;
    float choice[MAX_EXPERTS];
    unsigned char allow[MAX_EXPERTS];
    for (int64_t t = 0; t < T; t++) {
        float *l = m->logits + t * E;
        if (m->logit_softcap > 0.0f)    /* issue 36, fam36g: Laguna's router soft-capping */
            for (int64_t e = 0; e < E; e++) l[e] = tanhf(l[e] / m->logit_softcap) * m->logit_softcap;
        if (m->scoring == 2) {
            sparsemixer(l, E, k, m->jitter_eps, m->sel + t * k, m->wt + t * k);
            continue;
        }
        if (m->bias_logits)             /* Kolibri 1: chosen on the logits + bias, before they become scores */
            for (int64_t e = 0; e < E; e++) choice[e] = l[e] + (m->sel_bias ? m->sel_bias[e] : 0.0f);
        if (m->scoring == 1) {
            for (int64_t e = 0; e < E; e++) l[e] = 1.0f / (1.0f + expf(-l[e]));
        } else if (m->scoring == 3) {   /* sqrt(softplus) (DeepSeek-V4), softplus linear above 20 as torch's */
            for (int64_t e = 0; e < E; e++) l[e] = sqrtf(l[e] > 20.0f ? l[e] : log1pf(expf(l[e])));
        } else {
            float mx = l[0], s = 0.0f;
            for (int64_t e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
            for (int64_t e = 0; e < E; e++) {
                l[e] = expf(l[e] - mx);
                s += l[e];
            }
            for (int64_t e = 0; e < E; e++) l[e] /= s;
        }
        /* what the choice is made on: the scores, plus the selection bias */
        const float *c = m->bias_logits ? choice : l;
        if (m->sel_bias && !m->bias_logits) {
            for (int64_t e = 0; e < E; e++) choice[e] = l[e] + m->sel_bias[e];
            c = choice;
        }
        const unsigned char *ok = 0;
        if (m->n_group > 1) {           /* group-limited: only the experts of the topk_group best groups */
            const int64_t G = m->n_group, per = E / G;
            float gs[MAX_EXPERTS];
            int32_t gsel[MAX_EXPERTS];
            for (int64_t g = 0; g < G; g++) {
                int32_t two[2];
                two[0] = best_of(c + g * per, per, two, 0, 0);
                gs[g] = c[g * per + two[0]];
                if (m->group_score == 1 && per > 1) {
                    two[1] = best_of(c + g * per, per, two, 1, 0);
                    gs[g] += c[g * per + two[1]];
                }
            }
            memset(allow, 0, (size_t)E);
            for (int64_t i = 0; i < m->topk_group && i < G; i++) {
                gsel[i] = best_of(gs, G, gsel, i, 0);
                memset(allow + gsel[i] * per, 1, (size_t)per);
            }
            ok = allow;
            if (m->group_fill_zero) {   /* A.X-K2 (fam36m): the other groups' experts score 0, still candidates */
                if (c != choice) memcpy(choice, c, (size_t)E * sizeof(float));
                for (int64_t e = 0; e < E; e++)
                    if (!allow[e]) choice[e] = 0.0f;
                c = choice;
                ok = 0;
            }
        }
        int32_t *sel = m->sel + t * k;
        float *wt = m->wt + t * k, ws = 0.0f;
        for (int64_t j = 0; j < k; j++) {           /* k small: the largest left, k times */
            if (m->forced) {                        /* hash routing: the experts are given (DeepSeek-V4) */
                sel[j] = m->forced[t * k + j];
            } else {
                sel[j] = best_of(c, E, sel, j, ok);
                if (sel[j] < 0) sel[j] = best_of(c, E, sel, j, 0); /* fewer eligible than k: any */
            }
            wt[j] = l[sel[j]];
            ws += wt[j];
        }
        if (m->norm_topk) {
            ws += m->norm_eps;
            for (int64_t j = 0; j < k; j++) wt[j] /= ws;
        }
        if (m->routed_scale != 0.0f)
            for (int64_t j = 0; j < k; j++) wt[j] *= m->routed_scale;
    }
}

static void add_bias(float *y, const float *b, int64_t n, int64_t width) {
    if (b)
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < width; c++) y[i * width + c] += b[c];
}

/* act(gate x + bg) * (up x + bu), then down (+ bd): n rows of xs into yo; the biases may be NULL. A plain expert
 * (m->plain: Nemotron-H) has no gate: act(up x + bu), then down (+ bd) */
static int expert(const pt_tensor *gate, const pt_tensor *up, const pt_tensor *down, const float *bg, const float *bu,
                  const float *bd, const float *xs, int64_t n, int act, const pt_moe *m, const float lim) {
    if (m->plain) {
        const pt_tensor *U[1] = {up};
        float *yu[1] = {m->u};
        int rc = pt_matmul_n_locked(U, yu, 1, xs, n, 0);
        if (rc) return rc;
        pt_active()->bias_act(m->u, bu, n, up->rows, act);
        const pt_tensor *D[1] = {down};
        float *yo[1] = {m->yo};
        rc = pt_matmul_n_locked(D, yo, 1, m->u, n, 0);
        add_bias(m->yo, bd, n, down->rows);
        return rc;
    }
    const pt_tensor *W[2] = {gate, up};
    float *y[2] = {m->g, m->u};
    int rc = pt_matmul_n_locked(W, y, 2, xs, n, 0);
    if (rc) return rc;
    add_bias(m->g, bg, n, gate->rows);
    add_bias(m->u, bu, n, up->rows);
    if (lim > 0.0f && m->limit_after_act) {     /* Ling 3 (fam36m): act(gate) <= limit, |up| <= limit */
        pt_active()->bias_act(m->g, 0, n, gate->rows, act);
        for (int64_t i = 0; i < n * gate->rows; i++) {
            const float g = m->g[i] < lim ? m->g[i] : lim;
            m->g[i] = g * (m->u[i] < -lim ? -lim : m->u[i] > lim ? lim : m->u[i]);
        }
    } else {
        if (lim > 0.0f) {                       /* DeepSeek-V4: gate <= limit, |up| <= limit */
            for (int64_t i = 0; i < n * gate->rows; i++) {
                m->g[i] = m->g[i] < lim ? m->g[i] : lim;
                m->u[i] = m->u[i] < -lim ? -lim : m->u[i] > lim ? lim : m->u[i];
            }
        }
        if (m->gate_softcap > 0.0f) {           /* Inkling 2: cg tanh(g / cg) sigmoid(g) x cu tanh(u / cu) */
            const float cg = m->gate_softcap, cu = m->up_softcap;
            for (int64_t i = 0; i < n * gate->rows; i++) {
                const float g = m->g[i], u = m->u[i];
                m->g[i] = cg * tanhf(g / cg) / (1.0f + expf(-g)) * (cu > 0.0f ? cu * tanhf(u / cu) : u);
            }
        } else {
            pt_glu(act, m->g, m->u, n * gate->rows, m->g);
        }
    }
    const pt_tensor *D[1] = {down};
    float *yo[1] = {m->yo};
    rc = pt_matmul_n_locked(D, yo, 1, m->g, n, 0);
    add_bias(m->yo, bd, n, down->rows);
    return rc;
}

/* out += x times the weight each token gave the zero-computation experts (ids E - n_zero .. E - 1), summed in the
 * order chosen: the identity experts of LongCat-Flash, exact (no matrix) */
static void zero_experts(pt_moe *m, const float *x, int64_t T) {
    const int64_t E = m->n_experts, k = m->top_k, D = m->hidden;
    if (m->zero_skip) return;           /* issue 36, fam36g: ZAYA's skip expert adds nothing */
    for (int64_t t = 0; t < T; t++) {
        float w = 0.0f;
        for (int64_t j = 0; j < k; j++)
            if (m->sel[t * k + j] >= E - m->n_zero) w += m->wt[t * k + j];
        if (w == 0.0f) continue;
        float *o = m->out + t * D;
        const float *xt = x + t * D;
        for (int64_t d = 0; d < D; d++) o[d] += xt[d] * w;
    }
}

int pt_moe_locked(pt_moe *m, const float *x, int64_t T, float *y, int accumulate) {
    const int64_t E = m->n_experts, k = m->top_k, D = m->hidden;
    if (T < 1 || T > m->cap || k < 1 || k > E || E > MAX_EXPERTS) return -1;
    if (m->n_group > 1 && (E % m->n_group || m->topk_group < 1)) return -1;
    if (m->n_zero < 0 || m->n_zero >= E) return -1;
    if (m->scoring < 0 || m->scoring > 3 || (m->forced && m->scoring == 2)) return -1;
    if (m->forced)
        for (int64_t i = 0; i < T * k; i++)
            if (m->forced[i] < 0 || m->forced[i] >= E) return -1;
    int rc = 0;
    if (!m->ext_logits) {               /* else the caller wrote them (issue 36, fam36g: ZAYA's router MLP) */
        const pt_tensor *R[1] = {m->router};
        float *lr[1] = {m->logits};
        rc = pt_matmul_n_locked(R, lr, 1, x, T, 0);
        if (rc) return rc;
        add_bias(m->logits, m->router_b, T, E);
    }
    route(m, T);
    memset(m->out, 0, (size_t)(T * D) * sizeof(float));
    for (int64_t e = 0; e < E - m->n_zero; e++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < k; j++)
                if (m->sel[t * k + j] == e) {
                    m->rows[n] = (int32_t)t;
                    m->rw[n] = m->wt[t * k + j];
                    memcpy(m->xg + n * D, x + t * D, (size_t)D * sizeof(float));
                    if (m->scale_input) {           /* Llama 4: the weight scales the input, the output adds whole */
                        for (int64_t d = 0; d < D; d++) m->xg[n * D + d] *= m->rw[n];
                        m->rw[n] = 1.0f;
                    }
                    n++;
                }
        if (!n) continue;
        rc = expert(m->plain ? 0 : m->gate[e], m->up[e], m->down[e], m->gate_b ? m->gate_b[e] : 0,
                    m->up_b ? m->up_b[e] : 0, m->down_b ? m->down_b[e] : 0, m->xg, n, m->act, m, m->swiglu_limit);
        if (rc) return rc;
        m->matrices_used += m->plain ? 2 : 3;
        if (m->post_norm)           /* Ergo: each route's output normed with its expert's weights */
            pt_active()->norm(0, m->yo, m->post_norm + e * D, 0, m->post_norm_eps, n, D, 1, m->yo);
        for (int64_t i = 0; i < n; i++) {
            float *o = m->out + m->rows[i] * D;
            const float *v = m->yo + i * D, w = m->rw[i];
            for (int64_t d = 0; d < D; d++) o[d] += v[d] * w;
        }
    }
    if (m->n_zero) zero_experts(m, x, T);
    if (m->sh_up) {
        rc = expert(m->sh_gate, m->sh_up, m->sh_down, m->sh_gate_b, m->sh_up_b, m->sh_down_b, x, T, m->act, m,
                    m->sh_limit_own ? m->sh_swiglu_limit : m->swiglu_limit);
        if (rc) return rc;
        m->matrices_used += m->plain ? 2 : 3;
        if (m->sh_post_norm)
            pt_active()->norm(0, m->yo, m->sh_post_norm, 0, m->post_norm_eps, T, D, 1, m->yo);
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
