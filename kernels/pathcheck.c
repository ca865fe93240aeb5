/* The start-up check of a SIMD path against the scalar one. A path this machine's developers could not run (AVX-512
 * on an AVX2 laptop, NEON on an x86 build machine) must still be safe where it runs: before pt_init makes a path
 * active, every kernel of its table is run on small odd-sized inputs next to the scalar table's, and a path that
 * disagrees beyond rounding is not used (cpu.c falls back to the next path and keeps the message for a warning).
 * The sizes reach each kernel's special cases: the tail of a row, a prefill tile of tokens and the tokens left
 * after it, accumulation into the output, both norms, every activation, a block of attention with and without soft-capping,
 * the delta rule, the SSD scan and Mamba-1's selective scan, each chunked and a token at a time. */
#include "internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 45          /* 5 groups of 8 and 5 plain rows: an odd last group, as AVX-512 pairs them */
#define MAX_K 160
#define MAX_T 13
#define HD 64

static uint32_t rng_state;
static float rnd(void) {                       /* uniform in [-1, 1) from a fixed sequence */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct { char *msg; int n; const char *path; const char *broken; int failed; } report;

/* 0 when |got - want| <= tol * scale[i] + 1e-6 (scale NULL: |want[i]|) for every i; else a message and 1 */
static int agree(report *r, const char *what, const float *got, const float *want, const float *scale, int64_t n,
                 float tol) {
    double worst = 0, err_at = 0, lim_at = 0;
    for (int64_t i = 0; i < n; i++) {
        double lim = tol * (scale ? scale[i] : fabs(want[i])) + 1e-6;
        double err = fabs((double)got[i] - (double)want[i]);
        if (!(err <= lim) && !(err / lim <= worst)) {   /* NaN counts as a disagreement too */
            worst = err == err ? err / lim : INFINITY;
            err_at = err;
            lim_at = lim;
        }
    }
    if (worst == 0) return 0;
    if (!r->failed)
        snprintf(r->msg, (size_t)r->n, "the %s path's %s disagrees with the scalar path (error %.3g where %.3g is "
                 "allowed)", r->path, what, err_at, lim_at);
    r->failed = 1;
    return 1;
}

static void check_matmuls(report *r, const pt_kernels *k, const pt_kernels *s) {
    static const int64_t Ks[] = {96, 160};
    static const int64_t Ts[] = {1, 7, 13};
    static float w[ROWS * MAX_K], x[MAX_T * MAX_K], y[MAX_T * ROWS], y_ref[MAX_T * ROWS], mag[MAX_T * ROWS];
    static uint8_t wq[ROWS * MAX_K * 4];
    static int8_t q[MAX_T * MAX_K];
    static float d[MAX_T * MAX_K / QK];
    static int32_t sums[MAX_T * MAX_K / QK];
    static const int32_t dtypes[] = {PT_Q8_0, PT_Q4_0, PT_F32, PT_F16, PT_BF16};
    static const char *names[] = {"q8_0 matmul", "q4_0 matmul", "f32 matmul", "f16 matmul", "bf16 matmul"};
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        const int64_t K = Ks[ki];
        for (int64_t i = 0; i < ROWS * K; i++) w[i] = rnd();
        for (int64_t i = 0; i < MAX_T * K; i++) x[i] = rnd() * 3.0f;
        /* the activations quantized by the scalar table for both, so each product is compared alone */
        for (int64_t t = 0; t < MAX_T; t++) s->quant_act(x + t * K, K, q + t * K, d + t * (K / QK), sums + t * (K / QK));
        const pt_act a = {q, d, sums, K, NULL, NULL};
        for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++) {
            const int32_t dt = dtypes[di];
            const int64_t rb = pt_row_bytes(dt, K);
            if (pt_quantize(dt, w, ROWS, K, wq) != 0) continue;
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                const int64_t T = Ts[ti];
                for (int acc = 0; acc < 2; acc++) {
                    for (int64_t i = 0; i < T * ROWS; i++) y[i] = y_ref[i] = acc ? 0.5f : 0.0f;
                    if (dt == PT_Q8_0) {
                        k->rows_q8(wq, rb, 0, ROWS, &a, T, y, ROWS, acc);
                        s->rows_q8(wq, rb, 0, ROWS, &a, T, y_ref, ROWS, acc);
                    } else if (dt == PT_Q4_0) {
                        k->rows_q4(wq, rb, 0, ROWS, &a, T, y, ROWS, acc);
                        s->rows_q4(wq, rb, 0, ROWS, &a, T, y_ref, ROWS, acc);
                    } else {
                        k->rows_float(wq, dt, K, 0, ROWS, x, T, y, ROWS, acc);
                        s->rows_float(wq, dt, K, 0, ROWS, x, T, y_ref, ROWS, acc);
                    }
                    if (r->broken && dt == PT_Q8_0 && !strcmp(r->broken, r->path)) y[0] += 1.0f;   /* test hook */
                    for (int64_t t = 0; t < T; t++)        /* the size of the sum: sum |w| |x| */
                        for (int64_t j = 0; j < ROWS; j++) {
                            double m = 0;
                            for (int64_t c = 0; c < K; c++) m += fabs(w[j * K + c] * x[t * K + c]);
                            mag[t * ROWS + j] = (float)m + 1.0f;
                        }
                    if (agree(r, names[di], y, y_ref, mag, T * ROWS, 1e-4f)) return;
                    if (dt != PT_Q8_0 && dt != PT_Q4_0) continue;
                    /* the same matrix interleaved: its groups by the interleaved kernel, the rows after them plain */
                    static uint8_t wx[ROWS * MAX_K * 4];
                    const int64_t G = ROWS / 8 * 8;
                    pt_interleave(dt, wq, wx, ROWS, K);
                    for (int64_t i = 0; i < T * ROWS; i++) y[i] = acc ? 0.5f : 0.0f;
                    (dt == PT_Q8_0 ? k->rows_q8x8 : k->rows_q4x8)(wx, 0, G, &a, T, y, ROWS, acc);
                    (dt == PT_Q8_0 ? k->rows_q8 : k->rows_q4)(wx, rb, G, ROWS, &a, T, y, ROWS, acc);
                    if (agree(r, dt == PT_Q8_0 ? "interleaved q8_0 matmul" : "interleaved q4_0 matmul", y, y_ref,
                              mag, T * ROWS, 1e-4f)) return;
                }
            }
        }
        /* the activation quantizer itself: the same quants (a tie may round either way: 1 apart) and scales */
        static int8_t q2[MAX_K];
        static float d2[MAX_K / QK];
        static int32_t s2[MAX_K / QK];
        k->quant_act(x, K, q2, d2, s2);
        for (int64_t i = 0; i < K; i++) {
            if (abs(q2[i] - q[i]) > 1) {
                float got = q2[i], want = q[i];
                agree(r, "activation quantizer", &got, &want, NULL, 1, 0.0f);
                return;
            }
        }
        if (agree(r, "activation quantizer's scales", d2, d, NULL, K / QK, 1e-6f)) return;
    }
}

