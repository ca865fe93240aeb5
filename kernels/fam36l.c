/* Issue 36, the fam36l group (plan op ids 24-26): Thinking Machines' Inkling models (transformers 5.25's
 * modeling_inkling.py, modeling_inkling2.py, modeling_inkling2_loop.py). Plain loops, each its own reference
 * (tests/test_fam36l5.py holds them to float64 at odd sizes).
 *
 * pt_rel_attention: causal attention with a relative position bias made from each query's own states. A query at
 * position p (head h) scores the cached key at position j (p - window < j <= p with a window, else j <= p) as
 *     s = tau(p) (scale q.k_j + (p - j < extent ? r . proj[:, p - j] : 0))
 * r [T][n_heads][d_rel] the query's relative states and proj [d_rel][extent] a bank of bias-by-distance profiles;
 * tau(p) = 1 + log_alpha ln(max((p + 1) / log_floor, 1)) when log_floor > 0 (the full layers' logarithmic scaling of
 * queries and relative states), else 1. With sinks [T][n_heads] each query's softmax has one more logit whose share is
 * dropped (Inkling 2's per-token sinks). Grouped-query: head h reads kv head h / (n_heads / n_kv); the caches are
 * [n_kv][n_ctx][head_dim] float. One (token, head) at a time, each folded in position order, so decode and prefill
 * give the same bits; spread over the pool by (token, head).
 *
 * pt_sconv_step: a short causal depthwise convolution with its residual, y_t = out_scale (x_t + sum_j w_j x_(t-K+1+j))
 * per channel (torch's Conv1d weight [C][K], tap K - 1 the current token), over one sequence's rows in place; with
 * `heads` > 0 each token's taps are w plus its own dyn [T][heads][K] (in lag order: dyn[..][0] weighs the current
 * token), one set a head of C / heads channels (Inkling 2's dynamic convolutions). The inputs before the sequence's
 * first position are 0, the K - 1 before pos0 the state's [K - 1][C] rows (oldest first), which the step leaves
 * holding its last K - 1 inputs.
 *
 * pt_block_res: Inkling 2's attention residuals (its "block" and "message" attentions over depth). For each token, the
 * n_src + 1 vectors (sources j at src + j src_stride + t D, the current one at cur + t D) RMS-normed without a weight
 * (eps), each of n_q queries [n_q][D] weighs them by the softmax over j of q . normed_j / sqrt(D), and out + i
 * out_stride + t D gets its weighted sum of the normed vectors. */
#include "internal.h"
#include <stdlib.h>

#define MAX_SOURCES 256

typedef struct {
    const pt_relattn *a;
    const float *q, *r, *sinks, *kc, *vc;
    float *out;
    int64_t n_ctx, T, pos0, span;
} rel_job;

/* the positions query t sees: [first, p] */
static int64_t rel_first(const pt_relattn *a, int64_t p) {
    return a->window > 0 && p + 1 > a->window ? p + 1 - a->window : 0;
}

static void rel_task(void *ctx, int64_t item, int ith) {
    const rel_job *j = (const rel_job *)ctx;
    const pt_relattn *a = j->a;
    const int64_t H = a->n_heads, hd = a->head_dim, t = item / H, h = item % H, kvh = h / (H / a->n_kv);
    const int64_t p = j->pos0 + t, first = rel_first(a, p), n = p - first + 1, ext = n < a->extent ? n : a->extent;
    float *s = pt_scratch(ith, j->span + a->extent + hd), *rl = s + j->span, *o = rl + a->extent;
    const float *q = j->q + (t * H + h) * hd, *r = j->r ? j->r + (t * H + h) * a->d_rel : 0;
    float tau = 1.0f;
    if (a->log_floor > 0) {
        const float ratio = (float)(p + 1) / (float)a->log_floor;
        tau = 1.0f + a->log_alpha * logf(ratio > 1.0f ? ratio : 1.0f);
    }
    for (int64_t d = 0; d < ext; d++) {         /* the bias at each distance this query reads */
        float b = 0.0f;
        for (int64_t i = 0; i < a->d_rel && r; i++) b += r[i] * a->proj[i * a->extent + d];
        rl[d] = b;
    }
    float m = -INFINITY;
    for (int64_t k = first; k <= p; k++) {
        const float *key = j->kc + (kvh * j->n_ctx + k) * hd;
        float dot = 0.0f;
        for (int64_t i = 0; i < hd; i++) dot += q[i] * key[i];
        const int64_t d = p - k;
        const float v = tau * (a->scale * dot + (d < a->extent ? rl[d] : 0.0f));
        s[k - first] = v;
        m = v > m ? v : m;
    }
    const float *sink = j->sinks ? j->sinks + t * H + h : 0;
    if (sink && *sink > m) m = *sink;
    float l = 0.0f;
    for (int64_t i = 0; i < hd; i++) o[i] = 0.0f;
    for (int64_t k = first; k <= p; k++) {
        const float e = expf(s[k - first] - m);
        const float *val = j->vc + (kvh * j->n_ctx + k) * hd;
        l += e;
        for (int64_t i = 0; i < hd; i++) o[i] += e * val[i];
    }
    if (sink) l += expf(*sink - m);
    float *y = j->out + (t * H + h) * hd;
    for (int64_t i = 0; i < hd; i++) y[i] = o[i] / l;
}

