/* Public entry points: CPU detection and the choice of path, and the parallel drivers for matmul and the
 * per-layer ops. Every entry point that uses the pool or the shared scratch holds `lock`, so concurrent callers
 * from several Python threads (the GIL is released) are serialised instead of corrupting the pool. */
#define _GNU_SOURCE
#include "internal.h"
#include "portable.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* the active path: switched by pt_init under `lock`, read by calls that do not take it, hence atomic */
static _Atomic(const pt_kernels *) active = &pt_kernels_scalar;
static atomic_int active_isa = PT_ISA_SCALAR;
static pt_mutex lock = PT_MUTEX_INIT;

const pt_kernels *pt_active(void) { return atomic_load_explicit(&active, memory_order_acquire); }

/* ---- CPU features ---- */
#ifdef PT_X86_64
/* CPU features from cpuid, and whether the OS saves the AVX (and AVX-512) registers (xgetbv): the same answer with
 * gcc, clang and MSVC, which do not share a __builtin_cpu_supports */
enum { F_SSE42, F_AVX, F_AVX2, F_FMA, F_F16C, F_AVX512F, F_AVX512BW, F_AVX512VL, F_AVX512VNNI, F_AVX512BF16, F_N };

static void cpu_features(int has[F_N]) {
    unsigned r[4];
    for (int i = 0; i < F_N; i++) has[i] = 0;
    if (!pt_cpuid(1, 0, r)) return;
    unsigned c = r[2];
    unsigned long long xcr0 = (c >> 27) & 1 ? pt_xgetbv0() : 0;   /* OSXSAVE: the OS manages the vector state */
    int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    has[F_SSE42] = (c >> 20) & 1;
    has[F_AVX] = os_avx && ((c >> 28) & 1);
    has[F_FMA] = os_avx && ((c >> 12) & 1);
    has[F_F16C] = os_avx && ((c >> 29) & 1);
    if (pt_cpuid(7, 0, r)) {
        unsigned b7 = r[1], c7 = r[2];
        has[F_AVX2] = os_avx && ((b7 >> 5) & 1);
        has[F_AVX512F] = os_avx512 && ((b7 >> 16) & 1);
        has[F_AVX512BW] = os_avx512 && ((b7 >> 30) & 1);
        has[F_AVX512VL] = os_avx512 && ((b7 >> 31) & 1);
        has[F_AVX512VNNI] = os_avx512 && ((c7 >> 11) & 1);
        if (pt_cpuid(7, 1, r)) has[F_AVX512BF16] = os_avx512 && ((r[0] >> 5) & 1);
    }
}
#endif

int pt_isa_supported(int isa) {
    if (isa == PT_ISA_SCALAR) return 1;
    if (isa == PT_ISA_NEON) return pt_kernels_neon.name != 0;   /* every ARMv8-A CPU has NEON */
#ifdef PT_X86_64
    int has[F_N];
    cpu_features(has);
    int avx2 = has[F_AVX2] && has[F_FMA] && has[F_F16C];
    if (isa == PT_ISA_AVX2) return avx2 && pt_kernels_avx2.name != 0;
    if (isa == PT_ISA_AVX512)
        return avx2 && has[F_AVX512F] && has[F_AVX512BW] && has[F_AVX512VL] && has[F_AVX512VNNI] &&
               pt_kernels_avx512.name != 0;
#endif
    return 0;
}