/* GGUF's block types: random blocks (any bytes are a valid block once its fp16 scales are finite) */
static void check_gguf(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { GK = 512, GROWS = 11 };
    static const struct { int32_t type; int bytes, block; int16_t halves[2]; const char *name; } types[] = {
        {12, 144, 256, {0, 2}, "Q4_K matmul"}, {13, 176, 256, {0, 2}, "Q5_K matmul"}, {14, 210, 256, {208, -1},
        "Q6_K matmul"}, {3, 20, 32, {0, 2}, "Q4_1 matmul"}, {6, 22, 32, {0, -1}, "Q5_0 matmul"},
        {7, 24, 32, {0, 2}, "Q5_1 matmul"}, {10, 84, 256, {80, 82}, "Q2_K matmul"}, {11, 110, 256, {108, -1},
        "Q3_K matmul"}, {20, 18, 32, {0, -1}, "IQ4_NL matmul"}, {23, 136, 256, {0, -1}, "IQ4_XS matmul"}};
    static uint8_t w[GROWS * GK];
    static float x[MAX_T * GK], wf[GROWS * GK], y[MAX_T * GROWS], y_ref[MAX_T * GROWS], mag[MAX_T * GROWS];
    static int8_t q[MAX_T * GK];
    static float d[MAX_T * GK / QK];
    static int32_t sums[MAX_T * GK / QK], sums_k[MAX_T * GK / QK];
    static int8_t q_k[MAX_T * GK];
    static float d_k[MAX_T * GK / QK];
    static int16_t h_k[MAX_T * GK / 16];
    static uint8_t f_k[MAX_T * GK / 256];
    for (int64_t i = 0; i < MAX_T * GK; i++) x[i] = rnd() * 3.0f;
    for (int64_t t = 0; t < MAX_T; t++) {
        s->quant_act(x + t * GK, GK, q + t * GK, d + t * (GK / QK), sums + t * (GK / QK));
        pt_quant_act_k(x + t * GK, GK, q_k + t * GK, d_k + t * (GK / QK), sums_k + t * (GK / QK), h_k + t * (GK / 16));
        pt_q6_flags(q_k + t * GK, GK, f_k + t * (GK / 256));
    }
    /* the activations as each type's products take them: the K-quants' in super-blocks (PT_KQ8) */
    const pt_act a_blocks = {q, d, sums, GK, NULL, NULL}, a_supers = {q_k, d_k, sums_k, GK, h_k, f_k};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const pt_act a = PT_KQ8(types[ti].type) ? a_supers : a_blocks;
        const int64_t rb = pt_gguf_row_bytes(types[ti].type, GK), nblk = GK / types[ti].block;
        for (int64_t i = 0; i < GROWS * rb; i++) w[i] = (uint8_t)(rnd() * 127.0f + 128.0f);
        for (int64_t blk = 0; blk < GROWS * nblk; blk++)
            for (int h = 0; h < 2; h++)
                if (types[ti].halves[h] >= 0) {
                    const uint16_t v = pt_f2h(0.05f * rnd());
                    memcpy(w + blk * types[ti].bytes + types[ti].halves[h], &v, 2);
                }
        pt_dequantize_gguf(types[ti].type, w, GROWS, GK, wf);
        for (int64_t t = 0; t < MAX_T; t++)          /* the size of the sum: sum |w| |x| */
            for (int64_t j = 0; j < GROWS; j++) {
                double m = 0;
                for (int64_t c = 0; c < GK; c++) m += fabs(wf[j * GK + c] * x[t * GK + c]);
                mag[t * GROWS + j] = (float)m + 1.0f;
            }
        for (int T = 1; T <= MAX_T; T += 6) {
            k->rows_gguf(types[ti].type, w, rb, 0, GROWS, &a, T, y, GROWS, 0);
            s->rows_gguf(types[ti].type, w, rb, 0, GROWS, &a, T, y_ref, GROWS, 0);
            if (agree(r, types[ti].name, y, y_ref, mag, T * GROWS, 1e-4f)) return;
        }
    }
}