int pt_rel_attention_locked(const pt_relattn *a, const float *q, const float *r, const float *sinks,
                            const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T, int64_t pos0,
                            float *out) {
    if (!a || !q || !k_cache || !v_cache || !out || T < 0 || pos0 < 0 || pos0 + T > n_ctx || a->n_kv < 1 ||
        a->n_heads < 1 || a->n_heads % a->n_kv || a->head_dim < 1 || a->window < 0 || a->extent < 1 ||
        a->d_rel < 0 || (a->d_rel > 0 && !a->proj))
        return -1;
    if (T == 0) return 0;
    rel_job j = {a, q, r, sinks, k_cache, v_cache, out, n_ctx, T, pos0, 0};
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t - rel_first(a, pos0 + t) + 1;
        j.span = n > j.span ? n : j.span;
    }
    const int threads = pt_pool_threads();
    for (int i = 0; i < threads; i++)            /* scratch first: a task never meets a failed allocation */
        if (!pt_scratch(i, j.span + a->extent + a->head_dim)) return -3;
    pt_run_chunks(rel_task, &j, T * a->n_heads,
                  (double)T * a->n_heads * (double)j.span * (double)(2 * a->head_dim + a->d_rel));
    return 0;
}

int pt_rel_attention(const pt_relattn *a, const float *q, const float *r, const float *sinks, const float *k_cache,
                     const float *v_cache, int64_t n_ctx, int64_t T, int64_t pos0, float *out) {
    pt_lock();
    const int rc = pt_rel_attention_locked(a, q, r, sinks, k_cache, v_cache, n_ctx, T, pos0, out);
    pt_unlock();
    return rc;
}

/* the input at step row t of channel ch: the rows themselves, the state's before the step (zeros at the start) */
static inline float conv_in(const float *x, const float *state, int64_t C, int64_t K, int64_t pos0, int64_t t,
                            int64_t ch) {
    if (t >= 0) return x[t * C + ch];
    return pos0 > 0 ? state[(K - 1 + t) * C + ch] : 0.0f;
}

int pt_sconv_step(const pt_sconv *c, float *x, const float *dyn, int64_t T, int64_t pos0, float *state) {
    if (!c || !x || !state || !c->w || T < 1 || pos0 < 0 || c->channels < 1 || c->kernel < 1 || c->heads < 0 ||
        (c->heads > 0 && (!dyn || c->channels % c->heads)))
        return -1;
    const int64_t C = c->channels, K = c->kernel, per = c->heads > 0 ? C / c->heads : C;
    float *saved = (float *)malloc((size_t)((K > 1 ? K - 1 : 1) * C) * sizeof(float));
    if (!saved) return -3;
    for (int64_t i = 0; i < K - 1; i++)         /* the next step's state, before anything is written */
        for (int64_t ch = 0; ch < C; ch++) saved[i * C + ch] = conv_in(x, state, C, K, pos0, T - (K - 1) + i, ch);
    for (int64_t t = T - 1; t >= 0; t--) {      /* last first: the rows before t are still the inputs */
        const float *dt = c->heads > 0 ? dyn + t * c->heads * K : 0;
        for (int64_t ch = 0; ch < C; ch++) {
            const float *w = c->w + ch * K, *dh = dt ? dt + (ch / per) * K : 0;
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) {   /* oldest first, as torch's conv1d */
                const float tap = dh ? w[k] + dh[K - 1 - k] : w[k];
                s += tap * conv_in(x, state, C, K, pos0, t - (K - 1) + k, ch);
            }
            x[t * C + ch] = (s + x[t * C + ch]) * c->out_scale;
        }
    }
    memcpy(state, saved, (size_t)((K - 1) * C) * sizeof(float));
    free(saved);
    return 0;
}

int pt_block_res(const float *src, int64_t n_src, int64_t src_stride, const float *cur, const float *queries,
                 int64_t n_q, int64_t T, int64_t D, float eps, float *out, int64_t out_stride) {
    if (n_src < 0 || n_src + 1 > MAX_SOURCES || (n_src > 0 && !src) || !cur || !queries || n_q < 1 || T < 0 ||
        D < 1 || !out)
        return -1;
    const int64_t n = n_src + 1;
    const float scale = 1.0f / sqrtf((float)D);
    for (int64_t t = 0; t < T; t++) {
        const float *x[MAX_SOURCES];
        float inv[MAX_SOURCES], w[MAX_SOURCES];
        for (int64_t j = 0; j < n; j++) {
            x[j] = j < n_src ? src + j * src_stride + t * D : cur + t * D;
            float ss = 0.0f;
            for (int64_t i = 0; i < D; i++) ss += x[j][i] * x[j][i];
            inv[j] = 1.0f / sqrtf(ss / (float)D + eps);
        }
        for (int64_t qi = 0; qi < n_q; qi++) {
            const float *q = queries + qi * D;
            float m = -INFINITY, l = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                float dot = 0.0f;
                for (int64_t i = 0; i < D; i++) dot += q[i] * x[j][i];
                w[j] = dot * inv[j] * scale;
                m = w[j] > m ? w[j] : m;
            }
            for (int64_t j = 0; j < n; j++) {
                w[j] = expf(w[j] - m);
                l += w[j];
            }
            float *y = out + qi * out_stride + t * D;
            for (int64_t i = 0; i < D; i++) y[i] = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                const float c = w[j] / l * inv[j];
                for (int64_t i = 0; i < D; i++) y[i] += c * x[j][i];
            }
        }
    }
    return 0;
}
