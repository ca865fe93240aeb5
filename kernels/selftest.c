/* The kernels checked without Python, for a build the Python tests cannot reach: a Windows build (MinGW-w64 run
 * under Wine, or MSVC), an ARM build (run under QEMU, or on an Apple Silicon Mac). tests/test_kernels_portable.py
 * builds and runs it for this machine, for Windows and for ARM64; `cc -O2 -Ikernels kernels/selftest.c
 * kernels/{cpu,parallel,pool,matmul,attention,layer_ops,plan,quant,interleave,checksum,pathcheck,kern_*}.c -lm -lpthread`
 * builds it by hand.
 *
 * What can differ between systems is what it checks: the CPU detection, every SIMD path the CPU has against
 * double-precision sums (matmul, attention, the norms and activations), each SIMD path's GGUF block-type kernels
 * against the scalar path's bit for bit, the thread pool (every thread count gives the same bits as one thread,
 * and a few thousand jobs in a row neither hang nor lose work), the pt64 checksum (the pool's split against the
 * reference), and the compiler's float conversions and rounding (fp16, bf16, q8_0 and q4_0 bytes exactly as GGML's
 * rules give them).
 * It prints one line per check and closes with "N passed, N failed"; the exit code is 0 only when nothing failed. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>

static int n_pass, n_fail;

static void check(int ok, const char *what) {
    if (ok) n_pass++;
    else n_fail++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    fflush(stdout);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float uniform(void) {   /* xorshift64*, in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *random_floats(int64_t n, float scale) {
    float *x = (float *)malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = uniform() * scale;
    return x;
}

/* ---- conversions and weight quantization: exact bytes ---- */

static void check_conversions(void) {
    static const float probe[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, 6.1035156e-05f,
                                  5.9604645e-08f, 2.9802322e-08f, 0.333333343f, 1.00048828f, 1.00146484f};
    static const uint16_t f16[] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7c00, 0x7c00, 0x0400,
                                   0x0001, 0x0000, 0x3555, 0x3c00, 0x3c02};
    int ok = 1;
    for (int i = 0; i < (int)(sizeof(probe) / sizeof(probe[0])); i++) {
        uint16_t h = pt_f2h(probe[i]);
        ok &= h == f16[i];
        if (h != f16[i]) printf("     f16(%.9g) = 0x%04x, expected 0x%04x\n", probe[i], h, f16[i]);
    }
    check(ok, "fp32 -> fp16 rounds to nearest even, overflow to inf, subnormals");
    ok = 1;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;   /* NaN payloads need not round-trip */
        ok &= pt_f2h(pt_h2f((uint16_t)h)) == h;
    }
    check(ok, "fp16 -> fp32 -> fp16 round-trips all 63,490 non-NaN values");
    ok = pt_f2bf(1.00390625f) == 0x3f80 && pt_f2bf(1.01171875f) == 0x3f82 && pt_f2bf(-3.5f) == 0xc060;
    check(ok, "fp32 -> bf16 rounds to nearest even");

    /* q8_0 and q4_0 against GGML's rules, written here in the obvious way */
    enum { ROWS = 3, COLS = 96 };
    float *x = random_floats(ROWS * COLS, 3.0f);
    x[5] = 0.0f;
    for (int j = 64; j < 96; j++) x[j] = 0.0f;   /* an all-zero block */
    uint8_t q8[ROWS * COLS / QK * Q8_BYTES], q4[ROWS * COLS / QK * Q4_BYTES];
    pt_quantize(PT_Q8_0, x, ROWS, COLS, q8);
    pt_quantize(PT_Q4_0, x, ROWS, COLS, q4);
    int ok8 = 1, ok4 = 1;
    for (int b = 0; b < ROWS * COLS / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++)
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        float d8 = amax / 127.0f, id8 = d8 != 0.0f ? 1.0f / d8 : 0.0f;
        float d4 = max / -8.0f, id4 = d4 != 0.0f ? 1.0f / d4 : 0.0f;
        ok8 &= pt_load_u16(q8 + b * Q8_BYTES) == pt_f2h(d8);
        ok4 &= pt_load_u16(q4 + b * Q4_BYTES) == pt_f2h(d4);
        for (int j = 0; j < QK; j++) ok8 &= (int8_t)q8[b * Q8_BYTES + 2 + j] == (int8_t)roundf(xb[j] * id8);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (int)(xb[j] * id4 + 8.5f), hi = (int)(xb[j + QK / 2] * id4 + 8.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            ok4 &= q4[b * Q4_BYTES + 2 + j] == (uint8_t)(lo | (hi << 4));
        }
    }
    check(ok8, "q8_0 bytes: d = amax/127 as fp16, q = roundf(x/d)");
    check(ok4, "q4_0 bytes: d = max/-8 as fp16, nibble = min(15, (int)(x/d + 8.5))");
    free(x);
}

