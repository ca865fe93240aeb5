/* The AMX kernel (kern_amx.c) on machines without AMX: built with -DPT_AMX_EMULATE, where the tile instructions are
 * C functions with the SDM's definitions and the 512-bit float steps two 256-bit halves in the same order, and held
 * to the scalar path's interleaved kernel bit for bit over odd sizes (tests/test_amx.py builds and runs it). Prints
 * one line per case and "N passed, M failed"; exits 1 when any failed. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>

static uint32_t seed = 99u;
static float rnd(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* rows r0..r0+R (the groups' pairs on the tiles) x T16 tokens of a [rows x K] matrix, output rows ldy apart */
static int one_case(int64_t rows, int64_t K, int64_t T, int64_t r0, int64_t ldy, int q4, int acc) {
    const int32_t dt = q4 ? PT_Q4_0 : PT_Q8_0;
    const int64_t rb = pt_row_bytes(dt, K), nb = K / QK, T16 = T / 16 * 16;
    float *w = malloc((size_t)(rows * K) * sizeof(float)), *x = malloc((size_t)(T * K) * sizeof(float));
    uint8_t *wq = malloc((size_t)(rows * rb)), *wx = malloc((size_t)(rows * rb));
    int8_t *q = malloc((size_t)(T * K));
    float *d = malloc((size_t)(T * nb) * sizeof(float));
    int32_t *s = malloc((size_t)(T * nb) * sizeof(int32_t));
    float *y = malloc((size_t)(T * ldy) * sizeof(float)), *y_ref = malloc((size_t)(T * ldy) * sizeof(float));
    for (int64_t i = 0; i < rows * K; i++) w[i] = rnd() * (i % 11 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < T * K; i++) x[i] = rnd() * 3.0f;
    for (int64_t t = 0; t < T; t++) pt_kernels_scalar.quant_act(x + t * K, K, q + t * K, d + t * nb, s + t * nb);
    const pt_act a = {q, d, s, K, NULL, NULL};
    pt_quantize(dt, w, rows, K, wq);
    pt_interleave(dt, wq, wx, rows, K);
    for (int64_t i = 0; i < T * ldy; i++) y[i] = y_ref[i] = acc ? rnd() : -7.0f;
    const int64_t groups = rows / 8 * 8, r1 = r0 + (groups - r0) / 16 * 16;
    pt_amx_rows(wx, r0, groups, &a, T16, y, ldy, acc, q4);
    (q4 ? pt_kernels_scalar.rows_q4x8 : pt_kernels_scalar.rows_q8x8)(wx, r0, r1, &a, T16, y_ref, ldy, acc);
    int64_t bad = -1;
    for (int64_t i = 0; i < T * ldy && bad < 0; i++)
        if (memcmp(&y[i], &y_ref[i], sizeof(float)) != 0) bad = i;
    printf("%s %s rows %lld K %lld tokens %lld (tiles: rows %lld-%lld, tokens 0-%lld) ldy %lld%s", bad < 0 ? "ok  " : "FAIL",
           q4 ? "q4_0" : "q8_0", (long long)rows, (long long)K, (long long)T, (long long)r0, (long long)r1 - 1,
           (long long)T16 - 1, (long long)ldy, acc ? " accumulate" : "");
    if (bad >= 0) printf(": token %lld row %lld %.9g where %.9g", (long long)(bad / ldy), (long long)(bad % ldy),
                         y[bad], y_ref[bad]);
    printf("\n");
    free(w); free(x); free(wq); free(wx); free(q); free(d); free(s); free(y); free(y_ref);
    return bad < 0;
}

int main(void) {
    int passed = 0, failed = 0;
    char msg[320];
    const int rc = pt_amx_check(msg, (int)sizeof msg);
    printf("%s start-up check%s%s\n", rc == 0 ? "ok  " : "FAIL", rc ? ": " : "", rc ? msg : "");
    rc == 0 ? passed++ : failed++;
    static const struct { int64_t rows, K, T, r0, ldy; } cases[] = {
        {16, 32, 16, 0, 16}, {45, 96, 37, 0, 45}, {61, 160, 53, 16, 70}, {64, 544, 48, 0, 64},
        {40, 1056, 17, 0, 41}, {33, 224, 32, 0, 33}, {128, 896, 64, 32, 128},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int q4 = 0; q4 < 2; q4++)
            for (int acc = 0; acc < 2; acc++) {
                const int ok = one_case(cases[c].rows, cases[c].K, cases[c].T, cases[c].r0, cases[c].ldy, q4, acc);
                ok ? passed++ : failed++;
            }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