int pt_cpu_features(char *buf, int n) {
    int len = 0;
    if (n > 0) buf[0] = 0;
#ifdef PT_X86_64
    static const char *names[F_N] = {"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                     "avx512vnni", "avx512bf16"};
    int has[F_N];
    cpu_features(has);
    for (int i = 0; i < F_N; i++) {
        if (!has[i]) continue;
        int w = snprintf(buf + len, n > len ? (size_t)(n - len) : 0, "%s%s", len ? "," : "", names[i]);
        if (w > 0) len += w;
    }
#elif defined(__aarch64__) && defined(__ARM_NEON)
    len = snprintf(buf, n > 0 ? (size_t)n : 0, "neon");
#ifdef __ARM_FEATURE_DOTPROD
    if (len > 0) len += snprintf(buf + len, n > len ? (size_t)(n - len) : 0, ",dotprod");
#endif
#endif
    return len < n ? len : (n > 0 ? n - 1 : 0);
}

int pt_default_threads(void) { return pt_cpu_count(); }

#ifndef _WIN32                   /* fork(): a child must not inherit the lock held, nor workers it does not have */
static void atfork_prepare(void) { pt_mutex_lock(&lock); }
static void atfork_parent(void) { pt_mutex_unlock(&lock); }
static void atfork_child(void) {
    pt_mutex_reset(&lock);
    pt_pool_after_fork_child();
}
#endif

int pt_init(int n_threads, int isa) {
#ifndef _WIN32
    static int atfork_done = 0;
    if (!atfork_done) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_done = 1;
    }
#endif
    if (isa < -1 || isa >= PT_ISA_COUNT) return -1;
    if (isa == -1) isa = pt_isa_supported(PT_ISA_AVX512) ? PT_ISA_AVX512
                       : pt_isa_supported(PT_ISA_AVX2)  ? PT_ISA_AVX2
                       : pt_isa_supported(PT_ISA_NEON)  ? PT_ISA_NEON : PT_ISA_SCALAR;
    if (!pt_isa_supported(isa)) return -1;
    if (n_threads <= 0) n_threads = pt_default_threads() < 64 ? pt_default_threads() : 64;
    if (n_threads > 256) return -2;
    static const pt_kernels *tables[PT_ISA_COUNT] = {&pt_kernels_scalar, &pt_kernels_avx2, &pt_kernels_avx512,
                                                     &pt_kernels_neon};
    pt_mutex_lock(&lock);
    const int old = pt_pool_threads();
    int rc = old == n_threads ? 0 : pt_pool_start(n_threads);
    if (rc != 0) {
        /* the new pool did not start (it stopped what it had started): the previous pool and path stay, so a
         * failed configure leaves the kernels as they were */
        if (pt_pool_start(old) != 0) pt_pool_start(1);   /* one thread always starts: it is the caller */
    } else {
        atomic_store_explicit(&active, tables[isa], memory_order_release);
        atomic_store(&active_isa, isa);
    }
    pt_mutex_unlock(&lock);
    return rc == 0 ? 0 : -2;
}

int pt_isa(void) { return atomic_load(&active_isa); }
int pt_n_threads(void) { return pt_pool_threads(); }

/* ---- activation scratch, grown on demand (guarded by lock) ---- */
static struct { int8_t *q; float *d; int32_t *s; int64_t cap; } act;

static int act_reserve(int64_t n) {
    if (act.cap >= n) return 0;
    free(act.q); free(act.d); free(act.s);
    act.q = (int8_t *)malloc((size_t)n);
    act.d = (float *)malloc((size_t)(n / QK + 1) * sizeof(float));
    act.s = (int32_t *)malloc((size_t)(n / QK + 1) * sizeof(int32_t));
    act.cap = act.q && act.d && act.s ? n : 0;
    return act.cap ? 0 : -1;
}

void pt_quantize_act(const float *x, int64_t T, int64_t K, int8_t *q, float *d, int32_t *s) {
    const pt_kernels *k = pt_active();
    for (int64_t t = 0; t < T; t++) k->quant_act(x + t * K, K, q + t * K, d + t * (K / QK), s + t * (K / QK));
}

typedef struct { const float *x; int64_t K; const pt_kernels *k; } quant_job;

static void quant_task(void *ctx, int64_t t, int ith) {
    (void)ith;
    quant_job *j = (quant_job *)ctx;
    j->k->quant_act(j->x + t * j->K, j->K, act.q + t * j->K, act.d + t * (j->K / QK), act.s + t * (j->K / QK));
}

/* ---- matmul ---- */
#define SERIAL_MACS 65536.0     /* below this many multiply-adds a matmul runs on the calling thread alone */
#define MAX_MATS 3
typedef struct {
    const pt_tensor *W[MAX_MATS];
    float *y[MAX_MATS];
    int64_t end[MAX_MATS];      /* cumulative chunk counts */
    int n;
    int64_t rows_per_chunk;
    const float *x;
    pt_act a;
    int64_t T;
    int accumulate;
    const pt_kernels *k;        /* the path, read once for the whole call */
} matmul_job;

static void matmul_task(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    matmul_job *j = (matmul_job *)ctx;
    int m = 0;
    while (chunk >= j->end[m]) m++;
    const pt_tensor *W = j->W[m];
    int64_t first = m ? j->end[m - 1] : 0;
    int64_t r0 = (chunk - first) * j->rows_per_chunk, r1 = r0 + j->rows_per_chunk;
    if (r1 > W->rows) r1 = W->rows;
    int64_t rb = pt_row_bytes(W->dtype, W->cols);
    if (W->dtype == PT_Q8_0)
        j->k->rows_q8((const uint8_t *)W->data, rb, r0, r1, &j->a, j->T, j->y[m], W->rows, j->accumulate);
    else if (W->dtype == PT_Q4_0)
        j->k->rows_q4((const uint8_t *)W->data, rb, r0, r1, &j->a, j->T, j->y[m], W->rows, j->accumulate);
    else
        j->k->rows_float(W->data, W->dtype, W->cols, r0, r1, j->x, j->T, j->y[m], W->rows, j->accumulate);
}