/* ---- matrix products against double-precision sums ---- */

static const char *DTYPE_NAMES[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "interleaved q8_0", "interleaved q4_0"};
static const char *ISA_NAMES[] = {"scalar", "avx2", "avx512vnni", "neon", "avxvnni"};

typedef struct { int64_t rows, cols, T; } shape;
static const shape SHAPES[] = {{1, 32, 1}, {37, 96, 1}, {67, 160, 3}, {129, 288, 5}, {300, 1024, 2}};
#define N_SHAPES ((int)(sizeof(SHAPES) / sizeof(SHAPES[0])))
#define N_THREADS 3   /* 1, 2 and 3 threads */

/* y[T][rows] of one isa and thread count; results[isa][threads-1][dtype][shape] */
static float *results[PT_ISA_COUNT][N_THREADS][7][N_SHAPES];

/* |y - sum| <= 2e-5 * sum|terms| + 1e-6 for every output: float32 rounding of a sum in another order */
static int close_to_reference(const float *y, const float *w, const float *x, const shape *s) {
    for (int64_t t = 0; t < s->T; t++)
        for (int64_t r = 0; r < s->rows; r++) {
            double sum = 0.0, mag = 0.0;
            for (int64_t k = 0; k < s->cols; k++) {
                double p = (double)w[r * s->cols + k] * (double)x[t * s->cols + k];
                sum += p;
                mag += fabs(p);
            }
            double err = fabs((double)y[t * s->rows + r] - sum);
            if (!(err <= 2e-5 * mag + 1e-6)) {
                printf("     row %lld token %lld: %.9g, expected %.9g\n", (long long)r, (long long)t,
                       y[t * s->rows + r], sum);
                return 0;
            }
        }
    return 1;
}

static void check_matmul(int isa, int threads, int32_t dtype, int si) {
    const shape *s = &SHAPES[si];
    rng_state = 0x1234567ull + (uint64_t)si * 7919u + (uint64_t)dtype * 104729u;   /* the same data for every path */
    float *wf = random_floats(s->rows * s->cols, 1.0f), *x = random_floats(s->T * s->cols, 2.0f);
    /* an interleaved matrix is quantized as its plain type, then regrouped in place */
    const int32_t plain = dtype == PT_Q8_0_X8 ? PT_Q8_0 : dtype == PT_Q4_0_X8 ? PT_Q4_0 : dtype;
    int64_t rb = pt_row_bytes(plain, s->cols);
    uint8_t *w = (uint8_t *)malloc((size_t)(rb * s->rows));
    pt_quantize(plain, wf, s->rows, s->cols, w);
    pt_dequantize(plain, w, s->rows, s->cols, wf);   /* the reference uses the weights as stored */
    if (plain != dtype) pt_interleave(plain, w, w, s->rows, s->cols);
    float *xr = x;
    if (plain == PT_Q8_0 || plain == PT_Q4_0) {      /* ... and the activations as the integer kernels see them */
        int64_t nb = s->T * s->cols / QK;
        int8_t *q = (int8_t *)malloc((size_t)(s->T * s->cols));
        float *d = (float *)malloc((size_t)nb * sizeof(float));
        int32_t *sums = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
        pt_quantize_act(x, s->T, s->cols, q, d, sums);
        xr = (float *)malloc((size_t)(s->T * s->cols) * sizeof(float));
        for (int64_t i = 0; i < s->T * s->cols; i++) xr[i] = (float)q[i] * d[i / QK];
        free(q); free(d); free(sums);
    }
    float *y = (float *)malloc((size_t)(s->T * s->rows) * sizeof(float));
    pt_tensor W = {w, dtype, s->rows, s->cols};
    int rc = pt_matmul(&W, x, s->T, y, 0);
    char what[160];
    snprintf(what, sizeof what, "%s %d thread%s: %s matmul %lldx%lld, %lld token%s", ISA_NAMES[isa], threads,
             threads > 1 ? "s" : "", DTYPE_NAMES[dtype], (long long)s->rows, (long long)s->cols, (long long)s->T,
             s->T > 1 ? "s" : "");
    int ok = rc == 0 && close_to_reference(y, wf, xr, s);
    if (threads > 1) {   /* rows are split between threads, never one sum: the same bits as one thread */
        const float *one = results[isa][0][dtype][si];
        ok &= one && memcmp(one, y, (size_t)(s->T * s->rows) * sizeof(float)) == 0;
        if (one && memcmp(one, y, (size_t)(s->T * s->rows) * sizeof(float)) != 0)
            printf("     differs from the 1-thread result\n");
    }
    check(ok, what);
    results[isa][threads - 1][dtype][si] = y;
    if (xr != x) free(xr);
    free(wf); free(x); free(w);
}

