/* issue 30, the dsv4 group: DeepSeek-V4's KV compressor, the pooling of a window of m tokens into one entry.
 *
 * Heavily compressed attention (overlap 0): kv, gate [n_win * m][d], ape [m][d]; entry w, channel c:
 *     sum over the window's m slots i of softmax_i(gate[w m + i][c] + ape[i][c]) kv[w m + i][c].
 * Compressed sparse attention and its indexer (overlap 1): kv, gate [n_win * m][2 d], ape [m][2 d]; entry w pools
 * 2 m slots: the previous window's tokens' first d channels (gate + ape's first d), then this window's tokens'
 * last d channels. For window 0 the previous window is prev_kv / prev_gate [m][d] (its gate with ape already
 * added: the state a cache keeps of the last window it pooled), or none (NULL: those slots weigh 0).
 * The kv norm and RoPE of the entries are the engine's existing kernels. out [n_win][d]; -1 on a bad argument.
 * pt_dsv4_pool_ref: the plain scalar reference (double, two passes); pt_dsv4_pool: one pass with a running
 * maximum. */
#include "internal.h"

#include <math.h>

static int pool_args(const float *kv, const float *gate, const float *ape, int64_t n_win, int64_t m, int64_t d,
                     int overlap, const float *prev_kv, const float *prev_gate, const float *out) {
    return !kv || !gate || !ape || !out || n_win < 0 || m < 1 || d < 1 || (overlap != 0 && overlap != 1) ||
           (!prev_kv) != (!prev_gate);
}

int pt_dsv4_pool(const float *kv, const float *gate, const float *ape, int64_t n_win, int64_t m, int64_t d,
                 int overlap, const float *prev_kv, const float *prev_gate, float *out) {
    if (pool_args(kv, gate, ape, n_win, m, d, overlap, prev_kv, prev_gate, out)) return -1;
    const int64_t W = overlap ? 2 * d : d, off = overlap ? d : 0;
    for (int64_t w = 0; w < n_win; w++) {
        for (int64_t c = 0; c < d; c++) {
            float mx = -INFINITY, s = 0.0f, acc = 0.0f;
            for (int64_t part = overlap ? 0 : 1; part < 2; part++) {
                for (int64_t i = 0; i < m; i++) {
                    float g, v;
                    if (part == 1) {                    /* this window's slot i, channels off.. */
                        const int64_t r = w * m + i;
                        g = gate[r * W + off + c] + ape[i * W + off + c];
                        v = kv[r * W + off + c];
                    } else if (w > 0) {                 /* the previous window's slot i, the first d channels */
                        const int64_t r = (w - 1) * m + i;
                        g = gate[r * W + c] + ape[i * W + c];
                        v = kv[r * W + c];
                    } else if (prev_kv) {
                        g = prev_gate[i * d + c];
                        v = prev_kv[i * d + c];
                    } else {
                        continue;
                    }
                    if (g > mx) {                       /* rescale what is summed so far to the new maximum */
                        const float r = expf(mx - g);
                        s *= r;
                        acc *= r;
                        mx = g;
                    }
                    const float e = expf(g - mx);
                    s += e;
                    acc += e * v;
                }
            }
            out[w * d + c] = acc / s;
        }
    }
    return 0;
}

int pt_dsv4_pool_ref(const float *kv, const float *gate, const float *ape, int64_t n_win, int64_t m, int64_t d,
                     int overlap, const float *prev_kv, const float *prev_gate, float *out) {
    if (pool_args(kv, gate, ape, n_win, m, d, overlap, prev_kv, prev_gate, out)) return -1;
    const int64_t W = overlap ? 2 * d : d;
    for (int64_t w = 0; w < n_win; w++)
        for (int64_t c = 0; c < d; c++) {
            double g[2 * 4096], v[2 * 4096];
            int64_t n = 0;
            if (m > 4096) return -1;
            if (overlap && (w > 0 || prev_kv))
                for (int64_t i = 0; i < m; i++, n++) {
                    const int64_t r = (w - 1) * m + i;
                    g[n] = w > 0 ? (double)gate[r * W + c] + ape[i * W + c] : prev_gate[i * d + c];
                    v[n] = w > 0 ? kv[r * W + c] : prev_kv[i * d + c];
                }
            for (int64_t i = 0; i < m; i++, n++) {
                const int64_t r = w * m + i, cc = overlap ? d + c : c;
                g[n] = (double)gate[r * W + cc] + ape[i * W + cc];
                v[n] = kv[r * W + cc];
            }
            double mx = g[0], s = 0.0, acc = 0.0;
            for (int64_t j = 1; j < n; j++) mx = g[j] > mx ? g[j] : mx;
            for (int64_t j = 0; j < n; j++) s += exp(g[j] - mx);
            for (int64_t j = 0; j < n; j++) acc += exp(g[j] - mx) / s * v[j];
            out[w * d + c] = (float)acc;
        }
    return 0;
}