static void check_layer_ops(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { N = 3 * 67 };
    static float x[N], g[N], b[N], y[N], y_ref[N];
    for (int i = 0; i < N; i++) { x[i] = rnd() * 4.0f; g[i] = 1.0f + 0.1f * rnd(); b[i] = 0.1f * rnd(); }
    for (int kind = 0; kind < 2; kind++) {
        k->norm(kind, x, g, b, 1e-5f, 3, 67, 1, y);
        s->norm(kind, x, g, b, 1e-5f, 3, 67, 1, y_ref);
        if (agree(r, kind ? "LayerNorm" : "RMSNorm", y, y_ref, NULL, N, 1e-5f)) return;
    }
    for (int act = 1; act <= 7; act++) {
        static const char *names[] = {"", "SiLU", "GELU (tanh)", "GELU (erf)", "ReLU", "", "ReLU²", "sigmoid"};
        if (act == 5) continue;     /* gpt-oss's clamped SwiGLU: gated only, checked by the generic code's tests */
        k->glu(act, x, g, N, y);
        s->glu(act, x, g, N, y_ref);
        if (agree(r, names[act], y, y_ref, NULL, N, 1e-5f)) return;
        memcpy(y, x, sizeof x);
        memcpy(y_ref, x, sizeof x);
        k->bias_act(y, b, 3, 67, act);
        s->bias_act(y_ref, b, 3, 67, act);
        if (agree(r, names[act], y, y_ref, NULL, N, 1e-5f)) return;
    }
}