static int matmul_n(const pt_tensor **W, float **y, int n, const float *x, int64_t T, int accumulate) {
    if (T <= 0) return 0;
    int quantized = 0;
    for (int m = 0; m < n; m++) {
        if (!W[m] || !y[m] || W[m]->cols != W[0]->cols || W[m]->rows <= 0) return -1;
        if (pt_row_bytes(W[m]->dtype, W[m]->cols) < 0) return -1;
        quantized |= W[m]->dtype == PT_Q8_0 || W[m]->dtype == PT_Q4_0;
    }
    const int64_t K = W[0]->cols;
    pt_mutex_lock(&lock);
    matmul_job j = {.n = n, .x = x, .T = T, .accumulate = accumulate, .k = pt_active()};
    if (quantized) {
        if (act_reserve(T * K) < 0) { pt_mutex_unlock(&lock); return -3; }
        quant_job qj = {x, K, j.k};
        if ((double)T * (double)K < SERIAL_MACS)
            for (int64_t t = 0; t < T; t++) quant_task(&qj, t, 0);
        else pt_pool_run(quant_task, &qj, T);
        j.a = (pt_act){act.q, act.d, act.s, K};
    }
    /* chunks: small enough that 2-8 threads balance, big enough that a chunk streams a few KB at least */
    int64_t total_rows = 0;
    for (int m = 0; m < n; m++) total_rows += W[m]->rows;
    int64_t target = (int64_t)pt_pool_threads() * 16;
    int64_t rpc = total_rows / (target > 0 ? target : 1);
    rpc = rpc < 4 ? 4 : (rpc > 256 ? 256 : rpc);
    if (T > 1 && rpc > 32) rpc = 32;
    j.rows_per_chunk = rpc;
    int64_t chunks = 0;
    for (int m = 0; m < n; m++) {
        j.W[m] = W[m];
        j.y[m] = y[m];
        chunks += (W[m]->rows + rpc - 1) / rpc;
        j.end[m] = chunks;
    }
    if ((double)total_rows * (double)K * (double)T < SERIAL_MACS) {    /* too small to pay for a hand-off */
        for (int64_t c = 0; c < chunks; c++) matmul_task(&j, c, 0);
    } else {
        pt_pool_run(matmul_task, &j, chunks);
    }
    pt_mutex_unlock(&lock);
    return 0;
}

int pt_matmul(const pt_tensor *W, const float *x, int64_t T, float *y, int accumulate) {
    const pt_tensor *Ws[1] = {W};
    float *ys[1] = {y};
    return matmul_n(Ws, ys, 1, x, T, accumulate != 0);
}

int pt_matmul3(const pt_tensor *W0, const pt_tensor *W1, const pt_tensor *W2, const float *x, int64_t T,
               float *y0, float *y1, float *y2) {
    const pt_tensor *Ws[3] = {W0, W1, W2};
    float *ys[3] = {y0, y1, y2};
    return matmul_n(Ws, ys, W2 ? 3 : 2, x, T, 0);
}

/* ---- row-wise work (weight quantization): independent rows in chunks ---- */
#define ROW_CHUNK_VALUES 65536  /* values per chunk; fewer than two chunks run on the calling thread */
typedef struct { void (*fn)(void *, int64_t, int64_t); void *ctx; int64_t rows, per; } rows_task_job;

static void rows_task(void *ctx, int64_t chunk, int ith) {
    (void)ith;
    const rows_task_job *j = (const rows_task_job *)ctx;
    int64_t r0 = chunk * j->per, r1 = r0 + j->per < j->rows ? r0 + j->per : j->rows;
    j->fn(j->ctx, r0, r1);
}

void pt_run_rows(void (*fn)(void *ctx, int64_t r0, int64_t r1), void *ctx, int64_t rows, int64_t cols) {
    int64_t per = cols > 0 && cols < ROW_CHUNK_VALUES ? ROW_CHUNK_VALUES / cols : 1;
    int64_t chunks = (rows + per - 1) / per;
    if (chunks < 2) {
        if (rows > 0) fn(ctx, 0, rows);
        return;
    }
    rows_task_job j = {fn, ctx, rows, per};
    pt_mutex_lock(&lock);
    pt_pool_run(rows_task, &j, chunks);
    pt_mutex_unlock(&lock);
}