/* ---- attention (grouped-query, sliding window, soft-capping) over the f32 KV cache ---- */

static void check_attention(int isa, int threads) {
    enum { NH = 4, NKV = 2, HD = 40, NCTX = 16, T = 7 };
    const int64_t window = 4;
    const float scale = 0.158113883f, softcap = 5.0f;
    rng_state = 0xA77E7710ull;
    float *q = random_floats(T * NH * HD, 2.0f), *k = random_floats(T * NKV * HD, 2.0f);
    float *v = random_floats(T * NKV * HD, 1.0f);
    static float kc[NKV * NCTX * HD], vc[NKV * NCTX * HD], out[T * NH * HD];
    int rc = pt_rope_store(q, k, v, T, NH, NKV, HD, 0, 0, NULL, NULL, 0, 0, kc, vc, NCTX);
    rc |= pt_attention(q, kc, vc, NCTX, T, NH, NKV, HD, 0, scale, softcap, window, 0, out);
    int ok = rc == 0;
    for (int t = 0; t < T && ok; t++)
        for (int h = 0; h < NH && ok; h++) {
            int g = h / (NH / NKV), lo = t - (int)window + 1 < 0 ? 0 : t - (int)window + 1;
            double p[T], z = 0.0, m = -1e300;
            for (int j = lo; j <= t; j++) {
                double sdot = 0.0;
                for (int i = 0; i < HD; i++) sdot += (double)q[(t * NH + h) * HD + i] * kc[(g * NCTX + j) * HD + i];
                p[j] = softcap * tanh(sdot * scale / softcap);
                m = p[j] > m ? p[j] : m;
            }
            for (int j = lo; j <= t; j++) { p[j] = exp(p[j] - m); z += p[j]; }
            for (int i = 0; i < HD && ok; i++) {
                double o = 0.0;
                for (int j = lo; j <= t; j++) o += p[j] / z * vc[(g * NCTX + j) * HD + i];
                if (!(fabs(out[(t * NH + h) * HD + i] - o) <= 2e-5)) {
                    printf("     token %d head %d dim %d: %.9g, expected %.9g\n", t, h, i,
                           out[(t * NH + h) * HD + i], o);
                    ok = 0;
                }
            }
        }
    char what[160];
    snprintf(what, sizeof what, "%s %d thread%s: attention, 4 heads over 2 kv heads, window 4, softcap 5",
             ISA_NAMES[isa], threads, threads > 1 ? "s" : "");
    check(ok, what);
    free(q); free(k); free(v);
}

/* ---- attention over the int8 cache: row p of a kv head is k8[p] * ks[p] ---- */

