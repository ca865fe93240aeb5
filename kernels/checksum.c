/* The "pt64" tensor checksum (docs/petit-format.md): 64 bits over a byte range, fast enough to check every tensor
 * of a model each time it loads. The bytes are read as little-endian 64-bit words in stripes of 8 (64 bytes); word
 * l of stripe s adds  w + lo32(x) * hi32(x),  x = w ^ (KEY[l] + s * STEP),  into lane l. The stripe index in x makes
 * the sum depend on where each word is (moved or swapped blocks change it); the plain w term makes any change of a
 * single word change its lane. The 32 x 32 -> 64-bit product is one vector instruction on every SIMD ISA (pmuludq,
 * umull), so the plain loop vectorises; and the lanes are sums, so any split of the stripes across threads adds up
 * to the same value. A last partial stripe is padded with zeros; the length and the lanes are then mixed with
 * MurmurHash3's 64-bit finaliser. Not a cryptographic hash: it finds damage (a flipped bit, a zeroed or moved page),
 * not deliberate tampering. */
#include "internal.h"
#include <stdatomic.h>

#define LANES 8
#define STRIPE 64
#define STEP 0x9E3779B97F4A7C15ull      /* 2^64 / golden ratio */

static const uint64_t KEY[LANES] = {
    0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x85EBCA77C2B2AE63ull, 0x27D4EB2F165667C5ull,
    0xD6E8FEB86659FD93ull, 0xFF51AFD7ED558CCDull, 0xC4CEB9FE1A85EC53ull, 0x9FB21C651E98DF25ull,
};

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint64_t term(uint64_t w, uint64_t key) {
    uint64_t x = w ^ key;
    return w + (x & 0xFFFFFFFFull) * (x >> 32);
}

static inline uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t finish(const uint64_t acc[LANES], int64_t n) {
    uint64_t h = fmix64((uint64_t)n ^ 0x5045544954363421ull);
    for (int l = 0; l < LANES; l++) h = fmix64(h ^ acc[l]);
    return h;
}

/* the last n % 64 bytes as a zero-padded stripe */
static void tail(const uint8_t *p, int64_t n, uint64_t acc[LANES]) {
    const int64_t s = n / STRIPE, r = n % STRIPE;
    if (!r) return;
    uint8_t buf[STRIPE] = {0};
    memcpy(buf, p + s * STRIPE, (size_t)r);
    for (int l = 0; l < LANES; l++) acc[l] += term(load_le64(buf + 8 * l), KEY[l] + (uint64_t)s * STEP);
}

/* the plain reference: one word at a time */
uint64_t pt_checksum_ref(const void *data, int64_t n) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t acc[LANES] = {0};
    if (n < 0) n = 0;
    for (int64_t i = 0; i < n / STRIPE * LANES; i++)   /* the words of the whole stripes */
        acc[i % LANES] += term(load_le64(p + 8 * i), KEY[i % LANES] + (uint64_t)(i / LANES) * STEP);
    tail(p, n, acc);
    return finish(acc, n);
}

/* stripes s0..s1-1: lanes as an array the compiler keeps in vector registers */
static void stripes(const uint8_t *p, int64_t s0, int64_t s1, uint64_t acc[LANES]) {
    uint64_t a[LANES] = {0}, key[LANES];
    for (int l = 0; l < LANES; l++) key[l] = KEY[l] + (uint64_t)s0 * STEP;
    for (int64_t s = s0; s < s1; s++) {
        const uint8_t *q = p + s * STRIPE;
#pragma omp simd
        for (int l = 0; l < LANES; l++) {
            a[l] += term(load_le64(q + 8 * l), key[l]);
            key[l] += STEP;
        }
    }
    for (int l = 0; l < LANES; l++) acc[l] += a[l];
}

typedef struct { const uint8_t *p; _Atomic uint64_t acc[LANES]; } sum_job;

static void sum_rows(void *ctx, int64_t s0, int64_t s1) {
    sum_job *j = (sum_job *)ctx;
    uint64_t a[LANES] = {0};
    stripes(j->p, s0, s1, a);
    for (int l = 0; l < LANES; l++) atomic_fetch_add(&j->acc[l], a[l]);   /* sums: any order, the same value */
}

uint64_t pt_checksum(const void *data, int64_t n) {
    if (n < 0) n = 0;
    sum_job j = {.p = (const uint8_t *)data};
    for (int l = 0; l < LANES; l++) atomic_init(&j.acc[l], 0);
    pt_run_rows(sum_rows, &j, n / STRIPE, LANES);    /* chunks of 8192 stripes (512 KB) across the pool */
    uint64_t acc[LANES];
    for (int l = 0; l < LANES; l++) acc[l] = atomic_load(&j.acc[l]);
    tail(j.p, n, acc);
    return finish(acc, n);
}
