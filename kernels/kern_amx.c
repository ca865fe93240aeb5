/* Prefill on Intel's AMX tiles (Sapphire Rapids and later): the interleaved q8_0 / q4_0 matrices (layout in
 * interleave.c) against 16 tokens at a time, for the AVX-512 path (kern_x86_512.h calls pt_amx_rows when cpu.c has
 * turned AMX on: the CPU has AMX-TILE and AMX-INT8, Linux granted the tile state, and the start-up check passed).
 *
 * A group of 8 rows holds each 32-value block as 8 vectors of 32 bytes, lane i (4 bytes) of vector k being values
 * 4k..4k+3 of row i: exactly a B tile of 8 rows x 32 bytes in AMX's "VNNI" layout (B[k][4n + j] = w_n[4k + j]), so
 * q8_0's quants load as they are stored. For each block, tokens t0..t0+15 (A: 16 rows x 32 bytes, one per token,
 * K bytes apart) times two groups (16 weight rows) give two C tiles of 16 x 8 exact int32 sums: tdpbssd (signed x
 * signed) for q8_0; for q4_0 the nibbles (w + 8, 0..15) are unpacked into a B tile and multiplied by tdpbsud (signed
 * activations x unsigned weights), and 8 x the activation block sum is taken off, as the other paths do. A tile's
 * K is one block (32 bytes), since each block has its own scales. The block sums then go through the scalar
 * reference's float steps in its order, sum += (dw * dx) * isum over the blocks, never fused, so the same bits as
 * every other path (the start-up check and the tests compare them exactly).
 *
 * Nothing on the machines this was written on runs AMX. So the file also builds with PT_AMX_EMULATE: the tile
 * instructions become C functions with the instructions' definitions (Intel SDM: TDPBSSD, TDPBSUD, TILELOADD,
 * TILESTORED) and the 512-bit float steps two 256-bit halves in the same order, which tests/test_amx.py builds with
 * kernels/amx_selftest.c and holds to the scalar reference bit for bit over odd sizes on any AVX2 machine. On a real
 * AMX machine the start-up check (cpu.c) runs the real instructions under a signal guard before anything uses them.
 *
 * The tile configuration is loaded with inline asm taking the configuration as a memory operand, and every tile
 * load and store is asm with a memory clobber: gcc 12's own _tile_loadconfig lets it drop the stores that fill the
 * configuration (llama.cpp's AMX path dies with SIGILL that way when built with gcc 12). */
#include "internal.h"

#if defined(PT_X86_64) && (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#define PT_HAVE_AMX 1
#endif

#ifdef PT_HAVE_AMX
#include <immintrin.h>
#if defined(__clang__) && defined(PT_AMX_EMULATE)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8"))), \
                             apply_to = function)
#elif defined(PT_AMX_EMULATE)
#pragma GCC target("avx2,fma,f16c")
#else
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,amx-tile,amx-int8")
#endif

/* the tile configuration (palette 1): tile 0 = A (16 tokens x 32 bytes), 1 and 2 = B of the two groups (8 x 32
 * bytes), 3 and 4 = their C (16 tokens x 8 int32) */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

static void amx_fill_config(amx_config *c) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    static const uint8_t rows[5] = {16, 8, 8, 16, 16};
    for (int t = 0; t < 5; t++) {
        c->rows[t] = rows[t];
        c->colsb[t] = 32;
    }
}

#ifdef PT_AMX_EMULATE
/* ---- the tile instructions in C, after the SDM's pseudocode ---- */
static struct { uint8_t rows[8]; uint16_t colsb[8]; uint8_t data[8][16][64]; int configured; } emu;