static void check_attention_q8(int isa, int threads, int hd) {
    enum { NH = 4, NKV = 2, NCTX = 40, T = 3, POS0 = 30, MAXHD = 64 };
    const float scale = 1.0f / sqrtf((float)hd);
    rng_state = 0x1A77E8ull + (uint64_t)hd;
    static int8_t kc[NKV * NCTX * MAXHD], vc[NKV * NCTX * MAXHD];
    static float ks[NKV * NCTX], vs[NKV * NCTX], out[T * NH * MAXHD];
    for (int i = 0; i < NKV * NCTX * hd; i++) {
        kc[i] = (int8_t)(uniform() * 127.0f);
        vc[i] = (int8_t)(uniform() * 127.0f);
    }
    for (int i = 0; i < NKV * NCTX; i++) {
        ks[i] = 0.02f + 0.01f * uniform();
        vs[i] = 0.02f + 0.01f * uniform();
    }
    float *q = random_floats(T * NH * hd, 2.0f);
    int ok = pt_attention_q8(q, kc, ks, vc, vs, NCTX, T, NH, NKV, hd, POS0, scale, 0.0f, 0, 0, out) == 0;
    for (int t = 0; t < T && ok; t++)
        for (int h = 0; h < NH && ok; h++) {
            int g = h / (NH / NKV), n = POS0 + t + 1;
            double p[NCTX], z = 0.0, m = -1e300;
            for (int j = 0; j < n; j++) {
                double sdot = 0.0;
                for (int i = 0; i < hd; i++)
                    sdot += (double)q[(t * NH + h) * hd + i] * kc[(g * NCTX + j) * hd + i] * ks[g * NCTX + j];
                p[j] = sdot * scale;
                m = p[j] > m ? p[j] : m;
            }
            for (int j = 0; j < n; j++) { p[j] = exp(p[j] - m); z += p[j]; }
            for (int i = 0; i < hd && ok; i++) {
                double o = 0.0;
                for (int j = 0; j < n; j++) o += p[j] / z * vc[(g * NCTX + j) * hd + i] * vs[g * NCTX + j];
                if (!(fabs(out[(t * NH + h) * hd + i] - o) <= 2e-5)) {
                    printf("     token %d head %d dim %d: %.9g, expected %.9g\n", t, h, i,
                           out[(t * NH + h) * hd + i], o);
                    ok = 0;
                }
            }
        }
    char what[160];
    snprintf(what, sizeof what, "%s %d thread%s: attention over the int8 cache, head size %d", ISA_NAMES[isa],
             threads, threads > 1 ? "s" : "", hd);
    check(ok, what);
    free(q);
}

/* ---- activations the integer kernels cannot scale: a NaN stays NaN, a block too small to scale is zero ---- */

static void check_unscalable(int isa) {
    enum { K = 96 };
    float x[K], d[K / QK], y[2];
    int8_t q[K];
    int32_t s[K / QK];
    for (int i = 0; i < K; i++) x[i] = 0.5f;
    x[7] = NAN;                                   /* block 0 */
    for (int i = QK; i < 2 * QK; i++) x[i] = 1e-40f;   /* block 1: amax / 127 underflows */
    pt_quantize_act(x, 1, K, q, d, s);
    int ok = isnan(d[0]) && d[1] == 0.0f && s[1] == 0 && d[2] == 0.5f / 127.0f && s[2] == 127 * QK;
    for (int i = QK; i < 2 * QK; i++) ok &= q[i] == 0;
    float wf[2 * K];
    for (int i = 0; i < 2 * K; i++) wf[i] = 1.0f;
    uint8_t w8[2 * K / QK * Q8_BYTES], w4[2 * K / QK * Q4_BYTES];
    pt_quantize(PT_Q8_0, wf, 2, K, w8);
    pt_quantize(PT_Q4_0, wf, 2, K, w4);
    pt_tensor W8 = {w8, PT_Q8_0, 2, K}, W4 = {w4, PT_Q4_0, 2, K};
    ok &= pt_matmul(&W8, x, 1, y, 0) == 0 && isnan(y[0]) && isnan(y[1]);
    ok &= pt_matmul(&W4, x, 1, y, 0) == 0 && isnan(y[0]) && isnan(y[1]);
    char what[128];
    snprintf(what, sizeof what, "%s: a NaN activation gives NaN outputs, a block too small to scale gives zeros",
             ISA_NAMES[isa]);
    check(ok, what);
}

/* ---- norms and activations: each path's own compiled copy against double precision ---- */

static double gelu_tanh_ref(double x) {
    return x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));   /* 0.5 x (1 + tanh u) */
}