/* LoRA's backward panel (lora.c): odd sizes, so the tiles' leftover rows and columns run too */
static void check_mt_panel(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { NP = 7, C = 37, T = 9 };
    static float panel[NP * C], dy[T * NP], dx[T * C], dx_ref[T * C], mag[T * C];
    for (int i = 0; i < NP * C; i++) panel[i] = rnd();
    for (int i = 0; i < T * NP; i++) dy[i] = rnd();
    for (int i = 0; i < T * C; i++) dx[i] = dx_ref[i] = rnd();
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double m = fabs(dx[t * C + c]);
            for (int p = 0; p < NP; p++) m += fabs(dy[t * NP + p] * panel[p * C + c]);
            mag[t * C + c] = (float)m;
        }
    k->mt_panel(panel, NP, C, dy, NP, dx, 0, T);
    s->mt_panel(panel, NP, C, dy, NP, dx_ref, 0, T);
    agree(r, "LoRA backward panel", dx, dx_ref, mag, T * C, 1e-5f);
}

static void check_attention(report *r, const pt_kernels *k, const pt_kernels *s) {
    /* one block of positions, the most a call sees (an int8 cache's block is dequantized before the kernel) */
    enum { NB = PT_ATTN_BLOCK - 3 };
    static float q[HD], kc[NB * HD], vc[NB * HD], scores[PT_ATTN_BLOCK], out[HD + 2], out_ref[HD + 2];
    for (int i = 0; i < HD; i++) q[i] = rnd();
    for (int i = 0; i < NB * HD; i++) { kc[i] = rnd() * 2.0f; vc[i] = rnd(); }
    static const char *names[] = {"attention", "soft-capped attention", "ALiBi attention"};
    for (int kind = 0; kind < 3; kind++) {
        const float softcap = kind == 1 ? 20.0f : 0.0f, slope = kind == 2 ? 0.0625f : 0.0f;
        /* the block's max score and sum of weights after its output, so one comparison covers all three */
        k->attn_block(q, kc, vc, NB, HD, 0.125f, softcap, slope, -40.0f, scores, out, out + HD);
        s->attn_block(q, kc, vc, NB, HD, 0.125f, softcap, slope, -40.0f, scores, out_ref, out_ref + HD);
        if (agree(r, names[kind], out, out_ref, NULL, HD + 2, 1e-4f)) return;
    }
}

/* ternary rows (BitNet) against per-token activations: integer sums, so the paths must agree to the bit */
static void check_ternary(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { K = 96, T = 7 };
    static float w[ROWS * K], y[T * ROWS], y_ref[T * ROWS];
    static uint8_t wq[ROWS * (TQ2_HEADER + K / 4)];
    static int8_t q[T * K];
    static float d[T];
    static int32_t sums[T];
    for (int64_t i = 0; i < ROWS * K; i++) w[i] = rnd();
    for (int64_t i = 0; i < T * K; i++) q[i] = (int8_t)(rnd() * 127.0f);
    for (int64_t t = 0; t < T; t++) {
        d[t] = 20.0f + (float)t;
        sums[t] = 0;
        for (int64_t i = 0; i < K; i++) sums[t] += q[t * K + i];
    }
    if (pt_quantize(PT_TQ2, w, ROWS, K, wq) != 0) return;
    const pt_act a = {q, d, sums, K, NULL, NULL};
    for (int acc = 0; acc < 2; acc++) {
        for (int64_t i = 0; i < T * ROWS; i++) y[i] = y_ref[i] = acc ? 0.5f : 0.0f;
        k->rows_tq2(wq, TQ2_HEADER + K / 4, 0, ROWS, &a, T, y, ROWS, acc);
        s->rows_tq2(wq, TQ2_HEADER + K / 4, 0, ROWS, &a, T, y_ref, ROWS, acc);
        if (agree(r, "ternary matmul", y, y_ref, NULL, T * ROWS, 0.0f)) return;
    }
}