/* ---- per-layer ops ---- */
void pt_rmsnorm(const float *x, const float *w, float eps, int64_t T, int64_t D, float *y) {
    const pt_kernels *k = pt_active();
    for (int64_t t = 0; t < T; t++) k->rmsnorm(x + t * D, w, eps, D, y + t * D);
}

void pt_rope_table(float base, int64_t head_dim, int64_t n_pos, float *cos_out, float *sin_out) {
    const int64_t half = head_dim / 2;
    for (int64_t j = 0; j < half; j++) {
        /* inverse frequency in float32 as Hugging Face computes it, the angle in double */
        float inv_freq = (float)(1.0 / pow((double)base, (double)(2 * j) / (double)head_dim));
        for (int64_t p = 0; p < n_pos; p++) {
            float ang = (float)p * inv_freq;
            cos_out[p * half + j] = cosf(ang);
            sin_out[p * half + j] = sinf(ang);
        }
    }
}

static void rope_vec(float *x, int64_t hd, const float *c, const float *s, int interleaved) {
    const int64_t half = hd / 2;
    if (interleaved) {
        for (int64_t j = 0; j < half; j++) {
            float a = x[2 * j], b = x[2 * j + 1];
            x[2 * j] = a * c[j] - b * s[j];
            x[2 * j + 1] = a * s[j] + b * c[j];
        }
    } else {
        for (int64_t j = 0; j < half; j++) {
            float a = x[j], b = x[j + half];
            x[j] = a * c[j] - b * s[j];
            x[j + half] = b * c[j] + a * s[j];
        }
    }
}

/* rotate the first rot_dim values of each head (all of them when rot_dim == head_dim; none for rot_dim 0 or a
 * NULL table: a layer without RoPE) */
static int rope_args_ok(int64_t T, int64_t head_dim, int64_t rot_dim, int64_t pos0, int64_t n_pos, int64_t n_ctx,
                        const float *cos_tab) {
    if (pos0 < 0 || pos0 + T > n_ctx || rot_dim < 0 || rot_dim > head_dim || rot_dim % 2) return 0;
    return !(cos_tab && rot_dim && pos0 + T > n_pos);
}

int pt_rope_store(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                  int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                  int64_t n_pos, int interleaved, float *k_cache, float *v_cache, int64_t n_ctx) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, n_ctx, cos_tab)) return -1;
    const int rotate = cos_tab && rot_dim;
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = pos0 + t;
        const float *c = rotate ? cos_tab + pos * half : 0, *s = rotate ? sin_tab + pos * half : 0;
        if (rotate)
            for (int64_t h = 0; h < n_heads; h++) rope_vec(q + (t * n_heads + h) * head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            float *kc = k_cache + (h * n_ctx + pos) * head_dim, *vc = v_cache + (h * n_ctx + pos) * head_dim;
            memcpy(kc, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            memcpy(vc, v + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(kc, rot_dim, c, s, interleaved);
        }
    }
    return 0;
}

/* one row of an int8 cache: q = round(x * 127 / amax), scale = amax / 127 */
static void quant_row_i8(const float *x, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!isfinite(id)) { d = 0.0f; id = 0.0f; }
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)lrintf(x[i] * id);
    *scale = d;
}

int pt_rope_store_q8(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                     int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                     int64_t n_pos, int interleaved, int8_t *k_cache, float *k_scale, int8_t *v_cache,
                     float *v_scale, int64_t n_ctx) {
    if (!rope_args_ok(T, head_dim, rot_dim, pos0, n_pos, n_ctx, cos_tab) || head_dim > 1024) return -1;
    const int rotate = cos_tab && rot_dim;
    const int64_t half = rot_dim / 2;
    float row[1024];
    for (int64_t t = 0; t < T; t++) {
        const int64_t pos = pos0 + t;
        const float *c = rotate ? cos_tab + pos * half : 0, *s = rotate ? sin_tab + pos * half : 0;
        if (rotate)
            for (int64_t h = 0; h < n_heads; h++) rope_vec(q + (t * n_heads + h) * head_dim, rot_dim, c, s, interleaved);
        for (int64_t h = 0; h < n_kv; h++) {
            const int64_t at = h * n_ctx + pos;
            memcpy(row, k + (t * n_kv + h) * head_dim, (size_t)head_dim * sizeof(float));
            if (rotate) rope_vec(row, rot_dim, c, s, interleaved);
            quant_row_i8(row, head_dim, k_cache + at * head_dim, k_scale + at);
            quant_row_i8(v + (t * n_kv + h) * head_dim, head_dim, v_cache + at * head_dim, v_scale + at);
        }
    }
    return 0;
}