static void check_layer_ops(int isa) {
    enum { ROWS = 4, D = 203, N = 2001 };
    rng_state = 0xA11CEull;
    float *x = random_floats(ROWS * D, 3.0f), *w = random_floats(2 * D, 1.0f), *b = random_floats(2 * D, 1.0f);
    float y[ROWS * D];
    int ok = 1;
    for (int kind = 0; kind <= 1; kind++) {
        ok &= pt_norm(kind, x, w, b, 1e-5f, ROWS, D, 2, y) == 0;   /* per-head weights: row r uses w[r % 2] */
        for (int r = 0; r < ROWS; r++) {
            const float *xr = x + r * D, *wr = w + (r % 2) * D, *br = b + (r % 2) * D;
            double mean = 0.0, ss = 0.0;
            if (kind == 1) {
                for (int i = 0; i < D; i++) mean += xr[i];
                mean /= D;
            }
            for (int i = 0; i < D; i++) ss += (xr[i] - mean) * (xr[i] - mean);
            const double inv = 1.0 / sqrt(ss / D + 1e-5);
            for (int i = 0; i < D; i++) {
                double want = (xr[i] - mean) * inv * wr[i] + br[i];
                ok &= fabs(y[r * D + i] - want) <= 2e-5 * (fabs(want) + 1.0);
            }
        }
    }
    float g[N], u[N], out[N];
    for (int i = 0; i < N; i++) { g[i] = -20.0f + 40.0f * (float)i / (N - 1); u[i] = 1.0f; }
    for (int act = 1; act <= 3; act++) {
        ok &= pt_glu(act, g, u, N, out) == 0;
        for (int i = 0; i < N; i++) {
            double v = g[i];
            double want = act == 1 ? v / (1.0 + exp(-v)) : act == 2 ? gelu_tanh_ref(v) : 0.5 * v * erfc(-v / sqrt(2.0));
            /* 3e-6 relative; 2e-5 in the far tail, where the float rounding of x^2 inside e^-x^2 counts */
            ok &= fabs(out[i] - want) <= (fabs(want) >= 1e-6 ? 3e-6 : 2e-5) * fabs(want) + 1e-33;
        }
    }
    char what[128];
    snprintf(what, sizeof what, "%s: LayerNorm, RMSNorm, SiLU and GELU (tanh and erf) against double", ISA_NAMES[isa]);
    check(ok, what);
    free(x); free(w); free(b);
}

/* ---- the pool: many small jobs in a row, thread counts changed between them ---- */

static void check_pool_stress(int isa) {
    enum { ROWS = 512, COLS = 256, JOBS = 3000 };
    rng_state = 0x5EED5EEDull;
    float *wf = random_floats(ROWS * COLS, 1.0f), *x = random_floats(COLS, 1.0f);
    uint8_t *w = (uint8_t *)malloc((size_t)(pt_row_bytes(PT_Q8_0, COLS) * ROWS));
    pt_quantize(PT_Q8_0, wf, ROWS, COLS, w);
    pt_tensor W = {w, PT_Q8_0, ROWS, COLS};
    float first[ROWS], y[ROWS];
    pt_init(1, isa);
    pt_matmul(&W, x, 1, first, 0);
    int ok = 1;
    for (int i = 0; i < JOBS && ok; i++) {
        if (i % 1000 == 0) pt_init(2 + i / 1000 % 2, isa);   /* workers stopped and started again */
        pt_matmul(&W, x, 1, y, 0);
        ok = memcmp(first, y, sizeof y) == 0;
    }
    char what[128];
    snprintf(what, sizeof what, "%s: %d matmuls in a row on 2 and 3 threads, restarted twice: same bits each time",
             ISA_NAMES[isa], JOBS);
    check(ok, what);
    free(wf); free(x); free(w);
}

/* ---- GGUF's block types: each path's kernels against the scalar reference (kern_gguf.h), bit for bit ----
 * Random blocks (any bytes are a valid block once its fp16 scales are finite) of 13 rows, 1 and 3 super-blocks (the
 * 32-value types: 1, 5 and 9 blocks), against 1..9 tokens, over row ranges that start anywhere and end off any
 * multiple of 4 or 8 (so each path's groups of rows and its rows left over), into outputs that hold other values
 * (set anew, and accumulated onto): every float of the output, the untouched ones too, must be the scalar path's. */

static const pt_kernels *const TABLES[PT_ISA_COUNT] = {&pt_kernels_scalar, &pt_kernels_avx2, &pt_kernels_avx512,
                                                       &pt_kernels_neon, &pt_kernels_avxvnni};