/* mag[i] = the largest |want| for every i: the scans are held to their largest value's rounding */
static void largest(float *mag, const float *want, int n) {
    float big = 0.0f;
    for (int i = 0; i < n; i++) big = fabsf(want[i]) > big ? fabsf(want[i]) : big;
    for (int i = 0; i < n; i++) mag[i] = big;
}

/* one chunk of the gated delta rule (kern_scan.h) from a state: odd sizes reach the products' tiles and their tails;
 * float sums in another order (and fused multiply-adds), so held to the largest output's rounding */
static void check_scan(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { N = PT_SCAN_CHUNK - 19, DK = 19, DV = 37 };
    static float q[N * DK], kk[N * DK], v[N * DV], g[N], beta[N], S[2][DK * DV], o[2][N * DV], mag[N * DV];
    static float work[PT_SCAN_DELTA_WORK(DK, DV)];
    for (int t = 0; t < N; t++) {
        float qq = 0.0f, n2 = 0.0f;
        for (int i = 0; i < DK; i++) {
            q[t * DK + i] = rnd();
            kk[t * DK + i] = rnd();
            qq += q[t * DK + i] * q[t * DK + i];
            n2 += kk[t * DK + i] * kk[t * DK + i];
        }
        for (int i = 0; i < DK; i++) {
            q[t * DK + i] /= sqrtf(qq * DK);
            kk[t * DK + i] /= sqrtf(n2);
        }
        for (int c = 0; c < DV; c++) v[t * DV + c] = rnd();
        g[t] = -0.5f * (rnd() + 1.0f);
        beta[t] = 0.5f * (rnd() + 1.0f);
    }
    for (int i = 0; i < DK * DV; i++) S[0][i] = S[1][i] = rnd();
    k->delta_chunk(S[0], q, kk, DK, v, DV, g, beta, N, DK, DV, o[0], DV, work);
    s->delta_chunk(S[1], q, kk, DK, v, DV, g, beta, N, DK, DV, o[1], DV, work);
    float big = 0.0f;
    for (int i = 0; i < N * DV; i++) big = fabsf(o[1][i]) > big ? fabsf(o[1][i]) : big;
    for (int i = 0; i < N * DV; i++) mag[i] = big;
    if (agree(r, "chunked delta rule", o[0], o[1], mag, N * DV, 1e-4f)) return;
    big = 0.0f;
    for (int i = 0; i < DK * DV; i++) big = fabsf(S[1][i]) > big ? fabsf(S[1][i]) : big;
    for (int i = 0; i < DK * DV; i++) mag[i] = big;
    if (agree(r, "chunked delta rule's state", S[0], S[1], mag, DK * DV, 1e-4f)) return;
    float kv[DV];                                   /* the recurrent form, a token at a time, from the new state */
    for (int t = 0; t < N; t++) {
        k->delta_step(S[0], q + t * DK, kk + t * DK, v + t * DV, beta[t], expf(g[t]), o[0] + t * DV, DK, DV, kv);
        s->delta_step(S[1], q + t * DK, kk + t * DK, v + t * DV, beta[t], expf(g[t]), o[1] + t * DV, DK, DV, kv);
    }
    largest(mag, o[1], N * DV);
    if (agree(r, "delta rule", o[0], o[1], mag, N * DV, 1e-4f)) return;
    largest(mag, S[1], DK * DV);
    agree(r, "delta rule's state", S[0], S[1], mag, DK * DV, 1e-4f);
}