typedef struct {
    const float *q, *kc, *vc;
    float *out;
    int64_t n_ctx, n_heads, n_kv, hd, pos0, items_per_chunk, n_items, window;
    float scale, softcap;
    const int8_t *kq, *vq;      /* the int8 cache, when kc / vc are NULL */
    const float *ks, *vs;
    const pt_kernels *k;
} attn_job;

static void attn_task(void *ctx, int64_t chunk, int ith) {
    attn_job *j = (attn_job *)ctx;
    const int64_t group = j->n_heads / j->n_kv;
    for (int64_t it = chunk * j->items_per_chunk; it < (chunk + 1) * j->items_per_chunk && it < j->n_items; it++) {
        const int64_t t = it / j->n_heads, h = it % j->n_heads, kvh = h / group, seen = j->pos0 + t + 1;
        /* a sliding window of w positions: the query and the w - 1 before it */
        const int64_t n = j->window > 0 && j->window < seen ? j->window : seen, first = seen - n;
        float *scores = pt_scratch(ith, n);
        const int64_t row = kvh * j->n_ctx + first, off = row * j->hd;
        if (j->kc)
            j->k->attn_head(j->q + it * j->hd, j->kc + off, j->vc + off, n, j->hd, j->scale, j->softcap, scores,
                            j->out + it * j->hd);
        else
            j->k->attn_head_q8(j->q + it * j->hd, j->kq + off, j->ks + row, j->vq + off, j->vs + row, n, j->hd,
                               j->scale, j->softcap, scores, j->out + it * j->hd);
    }
}

static int run_attention(attn_job *j, int64_t T, int64_t pos0) {
    if (j->n_kv <= 0 || j->n_heads % j->n_kv || pos0 < 0 || pos0 + T > j->n_ctx || j->window < 0) return -1;
    pt_mutex_lock(&lock);
    j->k = pt_active();
    /* scratch first, on this thread's slot set, so a task never meets a failed allocation */
    for (int i = 0; i < pt_pool_threads(); i++) {
        if (!pt_scratch(i, pos0 + T)) { pt_mutex_unlock(&lock); return -3; }
    }
    int64_t target = (int64_t)pt_pool_threads() * 8;
    j->items_per_chunk = j->n_items / target > 1 ? j->n_items / target : 1;
    int64_t chunks = (j->n_items + j->items_per_chunk - 1) / j->items_per_chunk;
    /* work ~ query heads x positions x head_dim, twice (scores and values) */
    if ((double)j->n_items * (double)(pos0 + T) * (double)j->hd * 2.0 < SERIAL_MACS) {
        for (int64_t c = 0; c < chunks; c++) attn_task(j, c, 0);
    } else {
        pt_pool_run(attn_task, j, chunks);
    }
    pt_mutex_unlock(&lock);
    return 0;
}

int pt_attention(const float *q, const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T,
                 int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t pos0, float scale, float softcap,
                 int64_t window, float *out) {
    attn_job j = {.q = q, .kc = k_cache, .vc = v_cache, .out = out, .n_ctx = n_ctx, .n_heads = n_heads,
                  .n_kv = n_kv, .hd = head_dim, .pos0 = pos0, .n_items = T * n_heads, .scale = scale,
                  .softcap = softcap, .window = window};
    return run_attention(&j, T, pos0);
}

int pt_attention_q8(const float *q, const int8_t *k_cache, const float *k_scale, const int8_t *v_cache,
                    const float *v_scale, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                    int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window, float *out) {
    attn_job j = {.q = q, .out = out, .n_ctx = n_ctx, .n_heads = n_heads, .n_kv = n_kv, .hd = head_dim,
                  .pos0 = pos0, .n_items = T * n_heads, .scale = scale, .softcap = softcap, .window = window,
                  .kq = k_cache, .vq = v_cache, .ks = k_scale, .vs = v_scale};
    return run_attention(&j, T, pos0);
}

void pt_swiglu(const float *gate, const float *up, int64_t n, float *out) { pt_active()->swiglu(gate, up, n, out); }

void pt_softmax(float *x, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++, x += cols) {
        float m = -INFINITY, sum = 0.0f;
        for (int64_t i = 0; i < cols; i++) m = x[i] > m ? x[i] : m;
        for (int64_t i = 0; i < cols; i++) { x[i] = expf(x[i] - m); sum += x[i]; }
        for (int64_t i = 0; i < cols; i++) x[i] /= sum;
    }
}

void pt_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

int64_t pt_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return n > 0 ? best : -1;
}