static void emu_config(const amx_config *c) {
    for (int t = 0; t < 8; t++) { emu.rows[t] = c->rows[t]; emu.colsb[t] = c->colsb[t]; }
    memset(emu.data, 0, sizeof emu.data);
    emu.configured = c->palette == 1;
}
static void emu_load(int t, const void *base, int64_t stride) {
    for (int m = 0; m < emu.rows[t]; m++) memcpy(emu.data[t][m], (const uint8_t *)base + m * stride, emu.colsb[t]);
}
static void emu_store(int t, void *base, int64_t stride) {
    for (int m = 0; m < emu.rows[t]; m++) memcpy((uint8_t *)base + m * stride, emu.data[t][m], emu.colsb[t]);
}
static void emu_zero(int t) { memset(emu.data[t], 0, sizeof emu.data[t]); }
/* C[m][n] += sum over k < colsb(A) / 4 and j < 4 of A[m][4k + j] * B[k][4n + j], A signed, B signed or unsigned */
static void emu_dp(int c, int a, int b, int b_unsigned) {
    for (int m = 0; m < emu.rows[c]; m++)
        for (int n = 0; n < emu.colsb[c] / 4; n++) {
            int32_t acc;
            memcpy(&acc, emu.data[c][m] + 4 * n, 4);
            for (int k = 0; k < emu.colsb[a] / 4; k++)
                for (int j = 0; j < 4; j++) {
                    const int32_t x = (int8_t)emu.data[a][m][4 * k + j];
                    const uint8_t wb = emu.data[b][k][4 * n + j];
                    acc += x * (b_unsigned ? (int32_t)wb : (int32_t)(int8_t)wb);
                }
            memcpy(emu.data[c][m] + 4 * n, &acc, 4);
        }
}
#define TILE_CONFIG(c) emu_config(c)
#define TILE_RELEASE() (emu.configured = 0)
#define TILE_LOAD(t, base, stride) emu_load(t, base, stride)
#define TILE_STORE(t, base, stride) emu_store(t, base, stride)
#define TILE_ZERO(t) emu_zero(t)
#define TILE_DPBSSD(c, a, b) emu_dp(c, a, b, 0)
#define TILE_DPBSUD(c, a, b) emu_dp(c, a, b, 1)
#else
/* AT&T operand order: tdpbssd B, A, C computes C += A . B */
#define TILE_CONFIG(c) __asm__ volatile("ldtilecfg %0" : : "m"(*(const amx_config *)(c)) : "memory")
#define TILE_RELEASE() __asm__ volatile("tilerelease" : : : "memory")
#define TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t : : "r"(base), "r"((int64_t)(stride)) : "memory")
#define TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" : : "r"(base), "r"((int64_t)(stride)) : "memory")
#define TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t : :)
#define TILE_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c : :)
#define TILE_DPBSUD(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c : :)
#endif

/* ---- 16 floats: one zmm register, or (emulated, on AVX2) two ymm halves with the same operations ---- */
#ifdef PT_AMX_EMULATE
typedef struct { __m256 lo, hi; } v16;
static inline v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline v16 v16_scales(const uint8_t *h0, const uint8_t *h1) {   /* 8 fp16 at h0, 8 at h1 */
    return (v16){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h0)),
                 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h1))};
}
static inline v16 v16_isum(const int32_t *s, int32_t off) {          /* (float)(s[i] - off) */
    const __m256i o = _mm256_set1_epi32(off);
    return (v16){_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)s), o)),
                 _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(s + 8)), o))};
}
static inline v16 v16_floats(const float *p0, const float *p1) {   /* 8 floats at p0, 8 at p1 */
    return (v16){_mm256_loadu_ps(p0), _mm256_loadu_ps(p1)};
}
static inline v16 v16_set1(float f) { return (v16){_mm256_set1_ps(f), _mm256_set1_ps(f)}; }
static inline v16 v16_sub(v16 a, v16 b) { return (v16){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
static inline v16 v16_mul1(v16 a, float b) {
    const __m256 v = _mm256_set1_ps(b);
    return (v16){_mm256_mul_ps(a.lo, v), _mm256_mul_ps(a.hi, v)};
}
static inline v16 v16_mul(v16 a, v16 b) { return (v16){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
static inline v16 v16_add(v16 a, v16 b) { return (v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
#define V16_NO_FUSE(v) __asm__("" : "+x"((v).lo), "+x"((v).hi))
static inline void v16_store(float *p, v16 v, int accumulate) {
    if (accumulate) v = v16_add((v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}, v);
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}
#else
typedef __m512 v16;
static inline v16 v16_zero(void) { return _mm512_setzero_ps(); }
static inline v16 v16_scales(const uint8_t *h0, const uint8_t *h1) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)h0)),
                                                   _mm_loadu_si128((const __m128i *)h1), 1));
}
static inline v16 v16_isum(const int32_t *s, int32_t off) {
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512((const void *)s), _mm512_set1_epi32(off)));
}
static inline v16 v16_floats(const float *p0, const float *p1) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(p0))),
                                               _mm256_castps_pd(_mm256_loadu_ps(p1)), 1));
}
static inline v16 v16_set1(float f) { return _mm512_set1_ps(f); }
static inline v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
static inline v16 v16_mul1(v16 a, float b) { return _mm512_mul_ps(a, _mm512_set1_ps(b)); }
static inline v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
static inline v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
#define V16_NO_FUSE(v) __asm__("" : "+v"(v))
static inline void v16_store(float *p, v16 v, int accumulate) {
    _mm512_storeu_ps(p, accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), v) : v);
}
#endif