/* one chunk of Mamba-2's SSD (kern_scan.h) from a state, odd sizes, held as the delta rule's */
static void check_ssd(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { N = PT_SCAN_CHUNK - 5, P = 21, NS = 11 };
    static float x[N * P], b[N * 2 * NS], dt[N], S[2][P * NS], y[2][N * P], mag[N * P];
    static float work[PT_SCAN_SSD_WORK(P, NS)];
    for (int i = 0; i < N * P; i++) x[i] = rnd();
    for (int i = 0; i < N * 2 * NS; i++) b[i] = rnd();
    for (int t = 0; t < N; t++) dt[t] = 0.05f * (rnd() + 1.0f);
    for (int i = 0; i < P * NS; i++) S[0][i] = S[1][i] = rnd();
    k->ssd_chunk(S[0], x, P, b, b + NS, 2 * NS, dt, -3.0f, N, P, NS, y[0], P, work);
    s->ssd_chunk(S[1], x, P, b, b + NS, 2 * NS, dt, -3.0f, N, P, NS, y[1], P, work);
    float big = 0.0f;
    for (int i = 0; i < N * P; i++) big = fabsf(y[1][i]) > big ? fabsf(y[1][i]) : big;
    for (int i = 0; i < N * P; i++) mag[i] = big;
    if (agree(r, "chunked SSD scan", y[0], y[1], mag, N * P, 1e-4f)) return;
    big = 0.0f;
    for (int i = 0; i < P * NS; i++) big = fabsf(S[1][i]) > big ? fabsf(S[1][i]) : big;
    for (int i = 0; i < P * NS; i++) mag[i] = big;
    if (agree(r, "chunked SSD scan's state", S[0], S[1], mag, P * NS, 1e-4f)) return;
    k->ssd_steps(S[0], x, P, b, b + NS, 2 * NS, dt, 1, -3.0f, N, P, NS, y[0], P);    /* the recurrent form */
    s->ssd_steps(S[1], x, P, b, b + NS, 2 * NS, dt, 1, -3.0f, N, P, NS, y[1], P);
    largest(mag, y[1], N * P);
    if (agree(r, "SSD scan", y[0], y[1], mag, N * P, 1e-4f)) return;
    largest(mag, S[1], P * NS);
    agree(r, "SSD scan's state", S[0], S[1], mag, P * NS, 1e-4f);
}

/* Mamba-1's selective scan (kern_scan.h) over an odd block of channels and an odd number of states (a tail past the
 * 8 partial sums, lanes past the block), with the gate: a token at a time, then a chunk continuing its state; exps
 * and sums as the path computes them, so held as the other scans */
static void check_sel(report *r, const pt_kernels *k, const pt_kernels *s) {
    enum { N = PT_SEL_CHUNK - 3, ND = 13, DS = 11 };
    static float u[N * ND], dt[N * ND], z[N * ND], A[ND * DS], b[N * 2 * DS], D[ND], S[2][ND * DS], y[2][N * ND];
    static float mag[N * ND], work[PT_SCAN_SEL_WORK(DS)];
    for (int i = 0; i < N * ND; i++) {
        u[i] = rnd();
        z[i] = 2.0f * rnd();
        dt[i] = 0.05f * (rnd() + 1.0f);
    }
    for (int i = 0; i < ND * DS; i++) A[i] = -4.0f * (rnd() + 1.0f);
    for (int i = 0; i < N * 2 * DS; i++) b[i] = rnd();
    for (int i = 0; i < ND; i++) D[i] = rnd();
    for (int i = 0; i < ND * DS; i++) S[0][i] = S[1][i] = rnd();
    for (int chunked = 0; chunked < 2; chunked++) {
        const pt_kernels *t[2] = {k, s};
        for (int p = 0; p < 2; p++) {
            if (chunked)
                t[p]->sel_chunk(S[p], A, D, dt, u, ND, z, ND, b, b + DS, 2 * DS, N, ND, DS, y[p], ND, work);
            else
                t[p]->sel_steps(S[p], A, D, dt, u, ND, z, ND, b, b + DS, 2 * DS, N, ND, DS, y[p], ND);
        }
        const char *what[2][2] = {{"selective scan", "selective scan's state"},
                                  {"chunked selective scan", "chunked selective scan's state"}};
        largest(mag, y[1], N * ND);
        if (agree(r, what[chunked][0], y[0], y[1], mag, N * ND, 1e-4f)) return;
        largest(mag, S[1], ND * DS);
        if (agree(r, what[chunked][1], S[0], S[1], mag, ND * DS, 1e-4f)) return;
    }
}