static void check_gguf_exact(int isa) {
    static const struct { int32_t type; int bytes, block; int16_t halves[2]; const char *name; } types[] = {
        {12, 144, 256, {0, 2}, "Q4_K"}, {13, 176, 256, {0, 2}, "Q5_K"}, {14, 210, 256, {208, -1}, "Q6_K"},
        {3, 20, 32, {0, 2}, "Q4_1"}, {6, 22, 32, {0, -1}, "Q5_0"}, {7, 24, 32, {0, 2}, "Q5_1"},
        {20, 18, 32, {0, -1}, "IQ4_NL"}, {10, 84, 256, {80, 82}, "Q2_K"}, {11, 110, 256, {108, -1}, "Q3_K"},
        {23, 136, 256, {0, -1}, "IQ4_XS"}};
    enum { R = 13, MAXK = 768, MAXT = 9, LDY = R + 3 };
    static const int ranges[][2] = {{0, 13}, {0, 1}, {3, 5}, {1, 4}, {2, 9}, {5, 12}, {0, 8}, {4, 13}};
    static uint8_t w[R * MAXK];     /* at least R rows of the largest type's bytes per value (Q6_K: 210 / 256) */
    static int8_t q[MAXT * MAXK];
    static float d[MAXT * MAXK / QK], y0[MAXT * LDY], y[MAXT * LDY], y_ref[MAXT * LDY];
    static int32_t sums[MAXT * MAXK / QK];
    static int16_t hs[MAXT * MAXK / 16];
    static uint8_t fs[MAXT * MAXK / 256];
    const pt_kernels *k = TABLES[isa], *s = &pt_kernels_scalar;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        rng_state = 0x66F7ull + ti * 31337u;
        const int super = types[ti].block == 256;
        int ok = 1, calls = 0;
        for (int ki = 0; ki < 3 && ok; ki++) {
            const int64_t K = super ? (ki == 0 ? 256 : 768) : (ki == 0 ? 32 : ki == 1 ? 160 : 288);
            if (super && ki == 2) break;
            const int64_t rb = pt_gguf_row_bytes(types[ti].type, K), nblk = R * K / types[ti].block;
            for (int64_t i = 0; i < R * rb; i++) w[i] = (uint8_t)(uniform() * 127.0f + 128.0f);
            for (int64_t blk = 0; blk < nblk; blk++)     /* scales of any size, some of them 0 or negative */
                for (int h = 0; h < 2; h++)
                    if (types[ti].halves[h] >= 0) {
                        const float u = uniform();
                        const uint16_t v = pt_f2h(u * ldexpf(1.0f, (int)(uniform() * 8.0f) - 6));
                        memcpy(w + blk * types[ti].bytes + types[ti].halves[h], &v, 2);
                    }
            float *x = random_floats(MAXT * K, 3.0f);
            for (int64_t i = 0; i < K; i++) x[2 * K + i] *= 40.0f;     /* one token of large values */
            const int kq8 = PT_KQ8(types[ti].type);     /* the activations each type's products take */
            for (int64_t t = 0; t < MAXT; t++) {
                if (kq8) {
                    pt_quant_act_k(x + t * K, K, q + t * K, d + t * (K / QK), sums + t * (K / QK), hs + t * (K / 16));
                    pt_q6_flags(q + t * K, K, fs + t * (K / 256));
                } else s->quant_act(x + t * K, K, q + t * K, d + t * (K / QK), sums + t * (K / QK));
            }
            free(x);
            const pt_act a = {q, d, sums, K, kq8 ? hs : NULL, kq8 ? fs : NULL};
            for (int i = 0; i < MAXT * LDY; i++) y0[i] = uniform() * 10.0f;
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0] && ok; ri++)
                for (int T = 1; T <= MAXT && ok; T++)
                    for (int acc = 0; acc < 2 && ok; acc++) {
                        memcpy(y, y0, sizeof y);
                        memcpy(y_ref, y0, sizeof y_ref);
                        k->rows_gguf(types[ti].type, w, rb, ranges[ri][0], ranges[ri][1], &a, T, y, LDY, acc);
                        s->rows_gguf(types[ti].type, w, rb, ranges[ri][0], ranges[ri][1], &a, T, y_ref, LDY, acc);
                        calls++;
                        if (memcmp(y, y_ref, sizeof y) != 0) {
                            ok = 0;
                            for (int i = 0; i < MAXT * LDY; i++)
                                if (memcmp(y + i, y_ref + i, sizeof(float)) != 0) {
                                    printf("     K %lld rows %d..%d, %d tokens%s: token %d row %d: %.9g, "
                                           "expected %.9g\n", (long long)K, ranges[ri][0], ranges[ri][1], T,
                                           acc ? ", accumulated" : "", i / LDY, i % LDY, y[i], y_ref[i]);
                                    break;
                                }
                        }
                    }
        }
        char what[200];
        snprintf(what, sizeof what, "%s: GGUF %s rows equal the scalar path's bit for bit (%d calls)", ISA_NAMES[isa],
                 types[ti].name, calls);
        check(ok, what);
    }
}