/* a q4_0 group's block as a B tile: rows 0-3 the low nibbles of its 4 vectors (values 4k..4k+3 of each row), rows
 * 4-7 the high nibbles (values 16 + 4k..) */
static inline void unpack_q4(const uint8_t *v, uint8_t *out) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    for (int k = 0; k < 4; k++) {
        const __m256i p = _mm256_loadu_si256((const __m256i *)(v + 32 * k));
        _mm256_storeu_si256((__m256i *)(out + 32 * k), _mm256_and_si256(p, m));
        _mm256_storeu_si256((__m256i *)(out + 128 + 32 * k), _mm256_and_si256(_mm256_srli_epi16(p, 4), m));
    }
}

/* groups g0, g1 (rows r..r+15) against tokens t0..t0+15 */
static void amx_tile(const uint8_t *g0, const uint8_t *g1, const pt_act *a, int64_t t0, float *y, int64_t ldy,
                     int64_t r, int accumulate, int q4) {
    const int64_t K = a->K, nb = K / QK, bb = q4 ? Q4X8_BYTES : Q8X8_BYTES;
    _Alignas(64) int32_t isum[16][16];       /* C of g0 in columns 0-7, of g1 in 8-15: one token per row */
    _Alignas(64) uint8_t wq[2][256];         /* q4_0's blocks unpacked */
    v16 acc[16];
    for (int j = 0; j < 16; j++) acc[j] = v16_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *b0 = g0 + b * bb, *b1 = g1 + b * bb;
        TILE_LOAD(0, a->q + t0 * K + b * QK, K);
        if (q4) {
            unpack_q4(b0 + 16, wq[0]);
            unpack_q4(b1 + 16, wq[1]);
            TILE_LOAD(1, wq[0], 32);
            TILE_LOAD(2, wq[1], 32);
        } else {
            TILE_LOAD(1, b0 + 16, 32);
            TILE_LOAD(2, b1 + 16, 32);
        }
        TILE_ZERO(3);
        TILE_ZERO(4);
        if (q4) {
            TILE_DPBSUD(3, 0, 1);
            TILE_DPBSUD(4, 0, 2);
        } else {
            TILE_DPBSSD(3, 0, 1);
            TILE_DPBSSD(4, 0, 2);
        }
        TILE_STORE(3, &isum[0][0], 64);
        TILE_STORE(4, &isum[0][8], 64);
        const v16 dw = v16_scales(b0, b1);
        for (int j = 0; j < 16; j++) {
            const int64_t tb = (t0 + j) * nb + b;
            v16 prod = v16_mul(v16_mul1(dw, a->d[tb]), v16_isum(isum[j], q4 ? 8 * a->s[tb] : 0));
            V16_NO_FUSE(prod);
            acc[j] = v16_add(acc[j], prod);
        }
    }
    for (int j = 0; j < 16; j++) v16_store(y + (t0 + j) * ldy + r, acc[j], accumulate);
}

void pt_amx_rows(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T16, float *y, int64_t ldy,
                 int accumulate, int q4) {
    const int64_t gbytes = a->K / QK * (q4 ? Q4X8_BYTES : Q8X8_BYTES);
    amx_config cfg;
    amx_fill_config(&cfg);
    TILE_CONFIG(&cfg);
    for (int64_t r = r0; r + 16 <= r1; r += 16) {
        const uint8_t *g0 = w + r / 8 * gbytes, *g1 = g0 + gbytes;
        for (int64_t t = 0; t + 16 <= T16; t += 16) amx_tile(g0, g1, a, t, y, ldy, r, accumulate, q4);
    }
    TILE_RELEASE();
}

#ifdef __clang__
#pragma clang attribute pop
#endif
#else
void pt_amx_rows(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T16, float *y, int64_t ldy,
                 int accumulate, int q4) {
    (void)w; (void)r0; (void)r1; (void)a; (void)T16; (void)y; (void)ldy; (void)accumulate; (void)q4;
}
#endif
