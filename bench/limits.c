/* The machine's limits, so every figure of the benchmarks has its ceiling beside it (bench/bench_limits.py builds
 * and runs this for the CPU it is on):
 *   read   GB/s: N threads summing a buffer far larger than the caches, the way a decode step streams weights;
 *   int8   GOPS: N threads running independent chains of the CPU's best 8-bit multiply-add on registers only
 *                (AVX-512 VNNI vpdpbusd, AVX-VNNI, AVX2 vpmaddubsw + vpmaddwd, NEON sdot / smull), 2 ops per MAC;
 *   int8_16 GOPS: on AVX2, the pair sums added up in 16 bits (vpmaddubsw + vpaddw), as q4_0's small nibbles allow:
 *                that kernel's ceiling (0 where the best multiply-add needs no such trick).
 * Usage: limits THREADS [MiB]. Prints "read_gbs X", "int8_gops X", "int8_16_gops X" and "int8_kernel NAME". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { const uint64_t *p; size_t n; int reps; uint64_t sum; pthread_barrier_t *bar; double t0, t1; } read_job;

static void *read_worker(void *arg) {
    read_job *j = (read_job *)arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    pthread_barrier_wait(j->bar);
    j->t0 = now();
    for (int r = 0; r < j->reps; r++) {
        for (size_t i = 0; i + 4 <= j->n; i += 4) { s0 += j->p[i]; s1 += j->p[i + 1]; s2 += j->p[i + 2]; s3 += j->p[i + 3]; }
    }
    j->t1 = now();
    j->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double read_gbs(int threads, size_t mib) {
    size_t n = mib * 1024 * 1024 / 8;
    uint64_t *buf = (uint64_t *)aligned_alloc(4096, n * 8);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i;     /* touch every page: no first-touch faults in the timing */
    double best = 0;
    for (int trial = 0; trial < 3; trial++) {
        pthread_t th[256];
        read_job jobs[256];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        size_t per = n / (size_t)threads;
        for (int t = 0; t < threads; t++) {
            jobs[t] = (read_job){buf + per * (size_t)t, per, 2, 0, &bar, 0, 0};
            pthread_create(&th[t], NULL, read_worker, &jobs[t]);
        }
        double t0 = 1e300, t1 = 0;
        uint64_t sum = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            if (jobs[t].t0 < t0) t0 = jobs[t].t0;
            if (jobs[t].t1 > t1) t1 = jobs[t].t1;
            sum += jobs[t].sum;
        }
        pthread_barrier_destroy(&bar);
        double gbs = (double)per * (size_t)threads * 8 * 2 / (t1 - t0) / 1e9;
        if (gbs > best) best = gbs;
        if (sum == 42) printf("#");                 /* keep the sums alive */
    }
    free(buf);
    return best;
}

/* ---- int8 multiply-add peak: 8 independent accumulator chains, registers only ---- */
#define ITERS 20000000L
typedef struct { double ops; pthread_barrier_t *bar; double t0, t1; int32_t out; double (*fn)(int32_t *); } mac_job;

#if defined(__x86_64__)
/* 6 accumulators, each with an opaque operand of its own (the same operand twice would let the compiler compute
 * one product for two chains): 14 registers of 16, so nothing spills to the stack (a spilled accumulator would time
 * a store-to-load round trip per step, not the multiplier) */
#define CHAINS6(STEP)                                                                                              \
    __m256i a0 = _mm256_set1_epi8(1), a1 = _mm256_set1_epi8(2), a2 = _mm256_set1_epi8(3);                        \
    __m256i a3 = _mm256_set1_epi8(4), a4 = _mm256_set1_epi8(5), a5 = _mm256_set1_epi8(6);                        \
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;                            \
    for (long it = 0; it < ITERS / 6; it++) {                                                                    \
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));  /* no product hoisted */      \
        STEP(c0, a0); STEP(c1, a1); STEP(c2, a2); STEP(c3, a3); STEP(c4, a4); STEP(c5, a5);                      \
    }

__attribute__((target("avx2")))
static double macs_avx2(int32_t *out) {
    const __m256i b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
#define DOT8(c, a) c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one))
    CHAINS6(DOT8)
#undef DOT8
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                 _mm256_add_epi32(c4, c5));
    *out = _mm256_extract_epi32(s, 0);
    return (double)(ITERS / 6 * 6) * 32 * 2;     /* 32 MACs per instruction triple */
}

__attribute__((target("avx2")))
static double macs_avx2_16(int32_t *out) {
    const __m256i b = _mm256_set1_epi8(-2);
#define DOT16(c, a) c = _mm256_add_epi16(c, _mm256_maddubs_epi16(a, b))      /* q4_0's 16-bit sums */
    CHAINS6(DOT16)
#undef DOT16
    __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                                 _mm256_add_epi16(c4, c5));
    *out = _mm256_extract_epi16(s, 0);
    return (double)(ITERS / 6 * 6) * 32 * 2;
}

__attribute__((target("avx512f,avx512bw,avx512vnni")))
static double macs_vnni512(int32_t *out) {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    __m512i acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_si512();
    for (long it = 0; it < ITERS / 8; it++) {
        for (int i = 0; i < 8; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        __asm__("" : "+v"(a));
    }
    __m512i s = acc[0];
    for (int i = 1; i < 8; i++) s = _mm512_add_epi32(s, acc[i]);
    *out = _mm512_reduce_add_epi32(s);
    return (double)ITERS * 64 * 2;
}
#endif

static const char *kernel_name = "none";
static double (*kernel)(int32_t *) = NULL, (*kernel16)(int32_t *) = NULL;

static void pick_kernel(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        kernel = macs_vnni512; kernel_name = "avx512-vnni vpdpbusd zmm";
    } else if (__builtin_cpu_supports("avx2")) {
        kernel = macs_avx2; kernel_name = "avx2 vpmaddubsw+vpmaddwd+vpaddd";
        kernel16 = macs_avx2_16;
    }
#endif
}

static void *mac_worker(void *arg) {
    mac_job *j = (mac_job *)arg;
    pthread_barrier_wait(j->bar);
    j->t0 = now();
    j->ops = j->fn(&j->out);
    j->t1 = now();
    return NULL;
}

static double int8_gops(int threads, double (*kernel)(int32_t *)) {
    if (!kernel) return 0;
    pthread_t th[256];
    mac_job jobs[256];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        jobs[t] = (mac_job){0, &bar, 0, 0, 0, kernel};
        pthread_create(&th[t], NULL, mac_worker, &jobs[t]);
    }
    double t0 = 1e300, t1 = 0, ops = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].t0 < t0) t0 = jobs[t].t0;
        if (jobs[t].t1 > t1) t1 = jobs[t].t1;
        ops += jobs[t].ops;
        if (jobs[t].out == 42) printf("#");
    }
    pthread_barrier_destroy(&bar);
    return ops / (t1 - t0) / 1e9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    if (threads < 1 || threads > 256) { fprintf(stderr, "threads must be 1..256\n"); return 2; }
    pick_kernel();
    printf("read_gbs %.2f\n", read_gbs(threads, mib));
    printf("int8_gops %.1f\n", int8_gops(threads, kernel));
    printf("int8_16_gops %.1f\n", int8_gops(threads, kernel16));
    printf("int8_kernel %s\n", kernel_name);
    return 0;
}