/* ---- the pt64 checksum: the pool's split against the one-word-at-a-time reference, and damage found ---- */

static void check_checksum(void) {
    enum { N = 3 * 524288 + 45 };     /* several of the pool's 512 KB chunks, and a partial last stripe */
    uint8_t *buf = (uint8_t *)malloc(N);
    rng_state = 0xC0FFEEull;
    for (int i = 0; i < N; i++) buf[i] = (uint8_t)(uniform() * 127.0f + 128.0f);
    static const int64_t lens[] = {0, 1, 7, 8, 63, 64, 65, 1000, N};
    int ok = 1;
    for (int threads = 1; threads <= 3; threads++) {
        pt_init(threads, -1);
        for (int i = 0; i < (int)(sizeof lens / sizeof lens[0]); i++)
            ok &= pt_checksum(buf, lens[i]) == pt_checksum_ref(buf, lens[i]);
    }
    check(ok, "pt64 checksum on 1, 2 and 3 threads equals the one-word-at-a-time reference");
    const uint64_t whole = pt_checksum(buf, N);
    ok = 1;
    for (int64_t at = 0; at < N; at += 99991) {
        buf[at] ^= 0x10;
        ok &= pt_checksum(buf, N) != whole;
        buf[at] ^= 0x10;
    }
    uint8_t stripe[64];
    memcpy(stripe, buf + 64, 64);             /* two 64-byte stripes swapped */
    memmove(buf + 64, buf + 128, 64);
    memcpy(buf + 128, stripe, 64);
    ok &= pt_checksum(buf, N) != whole && pt_checksum(buf, N - 1) != pt_checksum(buf, N);
    check(ok, "pt64 checksum changes with a flipped bit, swapped stripes or a byte less");
    free(buf);
}

int main(void) {
    char features[256];
    pt_cpu_features(features, sizeof features);
    printf("cpu features: %s\n", features[0] ? features : "(none detected)");
    printf("cpus: %d\n", pt_default_threads());
    check(pt_default_threads() >= 1, "at least one CPU is counted");
    check(pt_isa_supported(PT_ISA_SCALAR) && pt_init(0, -1) == 0, "the best path starts on every CPU");
    check(pt_init(1, PT_ISA_COUNT) == -1 && pt_init(1000, PT_ISA_SCALAR) == -2, "a bad path or thread count is refused");
    check_conversions();
    check_checksum();
    for (int isa = 0; isa < PT_ISA_COUNT; isa++) {
        if (!pt_isa_supported(isa)) {
            printf("skip %s: this CPU (or build) has no such path\n", ISA_NAMES[isa]);
            continue;
        }
        for (int threads = 1; threads <= N_THREADS; threads++) {
            if (pt_init(threads, isa) != 0 || pt_isa() != isa || pt_n_threads() != threads) {
                check(0, "pt_init starts the path and the threads asked for");
                continue;
            }
            for (int32_t dtype = PT_F32; dtype <= PT_Q4_0_X8; dtype++)
                for (int si = 0; si < N_SHAPES; si++) check_matmul(isa, threads, dtype, si);
            check_attention(isa, threads);
            check_attention_q8(isa, threads, 64);   /* the SIMD paths' own loop */
            check_attention_q8(isa, threads, 40);   /* a head size they hand to the generic loop */
        }
        pt_init(1, isa);
        char why[400], what[500];
        pt_path_warning(why, sizeof why);
        snprintf(what, sizeof what, "the %s path agrees with the scalar one in the start-up check%s%s", ISA_NAMES[isa],
                 why[0] ? ": " : "", why);
        check(why[0] == 0 && pt_isa() == isa, what);
        check_unscalable(isa);
        check_layer_ops(isa);
        check_pool_stress(isa);
        if (isa != PT_ISA_SCALAR) check_gguf_exact(isa);
    }
    pt_pool_stop();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
