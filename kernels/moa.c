/* issue 30, the jetmoe group: JetMoE's mixture of attention heads (MoA), the routed part.
 *
 * Petit runs a MoA layer as attention over every attention expert's query heads (query head h * E + e is expert
 * e's head h and reads kv head h: GQA with groups of E) and one output projection over all of them; what routes is
 * this kernel, between the attention and the output projection: each token's E router logits, the top k of them
 * softmaxed over those k (JetMoeTopKGating), weigh expert e's heads; every other expert's heads get weight 0, so
 * the output projection sums exactly the chosen experts' outputs, each times its gate.
 *
 * att: [T][n_kv][E][hd] in place; logits: [T][E] (the router's, float32). An exact tie goes to the lower expert id
 * (as the float64 reference's stable sort and Decoder's moa_last_routing break it; torch.topk does not promise an
 * order). pt_moa_gate_ref is the plain scalar reference the parity test holds it to (double arithmetic, a full
 * sort). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MOA_MAX_EXPERTS 256

static int moa_args(const float *logits, int64_t T, int64_t E, int64_t k, int64_t n_kv, int64_t hd, float *att) {
    return !logits || !att || T < 0 || E < 1 || E > MOA_MAX_EXPERTS || k < 1 || k > E || n_kv < 1 || hd < 1;
}

/* the weights of one token: w[e] = softmax over the top k of l, 0 elsewhere */
static void moa_weights(const float *l, int64_t E, int64_t k, float *w) {
    int32_t sel[MOA_MAX_EXPERTS];
    int64_t n = 0;
    for (int64_t e = 0; e < E; e++) w[e] = 0.0f;
    for (int64_t j = 0; j < k; j++) {           /* k passes of a max: k is small (2 in JetMoE) */
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++) {
            int taken = 0;
            for (int64_t i = 0; i < n; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || l[e] > l[best])) best = e;
        }
        sel[n++] = (int32_t)best;
    }
    float m = l[sel[0]], s = 0.0f;
    for (int64_t j = 0; j < k; j++) s += expf(l[sel[j]] - m);
    for (int64_t j = 0; j < k; j++) w[sel[j]] = expf(l[sel[j]] - m) / s;
}

int pt_moa_gate(const float *logits, int64_t T, int64_t E, int64_t k, int64_t n_kv, int64_t hd, float *att) {
    if (moa_args(logits, T, E, k, n_kv, hd, att)) return -1;
    float w[MOA_MAX_EXPERTS];
    for (int64_t t = 0; t < T; t++) {
        moa_weights(logits + t * E, E, k, w);
        for (int64_t h = 0; h < n_kv; h++) {
            float *row = att + ((t * n_kv + h) * E) * hd;
            for (int64_t e = 0; e < E; e++) {
                float *y = row + e * hd;
                if (w[e] == 0.0f) {
                    memset(y, 0, (size_t)hd * sizeof(float));
                } else {
                    const float g = w[e];
                    for (int64_t d = 0; d < hd; d++) y[d] *= g;
                }
            }
        }
    }
    return 0;
}

typedef struct { float v; int32_t e; } moa_item;

static int moa_cmp(const void *a, const void *b) {
    const moa_item *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->e - y->e;
}

int pt_moa_gate_ref(const float *logits, int64_t T, int64_t E, int64_t k, int64_t n_kv, int64_t hd, float *att) {
    if (moa_args(logits, T, E, k, n_kv, hd, att)) return -1;
    moa_item it[MOA_MAX_EXPERTS];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t e = 0; e < E; e++) it[e] = (moa_item){logits[t * E + e], (int32_t)e};
        qsort(it, (size_t)E, sizeof(moa_item), moa_cmp);
        double s = 0.0;
        for (int64_t j = 0; j < k; j++) s += exp((double)it[j].v - (double)it[0].v);
        for (int64_t e = 0; e < E; e++) {
            double g = 0.0;
            for (int64_t j = 0; j < k; j++)
                if (it[j].e == e) g = exp((double)it[j].v - (double)it[0].v) / s;
            for (int64_t h = 0; h < n_kv; h++)
                for (int64_t d = 0; d < hd; d++) {
                    float *y = att + ((t * n_kv + h) * E + e) * hd + d;
                    *y = (float)((double)*y * g);
                }
        }
    }
    return 0;
}
