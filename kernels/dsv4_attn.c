/* issue 30, the dsv4 group: DeepSeek-V4's attention core, over a sliding window of keys plus compressed entries,
 * with a sink per head.
 *
 * One K = V head: kv [n_ctx][hd] the roped, normed rows of positions 0..n_ctx-1, C [n_c][hd] the compressed entries
 * (pooled windows of m tokens, normed and roped). The query at position p = pos0 + t, head h, attends over
 *     the window: positions s with p - window < s <= p, and
 *     the compressed entries: sel == NULL: every closed window, e < (p + 1) / m (heavily compressed attention);
 *                             else the n_sel[t] entries sel[t][0..] (compressed sparse attention: the indexer's
 *                             choice, every one of them closed),
 * out[t][h] = sum softmax(scale q . k, with exp(sinks[h]) added to the denominator) k. m 0: the window only.
 * The rotation back of the output's rope slice is the caller's (pt_rope at minus the position). q, out
 * [T][n_heads][hd]; -1 on a bad argument. pt_dsv4_attention: one pass with a running maximum;
 * pt_dsv4_attention_ref: the plain scalar reference (double, two passes). */
#include "internal.h"

#include <math.h>

static int attn_args(const float *q, const float *kv, int64_t n_ctx, const float *C, int64_t n_c, int64_t m,
                     const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t T, int64_t pos0,
                     int64_t n_heads, int64_t hd, int64_t window, const float *sinks, const float *out) {
    if (!q || !kv || !sinks || !out || T < 0 || pos0 < 0 || n_heads < 1 || hd < 1 || window < 1 || m < 0 ||
        pos0 + T > n_ctx || (m > 0 && !C) || (sel && (!n_sel || cap < 1)))
        return 1;
    if (m > 0 && !sel && (pos0 + T) / m > n_c) return 1;   /* a closed window without its entry */
    if (sel)
        for (int64_t t = 0; t < T; t++) {
            if (n_sel[t] < 0 || n_sel[t] > cap) return 1;
            for (int64_t j = 0; j < n_sel[t]; j++)
                if (sel[t * cap + j] < 0 || sel[t * cap + j] >= n_c || sel[t * cap + j] >= (pos0 + t + 1) / (m ? m : 1))
                    return 1;
        }
    return 0;
}

/* the compressed entry of the j-th slot of query t (-1: none) */
static inline int64_t entry(const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t m, int64_t t, int64_t p,
                            int64_t j) {
    if (m == 0) return -1;
    if (sel) return j < n_sel[t] ? sel[t * cap + j] : -1;
    return j < (p + 1) / m ? j : -1;
}

int pt_dsv4_attention(const float *q, const float *kv, int64_t n_ctx, const float *C, int64_t n_c, int64_t m,
                      const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t T, int64_t pos0,
                      int64_t n_heads, int64_t hd, int64_t window, float scale, const float *sinks, float *out) {
    if (attn_args(q, kv, n_ctx, C, n_c, m, sel, n_sel, cap, T, pos0, n_heads, hd, window, sinks, out)) return -1;
    for (int64_t t = 0; t < T; t++) {
        const int64_t p = pos0 + t, s0 = p - window + 1 > 0 ? p - window + 1 : 0;
        const int64_t n_e = m == 0 ? 0 : sel ? n_sel[t] : (p + 1) / m;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *qh = q + (t * n_heads + h) * hd;
            float *o = out + (t * n_heads + h) * hd;
            float mx = sinks[h], s = 1.0f;              /* the sink: exp(sink - mx) with mx = sink, no value */
            for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
            for (int64_t j = 0; j < p + 1 - s0 + n_e; j++) {
                const float *k = j < p + 1 - s0 ? kv + (s0 + j) * hd
                                                : C + entry(sel, n_sel, cap, m, t, p, j - (p + 1 - s0)) * hd;
                float l = 0.0f;
                for (int64_t d = 0; d < hd; d++) l += qh[d] * k[d];
                l *= scale;
                if (l > mx) {
                    const float r = expf(mx - l);
                    s *= r;
                    for (int64_t d = 0; d < hd; d++) o[d] *= r;
                    mx = l;
                }
                const float e = expf(l - mx);
                s += e;
                for (int64_t d = 0; d < hd; d++) o[d] += e * k[d];
            }
            for (int64_t d = 0; d < hd; d++) o[d] /= s;
        }
    }
    return 0;
}

int pt_dsv4_attention_ref(const float *q, const float *kv, int64_t n_ctx, const float *C, int64_t n_c, int64_t m,
                          const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t T, int64_t pos0,
                          int64_t n_heads, int64_t hd, int64_t window, float scale, const float *sinks, float *out) {
    if (attn_args(q, kv, n_ctx, C, n_c, m, sel, n_sel, cap, T, pos0, n_heads, hd, window, sinks, out)) return -1;
    for (int64_t t = 0; t < T; t++) {
        const int64_t p = pos0 + t;
        for (int64_t h = 0; h < n_heads; h++) {
            const float *qh = q + (t * n_heads + h) * hd;
            double mx = sinks[h];
            for (int pass = 0; pass < 2; pass++) {       /* pass 0: the maximum; pass 1: the weighted sum */
                double s = pass ? exp((double)sinks[h] - mx) : 0.0, acc[4096];
                if (hd > 4096) return -1;
                for (int64_t d = 0; d < hd; d++) acc[d] = 0.0;
                for (int64_t j = 0; j < n_ctx + n_c; j++) {
                    const float *k;
                    if (j < n_ctx) {
                        if (j > p || p - j >= window) continue;
                        k = kv + j * hd;
                    } else {
                        const int64_t e = j - n_ctx;
                        int seen = 0;
                        if (m > 0 && !sel) seen = e < (p + 1) / m;
                        for (int64_t i = 0; m > 0 && sel && i < n_sel[t]; i++) seen |= sel[t * cap + i] == e;
                        if (!seen) continue;
                        k = C + e * hd;
                    }
                    double l = 0.0;
                    for (int64_t d = 0; d < hd; d++) l += (double)qh[d] * k[d];
                    l *= scale;
                    if (!pass) {
                        if (l > mx) mx = l;
                        continue;
                    }
                    s += exp(l - mx);
                    for (int64_t d = 0; d < hd; d++) acc[d] += exp(l - mx) * k[d];
                }
                if (pass)
                    for (int64_t d = 0; d < hd; d++) out[(t * n_heads + h) * hd + d] = (float)(acc[d] / s);
            }
        }
    }
    return 0;
}