/* AMX's tiles (kern_amx.c) against the scalar path's interleaved kernel, bit for bit: 45 rows (two pairs of groups
 * on the tiles, then a group and 5 plain rows they leave), two tiles of 16 tokens, K of 3 and 17 blocks, both types,
 * accumulating or not. Called by cpu.c under a signal guard on a CPU that has AMX, and by kernels/amx_selftest.c on
 * the emulated build. */
int pt_amx_check(char *msg, int n) {
    enum { AR = 45, AT = 37, AK = 544 };
    static float w[AR * AK], x[AT * AK], y[AT * AR], y_ref[AT * AR];
    static uint8_t wq[AR * AK * 2], wx[AR * AK * 2];
    static int8_t q[AT * AK];
    static float d[AT * AK / QK];
    static int32_t sums[AT * AK / QK];
    static const int64_t Ks[] = {96, AK};
    const char *broken = getenv("PETIT_TEST_BREAK_AMX");   /* test hook: the check must catch a wrong result */
    if (n > 0) msg[0] = 0;
    rng_state = 777u;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        const int64_t K = Ks[ki];
        for (int64_t i = 0; i < AR * K; i++) w[i] = rnd();
        for (int64_t i = 0; i < AT * K; i++) x[i] = rnd() * 3.0f;
        for (int64_t t = 0; t < AT; t++)
            pt_kernels_scalar.quant_act(x + t * K, K, q + t * K, d + t * (K / QK), sums + t * (K / QK));
        const pt_act a = {q, d, sums, K, NULL, NULL};
        for (int q4 = 0; q4 < 2; q4++) {
            const int32_t dt = q4 ? PT_Q4_0 : PT_Q8_0;
            if (pt_quantize(dt, w, AR, K, wq) != 0 || pt_interleave(dt, wq, wx, AR, K) != 0) {
                snprintf(msg, (size_t)n, "the AMX check could not quantize its matrix");
                return -1;
            }
            for (int acc = 0; acc < 2; acc++) {
                for (int64_t i = 0; i < AT * AR; i++) y[i] = y_ref[i] = acc ? 0.5f + (float)(i % 7) : 0.0f;
                pt_amx_rows(wx, 0, AR / 8 * 8, &a, AT / 16 * 16, y, AR, acc, q4);
                /* the tiles take the pairs (rows 0-31) and the whole tiles of tokens (0-31), the rest stays */
                (q4 ? pt_kernels_scalar.rows_q4x8 : pt_kernels_scalar.rows_q8x8)(wx, 0, AR / 16 * 16, &a,
                                                                                 AT / 16 * 16, y_ref, AR, acc);
                if (broken && atoi(broken) == 1) y[AR + 3] += 1.0f;
                for (int64_t t = 0; t < AT; t++)
                    for (int64_t j = 0; j < AR; j++) {
                        const int64_t i = t * AR + j;
                        if (memcmp(&y[i], &y_ref[i], sizeof(float)) != 0) {
                            snprintf(msg, (size_t)n, "the AMX kernel's interleaved %s matmul disagrees with the "
                                     "scalar path (K %lld, row %lld, token %lld: %.9g where %.9g is right)",
                                     q4 ? "q4_0" : "q8_0", (long long)K, (long long)j, (long long)t, y[i], y_ref[i]);
                            return -1;
                        }
                    }
            }
        }
    }
    return 0;
}

int pt_path_check(const pt_kernels *k, char *msg, int n) {
    if (n > 0) msg[0] = 0;
    if (k == &pt_kernels_scalar) return 0;
    report r = {msg, n, k->name, getenv("PETIT_TEST_BREAK_PATH"), 0};
    rng_state = 12345u;
    check_matmuls(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_gguf(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_layer_ops(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_attention(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_ternary(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_scan(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_ssd(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_sel(&r, k, &pt_kernels_scalar);
    if (!r.failed) check_mt_panel(&r, k, &pt_kernels_scalar);
    return r.failed ? -1 : 0;
}
