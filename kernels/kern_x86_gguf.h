/* The x86 kernels of GGUF's block types (kern_gguf.h's arithmetic, bit for bit), included by kern_x86.h for each
 * x86 path (the same target, SUFFIX and DOT_ACC): the K-quants and IQ4_XS decode 8 rows at a time (Q2_K, Q3_K and
 * IQ4_XS in kern_x86_kq2.h), the 32-value types likewise, and every type in a prefill through 8 rows unpacked once
 * into the interleaved layout. rows_gguf_ at the end is the path's table entry. */

/* ---- GGUF's K-quants (kern_gguf.h's arithmetic, bit for bit): Q4_K, Q5_K and Q6_K here ----
 * One row at a time, each super-block's values unpacked once for up to 4 tokens: a 32-value block is 32 bytes in
 * natural order, so vpmaddubsw + vpmaddwd leave lanes 0-3 the sum of values 0..15 and lanes 4-7 of 16..31 (Q6_K's
 * two halves), and an 8-lane add tree the whole block (Q4_K, Q5_K: unsigned values, the min term from the
 * activations' block sum; Q6_K: q - 32 with the sign trick). A decode step (one token) takes rows four at a time
 * and in pairs instead (kern_x86_kdec.h: q6_rows4_ / q6_rows2_, and for Q4_K / Q5_K k45_rows4_ / k45_rows2_ over
 * k4_sb_, the token's quants laid out by pairs of blocks, so a quarter fewer multiplies). */
static inline int32_t FN(hsum_i8_)(__m256i v) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}

/* the sums of lanes 0-3 and of lanes 4-7 */
static inline void FN(hsum_halves_)(__m256i v, int32_t *lo, int32_t *hi) {
    __m128i a = _mm256_castsi256_si128(v), b = _mm256_extracti128_si256(v, 1);
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, 0x4E));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4E));
    *lo = _mm_cvtsi128_si32(_mm_add_epi32(a, _mm_shuffle_epi32(a, 0xB1)));
    *hi = _mm_cvtsi128_si32(_mm_add_epi32(b, _mm_shuffle_epi32(b, 0xB1)));
}

#include "kern_x86_kq2.h"      /* Q2_K, Q3_K, IQ4_XS: kq2_rows_any_ */

/* One row's super-block sb of Q4_K / Q5_K / Q6_K unpacked: v[j] = block j's 32 values in order, unsigned (Q6_K its
 * q, 0..63: the offset 32 comes off through the activations' sums of 16), *sc the integer sub-scales (Q4_K / Q5_K:
 * bytes 0-7 the 8 scales, 8-15 the 8 mins, gg_scale_min_k4's bits; Q6_K: its 16 signed scales), *d / *dmin the
 * super-block's float factors (Q6_K: d only) */
static ALWAYS_INLINE void FN(kq_unpack_)(int32_t type, const uint8_t *row, int64_t sb, __m256i *v, __m128i *sc,
                                         float *d, float *dmin) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (type == GG_Q6_K) {
        const uint8_t *x = row + sb * 210;
        const __m256i m2 = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
            const __m256i hb[4] = {_mm256_and_si256(qh, m2), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 4), m2),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 6), m2)};
            const __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                   _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int p = 0; p < 4; p++) v[4 * h + p] = _mm256_or_si256(lo[p], _mm256_slli_epi16(hb[p], 4));
        }
        *sc = _mm_loadu_si128((const __m128i *)(x + 192));
        *d = FN(h2f_)(x + 208);
        *dmin = 0.0f;
        return;
    }
    const int q5 = type == GG_Q5_K;
    const uint8_t *x = row + sb * (q5 ? 176 : 144);
    const __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(x + 16)) : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        const __m256i l = _mm256_loadu_si256((const __m256i *)(x + (q5 ? 48 : 16) + 32 * p));
        v[2 * p] = _mm256_and_si256(l, m4);
        v[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        if (q5) {
            const __m256i one = _mm256_set1_epi8(1);
            v[2 * p] = _mm256_or_si256(v[2 * p], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4));
            v[2 * p + 1] = _mm256_or_si256(v[2 * p + 1], _mm256_slli_epi16(
                _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4));
        }
    }
    /* the 8 6-bit scales and mins (gg_scale_min_k4's bits) by word shifts: scales in bytes 0-7, mins in 8-15 */
    uint32_t u[4];
    memcpy(u, x + 4, 12);
    const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const uint32_t mins_lo = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = mins_lo;
    u[0] &= k1;
    *sc = _mm_loadu_si128((const __m128i *)u);
    *d = FN(h2f_)(x);
    *dmin = FN(h2f_)(x + 2);
}

/* the sums of a's 8 lanes and of b's */
static inline void FN(hsum2_)(__m256i a, __m256i b, int32_t *sa, int32_t *sb) {
    const __m256i t = _mm256_hadd_epi32(a, b);
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_hadd_epi32(u, u);
    *sa = _mm_cvtsi128_si32(u);
    *sb = _mm_extract_epi32(u, 1);
}

/* One row against nt <= 4 tokens (kern_gguf.h's gg_kq8_super, the same bits): each super-block unpacked once for
 * the tokens; a block's 32 values by vpmaddubsw, its sub-scale by vpmaddwd (Q6_K: one scale a 128-bit half), the
 * super-block's 8 blocks one integer sum; the mins (Q6_K: its offset 32) from the activations' sums of 16 by one
 * vpmaddwd; then the reference's float steps */
static ALWAYS_INLINE void FN(kq8_row_)(int32_t type, const uint8_t *row, const pt_act *a, int64_t t0, const int nt,
                                       float *out) {
    const int64_t K = a->K, nb = K / QK, nh = K / 16;
    const int q6 = type == GG_Q6_K;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        __m256i v[8], s16[8], m16;
        __m128i sc;
        float d, dmin;
        FN(kq_unpack_)(type, row, sb, v, &sc, &d, &dmin);
        if (q6) {
            int8_t b[16];
            _mm_storeu_si128((__m128i *)b, sc);
            for (int j = 0; j < 8; j++) s16[j] = _mm256_set_m128i(_mm_set1_epi16(b[2 * j + 1]), _mm_set1_epi16(b[2 * j]));
            m16 = _mm256_cvtepi8_epi16(sc);
        } else {
            uint8_t b[16];
            _mm_storeu_si128((__m128i *)b, sc);
            for (int j = 0; j < 8; j++) s16[j] = _mm256_set1_epi16(b[j]);
            m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
                                                                            14, 14, 15, 15)));
        }
        for (int tj = 0; tj < nt; tj++) {
            const int64_t t = t0 + tj;
            const int8_t *xq = a->q + t * K + sb * 256;
            __m256i acc = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i p = _mm256_maddubs_epi16(v[j], _mm256_loadu_si256((const __m256i *)(xq + 32 * j)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s16[j]));
            }
            const __m256i mv = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)(a->h + t * nh + sb * 16)));
            int32_t isum, msum;
            if (q6) acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(mv, 5));
            FN(hsum2_)(acc, mv, &isum, &msum);
            const float dx = a->d[t * nb + sb * 8];
            float dd = d * dx;
            GG_ROUNDED(dd);
            float p = dd * (float)isum;
            GG_ROUNDED(p);
            sum[tj] += p;
            if (!q6) {
                float dm = dmin * dx;
                GG_ROUNDED(dm);
                float pm = dm * (float)msum;
                GG_ROUNDED(pm);
                sum[tj] -= pm;
            }
        }
    }
    for (int j = 0; j < nt; j++) out[j] = sum[j];
}

#include "kern_x86_kdec.h"     /* a decode step's Q4_K / Q5_K / Q6_K rows in fours and pairs: kq8_rows_ */

/* ---- GGUF's 32-value block types with SIMD kernels: Q4_1, Q5_0, Q5_1, IQ4_NL (kern_gguf.h's arithmetic) ----
 * A block's 32 values unpacked into 32 bytes in order (nibbles low then high, Q5's fifth bits spread from their 32-bit
 * word, IQ4_NL's through its table with vpshufb); 8 blocks of a token reduced by one add tree and their float terms
 * computed 8 at a time, then added to the row's sum in the reference's order. */

/* bit j of the 32-bit word qh as 0x10 in byte j (the fifth bit of value j) */
static inline __m256i FN(bits_to_0x10_)(uint32_t qh) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

/* block b's 32 values as bytes (unsigned for Q4_1 / Q5_0 / Q5_1; IQ4_NL's signed table values), its scale d and min m */
static inline __m256i FN(b32_values_)(int32_t type, const uint8_t *row, int64_t b, float *d, float *m) {
    if (type == GG_IQ4_NL) {
        const uint8_t *x = row + b * 18;
        *d = FN(h2f_)(x);
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_TABLE_G));
        return _mm256_shuffle_epi8(table, FN(q4_unpack_)(x + 2));
    }
    const int q5 = type != GG_Q4_1, with_min = type != GG_Q5_0;
    const uint8_t *x = row + b * (q5 ? (with_min ? 24 : 22) : 20);
    *d = FN(h2f_)(x);
    *m = with_min ? FN(h2f_)(x + 2) : 0.0f;
    const uint8_t *qs = x + (with_min ? 4 : 2) + (q5 ? 4 : 0);
    __m256i v = FN(q4_unpack_)(qs);
    if (q5) {
        uint32_t qh;
        memcpy(&qh, x + (with_min ? 4 : 2), 4);
        v = _mm256_or_si256(v, FN(bits_to_0x10_)(qh));
    }
    return v;
}

static ALWAYS_INLINE void FN(b32_row_)(int32_t type, const uint8_t *row, const pt_act *a, int64_t t0, const int nt,
                                       float *out) {
    const int64_t K = a->K, nb = K / QK;
    const __m256i ones = _mm256_set1_epi16(1);
    const int signed_values = type == GG_IQ4_NL, with_min = type == GG_Q4_1 || type == GG_Q5_1;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t b0 = 0;
    for (; b0 < nb; b0 += 8) {
        const int n = nb - b0 < 8 ? (int)(nb - b0) : 8;
        __m256i v[8], av[8];
        float d[8] = {0}, m[8] = {0};
        for (int j = 0; j < n; j++) {
            v[j] = FN(b32_values_)(type, row, b0 + j, &d[j], &m[j]);
            if (signed_values) av[j] = _mm256_sign_epi8(v[j], v[j]);
        }
        for (int j = n; j < 8; j++) v[j] = av[j] = _mm256_setzero_si256();
        for (int tj = 0; tj < nt; tj++) {
            const int64_t t = t0 + tj;
            const int8_t *xq = a->q + t * K + b0 * QK;
            __m256i p[8];
            for (int j = 0; j < 8; j++) {
                if (j >= n) {
                    p[j] = _mm256_setzero_si256();
                    continue;
                }
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + j * QK));
                p[j] = _mm256_madd_epi16(signed_values ? _mm256_maddubs_epi16(av[j], _mm256_sign_epi8(xv, v[j]))
                                                       : _mm256_maddubs_epi16(v[j], xv), ones);
            }
            const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
            __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(e, g, 0x20), _mm256_permute2x128_si256(e, g, 0x31));
            float dx8[8] = {0}, xs8[8] = {0};
            int32_t s8[8] = {0};
            for (int j = 0; j < n; j++) {
                dx8[j] = a->d[t * nb + b0 + j];
                s8[j] = a->s[t * nb + b0 + j];
            }
            const __m256i sv = _mm256_loadu_si256((const __m256i *)s8);
            if (type == GG_Q5_0) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(sv, 4));   /* values q - 16 */
            const __m256 dx = _mm256_loadu_ps(dx8);
            float tr[8], mr[8];
            __m256 tv = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(d), dx), _mm256_cvtepi32_ps(isum));
            NO_FUSE(tv);
            _mm256_storeu_ps(tr, tv);
            if (with_min) {
                __m256 mv = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(m), dx), _mm256_cvtepi32_ps(sv));
                NO_FUSE(mv);
                _mm256_storeu_ps(mr, mv);
                for (int j = 0; j < n; j++) {
                    sum[tj] += tr[j];
                    sum[tj] += mr[j];
                }
            } else {
                for (int j = 0; j < n; j++) sum[tj] += tr[j];
            }
            (void)xs8;
        }
    }
    for (int j = 0; j < nt; j++) out[j] = sum[j];
}

/* b32_row_ for 8 rows side by side, each row's sum in a lane: for each block in order, the 8 rows' integer sums come
 * out of one add tree with lane i = row i, and their float terms are added 8 at a time, in each row's order: the same
 * bits as a row alone, without its 8 dependent float adds per 8 blocks (Q5_0 as stored: 2.3x a row at a time). */
static ALWAYS_INLINE void FN(b32_rows8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, const pt_act *a,
                                         int64_t t0, const int nt, float *y, int64_t ldy, int accumulate) {
    const int64_t K = a->K, nb = K / QK;
    const __m256i ones = _mm256_set1_epi16(1);     /* DOT_ACC's, without VNNI */
    (void)ones;
    const int signed_values = type == GG_IQ4_NL, with_min = type == GG_Q4_1 || type == GG_Q5_1;
    const int64_t bb = type == GG_Q4_1 ? 20 : type == GG_Q5_0 ? 22 : type == GG_Q5_1 ? 24 : 18;
    __m256 acc[4];
    for (int tj = 0; tj < nt; tj++) acc[tj] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i v[8], av[8];
        float d[8], m[8];
        for (int i = 0; i < 8; i++) {
            const uint8_t *row = w + (r + i) * rb;
            const uint8_t *pf = row + b * bb + PREFETCH_AHEAD;
            if (pf >= row + rb) pf += 7 * rb;
            if ((b & 1) == 0) _mm_prefetch((const char *)pf, _MM_HINT_T0);
            m[i] = 0.0f;
            v[i] = FN(b32_values_)(type, row, b, &d[i], &m[i]);
            av[i] = signed_values ? _mm256_sign_epi8(v[i], v[i]) : v[i];
        }
        const __m256 dv = _mm256_loadu_ps(d), mv = _mm256_loadu_ps(m);
        for (int tj = 0; tj < nt; tj++) {
            const int64_t t = t0 + tj;
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + t * K + b * QK));
            __m256i p[8];
            for (int i = 0; i < 8; i++)     /* |pairs| <= 2 * 127 * 127: no saturation, VNNI or not */
                p[i] = signed_values ? DOT_ACC(_mm256_setzero_si256(), av[i], _mm256_sign_epi8(xv, v[i]))
                                     : DOT_ACC(_mm256_setzero_si256(), v[i], xv);
            const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
            __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(e, g, 0x20), _mm256_permute2x128_si256(e, g, 0x31));
            const int32_t s = a->s[t * nb + b];
            if (type == GG_Q5_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * s));   /* values q - 16 */
            const __m256 dx = _mm256_set1_ps(a->d[t * nb + b]);
            __m256 tv = _mm256_mul_ps(_mm256_mul_ps(dv, dx), _mm256_cvtepi32_ps(isum));
            NO_FUSE(tv);
            acc[tj] = _mm256_add_ps(acc[tj], tv);
            if (with_min) {
                __m256 mt = _mm256_mul_ps(_mm256_mul_ps(mv, dx), _mm256_set1_ps((float)s));
                NO_FUSE(mt);
                acc[tj] = _mm256_add_ps(acc[tj], mt);
            }
        }
    }
    for (int tj = 0; tj < nt; tj++) {
        float *out = y + (t0 + tj) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[tj]) : acc[tj]);
    }
}

static ALWAYS_INLINE void FN(b32_rows8_nt_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, const pt_act *a,
                                            int64_t t0, int64_t nt, float *y, int64_t ldy, int accumulate) {
    switch (nt) {
    case 1: FN(b32_rows8_)(type, w, rb, r, a, t0, 1, y, ldy, accumulate); break;
    case 2: FN(b32_rows8_)(type, w, rb, r, a, t0, 2, y, ldy, accumulate); break;
    case 3: FN(b32_rows8_)(type, w, rb, r, a, t0, 3, y, ldy, accumulate); break;
    default: FN(b32_rows8_)(type, w, rb, r, a, t0, 4, y, ldy, accumulate); break;
    }
}

/* ---- GGUF block types in a prefill: 8 rows unpacked once, then multiplied like an interleaved q8_0 group ----
 * A row at a time (above), each super-block's values are unpacked again for every few tokens: fine for a decode,
 * but a prefill's hundreds of tokens then pay the unpacking hundreds of times (0.5B Q4_K_M prefill 0.30x
 * llama.cpp). Here a group of 8 rows is unpacked once per call, by the reference's own gg_block (kern_gguf.h), into
 * the interleaved layout (per 32-value block 8 vectors, lane i of vector k = values 4k..4k+3 of row i, and each
 * float factor for the 8 rows as one vector), and every token of the call is multiplied against it from L1 / L2 in
 * tiles of 8, 8 rows' block sums per vector with no horizontal adds. Each row's terms are the reference's, in its
 * order, so the same bits. Every type takes it (Q2_K's min terms, over half-blocks, with the activations' half
 * sums computed once per call). */
/* GT_BLOCK (internal.h, 320): bytes of one unpacked block of 8 rows, 8 x 32 values then 2 factor vectors; GT_BLOCK4
 * (384) Q2_K's, with 4 factor vectors (the scale and min factors of each half-block) */

/* a super-block of 8 rows (v[i][j]: row i's block j; fa / fb[i]: row i's factors, lane j = block j) stored as 8
 * unpacked blocks at blk */
static ALWAYS_INLINE void FN(gguf_store8_)(__m256i v[8][8], __m256i *fa, __m256i *fb, uint8_t *buf) {
    FN(transpose8_)(fa);        /* lane i = row i: fa[j] the 8 rows' factors of block j */
    FN(transpose8_)(fb);
    for (int j = 0; j < 8; j++) {
        uint8_t *blk = buf + j * GT_BLOCK;
        __m256i vv[8];
        for (int i = 0; i < 8; i++) vv[i] = v[i][j];
        FN(transpose8_)(vv);
        for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + 32 * k), vv[k]);
        _mm256_storeu_si256((__m256i *)(blk + 256), fa[j]);
        _mm256_storeu_si256((__m256i *)(blk + 288), fb[j]);
    }
}

/* rows r..r+7 unpacked into buf (nb blocks of GT_BLOCK bytes) */
static void FN(gguf_unpack8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, int64_t nb, uint8_t *buf) {
    if (PT_KQ8(type)) {
        /* a super-block of 8 rows at a time by the decode kernel's unpacking, into GT_BLOCK4 blocks: the values,
         * then the sub-scales as vpmaddwd takes them after vpmaddubsw (16-bit pairs, row i's at 2i and 2i + 1):
         * +256 each block's scales (Q6_K: its first halves'), +288 Q4_K / Q5_K the mins as 32-bit lanes, Q6_K the
         * second halves' scales, +320 Q6_K the two halves' scales side by side (against the activations' two sums
         * of 16), Q4_K / Q5_K in an even block the mins of it and the next side by side (against the two blocks'
         * sums); +352 the 8 rows' d in the super-block's first block, dmin in its second */
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            __m256i v[8][8];
            int8_t sc[8][16];
            float fd[8], fm[8];
            for (int i = 0; i < 8; i++) {
                __m128i s;
                FN(kq_unpack_)(type, w + (r + i) * rb, sb, v[i], &s, &fd[i], &fm[i]);
                _mm_storeu_si128((__m128i *)sc[i], s);
            }
            for (int j = 0; j < 8; j++) {
                uint8_t *blk = buf + (sb * 8 + j) * GT_BLOCK4;
                __m256i vv[8];
                for (int i = 0; i < 8; i++) vv[i] = v[i][j];
                FN(transpose8_)(vv);
                for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + 32 * k), vv[k]);
                int16_t s0[16], s1[16], s01[16], m2[16];
                int32_t m[8];
                for (int i = 0; i < 8; i++) {
                    if (type == GG_Q6_K) {
                        s0[2 * i] = s0[2 * i + 1] = s01[2 * i] = sc[i][2 * j];
                        s1[2 * i] = s1[2 * i + 1] = s01[2 * i + 1] = sc[i][2 * j + 1];
                    } else {
                        s0[2 * i] = s0[2 * i + 1] = (uint8_t)sc[i][j];
                        m[i] = (uint8_t)sc[i][8 + j];
                        m2[2 * i] = (uint8_t)sc[i][8 + (j & ~1)];
                        m2[2 * i + 1] = (uint8_t)sc[i][8 + (j | 1)];
                    }
                }
                memcpy(blk + 256, s0, 32);
                if (type == GG_Q6_K) {
                    memcpy(blk + 288, s1, 32);
                    memcpy(blk + 320, s01, 32);
                } else {
                    memcpy(blk + 288, m, 32);
                    if (!(j & 1)) memcpy(blk + 320, m2, 32);
                }
                if (j < 2) memcpy(blk + 352, j == 0 ? fd : fm, 32);
            }
        }
        return;
    }
    if (type == GG_Q3_K || type == GG_IQ4_XS) {     /* likewise by kq2_unpack_ (IQ4_XS: one factor per block) */
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            __m256i v[8][8], fa[8], fb[8];
            for (int i = 0; i < 8; i++) {
                __m256 f[4];
                f[1] = _mm256_setzero_ps();
                FN(kq2_unpack_)(type, w + (r + i) * rb, sb, v[i], f);
                if (type == GG_Q3_K)     /* q + 4 back to q, signed, as the tile takes it */
                    for (int j = 0; j < 8; j++) v[i][j] = _mm256_sub_epi8(v[i][j], _mm256_set1_epi8(4));
                fa[i] = _mm256_castps_si256(f[0]);
                fb[i] = _mm256_castps_si256(f[1]);
            }
            FN(gguf_store8_)(v, fa, fb, buf + sb * 8 * GT_BLOCK);
        }
        return;
    }
    if (type == GG_Q2_K) {      /* its 4 factor vectors after the values */
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            __m256i v[8][8], f[4][8];
            for (int i = 0; i < 8; i++) {
                __m256 fi[4];
                FN(kq2_unpack_)(GG_Q2_K, w + (r + i) * rb, sb, v[i], fi);
                for (int k = 0; k < 4; k++) f[k][i] = _mm256_castps_si256(fi[k]);
            }
            for (int k = 0; k < 4; k++) FN(transpose8_)(f[k]);
            for (int j = 0; j < 8; j++) {
                uint8_t *blk = buf + (sb * 8 + j) * GT_BLOCK4;
                __m256i vv[8];
                for (int i = 0; i < 8; i++) vv[i] = v[i][j];
                FN(transpose8_)(vv);
                for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + 32 * k), vv[k]);
                for (int k = 0; k < 4; k++) _mm256_storeu_si256((__m256i *)(blk + 256 + 32 * k), f[k][j]);
            }
        }
        return;
    }
    int8_t v[8][QK];
    gg_terms t;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = buf + b * GT_BLOCK;
        float *f = (float *)(blk + 8 * 32);
        for (int i = 0; i < 8; i++) {
            gg_block(type, w + (r + i) * rb, b, v[i], &t);
            f[i] = t.f[0];
            f[8 + i] = t.n > 1 ? t.f[1] : 0.0f;
        }
        __m256i vv[8];
        for (int i = 0; i < 8; i++) vv[i] = _mm256_loadu_si256((const __m256i *)v[i]);
        FN(transpose8_)(vv);
        for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + 32 * k), vv[k]);
    }
}

/* the 8 unpacked rows against tokens t0..t0+n-1: kind 0 one term (d, sum v x); 1 two whole-block terms, the second
 * (m, sum x) added (Q4_1, Q5_1); 3 a term per half-block (Q3_K); 4 per half-block a scale term and a min term
 * subtracted, xh[2 (t nb + b) + h] the activations' half sums (Q2_K). (The PT_KQ8 types: kq8_tile_ below.) */
static ALWAYS_INLINE void FN(gguf_tile_)(const uint8_t *buf, const pt_act *a, int64_t t0, const int n, float *y,
                                         int64_t ldy, int64_t r, int accumulate, const int kind, const int sgn,
                                         const int32_t *xh) {
    const int64_t K = a->K, nb = K / QK, bs = kind == 4 ? GT_BLOCK4 : GT_BLOCK;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = buf + b * bs;
        __m256i lo[GT], hi[GT];
        for (int j = 0; j < n; j++) lo[j] = hi[j] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + 32 * k));
            const __m256i u = sgn ? _mm256_sign_epi8(wv, wv) : wv;
            for (int j = 0; j < n; j++) {
                const __m256i xb = FN(bcast4_)(a->q + (t0 + j) * K + b * QK + 4 * k);
                const __m256i xs = sgn ? _mm256_sign_epi8(xb, wv) : xb;
                if (kind >= 3 && k >= 4) hi[j] = DOT_ACC(hi[j], u, xs);
                else lo[j] = DOT_ACC(lo[j], u, xs);
            }
        }
        const __m256 f0 = _mm256_loadu_ps((const float *)(blk + 256)), f1 = _mm256_loadu_ps((const float *)(blk + 288));
        if (kind == 4) {        /* the reference's order: + scale, - min of the first half, then of the second */
            const __m256 f2 = _mm256_loadu_ps((const float *)(blk + 320)), f3 = _mm256_loadu_ps((const float *)(blk + 352));
            for (int j = 0; j < n; j++) {
                const int64_t tb = (t0 + j) * nb + b;
                const __m256 dx = _mm256_set1_ps(a->d[tb]);
                __m256 p0 = _mm256_mul_ps(_mm256_mul_ps(f0, dx), _mm256_cvtepi32_ps(lo[j]));
                __m256 m0 = _mm256_mul_ps(_mm256_mul_ps(f1, dx), _mm256_set1_ps((float)xh[2 * tb]));
                __m256 p1 = _mm256_mul_ps(_mm256_mul_ps(f2, dx), _mm256_cvtepi32_ps(hi[j]));
                __m256 m1 = _mm256_mul_ps(_mm256_mul_ps(f3, dx), _mm256_set1_ps((float)xh[2 * tb + 1]));
                NO_FUSE(p0);
                NO_FUSE(m0);
                NO_FUSE(p1);
                NO_FUSE(m1);
                acc[j] = _mm256_sub_ps(_mm256_add_ps(acc[j], p0), m0);
                acc[j] = _mm256_sub_ps(_mm256_add_ps(acc[j], p1), m1);
            }
            continue;
        }
        for (int j = 0; j < n; j++) {
            const int64_t tb = (t0 + j) * nb + b;
            const __m256 dx = _mm256_set1_ps(a->d[tb]);
            __m256 p0 = _mm256_mul_ps(_mm256_mul_ps(f0, dx), _mm256_cvtepi32_ps(lo[j]));
            NO_FUSE(p0);
            acc[j] = _mm256_add_ps(acc[j], p0);
            if (kind) {
                __m256 p1 = _mm256_mul_ps(_mm256_mul_ps(f1, dx), _mm256_cvtepi32_ps(
                    kind >= 3 ? hi[j] : _mm256_set1_epi32(a->s[tb])));
                NO_FUSE(p1);
                acc[j] = _mm256_add_ps(acc[j], p1);
            }
        }
    }
    (void)ones;
    for (int j = 0; j < n; j++) {
        float *out = y + (t0 + j) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[j]) : acc[j]);
    }
}

/* kq8_tile_'s integer sums of super-block sb's values (is[j]: token j's 8 rows), `run` of a half-block's 4 vectors
 * (Q5_K / Q6_K) added in 16 bits before each vpmaddwd; a constant in each copy */
static ALWAYS_INLINE void FN(kq8_sb_)(const uint8_t *buf, const pt_act *a, int64_t t0, const int n, int64_t sb,
                                      const int32_t type, const int run, __m256i *is) {
    const int64_t K = a->K;
    const int q6 = type == GG_Q6_K;
    (void)q6;
    for (int jb = 0; jb < 8; jb++) {
        const int64_t b = sb * 8 + jb;
        const uint8_t *blk = buf + b * GT_BLOCK4;
#if !DOT_ACC16
        /* VNNI: a half block at a time (4 weight vectors, the tile's sums live), each token's 16 values per row by
         * four chained vpdpbusd (lanes: the 8 rows), times the half's scales by one vpmulld (the scales' 16-bit
         * pairs' high halves, sign-extended): the same integer sums as the vpmaddwd ones, in 12 ops a token and
         * block where those take 17-20. run is the 16-bit path's alone. */
        (void)run;
        for (int h = 0; h < 2; h++) {
            const __m256i S = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)(blk + (q6 && h ? 288 : 256))), 16);
            __m256i wv[4];
            for (int k = 0; k < 4; k++) wv[k] = _mm256_loadu_si256((const __m256i *)(blk + 32 * (4 * h + k)));
            for (int j = 0; j < n; j++) {
                const int8_t *xq = a->q + (t0 + j) * K + b * QK + 16 * h;
                __m256i d = DOT_ACC(_mm256_setzero_si256(), wv[0], FN(bcast4_)(xq));
                for (int k = 1; k < 4; k++) d = DOT_ACC(d, wv[k], FN(bcast4_)(xq + 4 * k));
                is[j] = _mm256_add_epi32(is[j], _mm256_mullo_epi32(d, S));
            }
        }
#else
        if (run == 8) {             /* Q4_K: one 16-bit sum of the block's 8 vectors per token */
            const __m256i S0 = _mm256_loadu_si256((const __m256i *)(blk + 256));
            __m256i wv[8];
            for (int k = 0; k < 8; k++) wv[k] = _mm256_loadu_si256((const __m256i *)(blk + 32 * k));
            for (int j = 0; j < n; j++) {
                const int8_t *xq = a->q + (t0 + j) * K + b * QK;
                __m256i p = _mm256_maddubs_epi16(wv[0], FN(bcast4_)(xq));
                for (int k = 1; k < 8; k++) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(wv[k], FN(bcast4_)(xq + 4 * k)));
                is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(p, S0));
            }
        } else {
            /* Q5_K / Q6_K: their runs end at the block's halves, so a half at a time: 4 weight vectors and the
             * tile's 8 sums live, not 8 and 8 (which spilled) */
            for (int h = 0; h < 2; h++) {
                const __m256i S = _mm256_loadu_si256((const __m256i *)(blk + (q6 && h ? 288 : 256)));
                __m256i wv[4];
                for (int k = 0; k < 4; k++) wv[k] = _mm256_loadu_si256((const __m256i *)(blk + 32 * (4 * h + k)));
                for (int j = 0; j < n; j++) {
                    const int8_t *xq = a->q + (t0 + j) * K + b * QK + 16 * h;
                    for (int k0 = 0; k0 < 4; k0 += run) {
                        __m256i p = _mm256_maddubs_epi16(wv[k0], FN(bcast4_)(xq + 4 * k0));
                        for (int k = k0 + 1; k < k0 + run; k++)
                            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(wv[k], FN(bcast4_)(xq + 4 * k)));
                        is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(p, S));
                    }
                }
            }
        }
#endif
    }
}

/* the 8 unpacked rows of a PT_KQ8 type (gguf_unpack8_'s GT_BLOCK4 layout) against tokens t0..t0+n-1, the same
 * bits as gg_kq8_super: per block and token the 8 rows' sums of 4 values in 16-bit lanes by vpmaddubsw (added in
 * 16 bits while they cannot overflow: Q4_K 8 of them, Q5_K 4, Q6_K 2, or 4 in a token's super-block whose quants
 * pt_q6_flags found small enough: 1.12x a 7B Q6_K prefill on Zen 3), times the rows' sub-scales by vpmaddwd into
 * the super-block's integer sums, the mins' (Q6_K the offset's) sums from the activations' block sums (sums of 16),
 * then the reference's float steps for the 8 rows at once */
static ALWAYS_INLINE void FN(kq8_tile_)(const uint8_t *buf, const pt_act *a, int64_t t0, const int n, float *y,
                                        int64_t ldy, int64_t r, int accumulate, const int32_t type) {
    const int64_t K = a->K, nb = K / QK, nh = K / 16;
    const int q6 = type == GG_Q6_K, run = type == GG_Q4_K ? 8 : type == GG_Q5_K ? 4 : 2;
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        __m256i is[GT], ms[GT];
        for (int j = 0; j < n; j++) is[j] = _mm256_setzero_si256();
#if DOT_ACC16
        /* Q6_K: whether every token's super-block can add a half-block's 4 vectors in 16 bits (one test a tile and
         * super-block: a test a token inside the loop cost more than it saved) */
        int wide6 = q6 && a->f6;
        for (int j = 0; j < n && wide6; j++) wide6 = a->f6[(t0 + j) * (nb / 8) + sb];
        if (q6 && wide6) FN(kq8_sb_)(buf, a, t0, n, sb, GG_Q6_K, 4, is);   /* pt_q6_flags: within int16 */
        else
#endif
        FN(kq8_sb_)(buf, a, t0, n, sb, type, run, is);
        /* the min terms (Q6_K: the offset's) once the values are done, so their sums are not live beside the
         * values' 8 weight vectors and 8 sums (they spilled); Q4_K / Q5_K two blocks per vpmaddwd (mins side by side
         * against the two blocks' sums), Q6_K a block's two halves per vpmaddwd. Integer sums: the same values. */
        const uint8_t *sbk = buf + sb * 8 * GT_BLOCK4;
        for (int j = 0; j < n; j++) {
            __m256i m = _mm256_setzero_si256();
            if (q6) {
                const int16_t *hx = a->h + (t0 + j) * nh + 16 * sb;
                for (int jb = 0; jb < 8; jb++) {
                    const uint32_t x2 = (uint32_t)(uint16_t)hx[2 * jb] | (uint32_t)(uint16_t)hx[2 * jb + 1] << 16;
                    m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(sbk + jb * GT_BLOCK4 + 320)),
                                                              _mm256_set1_epi32((int32_t)x2)));
                }
            } else {
                const int32_t *xs = a->s + (t0 + j) * nb + sb * 8;
                for (int c = 0; c < 4; c++) {
                    const uint32_t x2 = (uint32_t)(uint16_t)xs[2 * c] | (uint32_t)(uint16_t)xs[2 * c + 1] << 16;
                    m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(sbk + 2 * c * GT_BLOCK4 + 320)),
                                                              _mm256_set1_epi32((int32_t)x2)));
                }
            }
            ms[j] = m;
        }
        const uint8_t *b0 = buf + sb * 8 * GT_BLOCK4;
        const __m256 D = _mm256_loadu_ps((const float *)(b0 + 352));
        const __m256 Dm = q6 ? D : _mm256_loadu_ps((const float *)(b0 + GT_BLOCK4 + 352));
        for (int j = 0; j < n; j++) {
            const __m256 dx = _mm256_set1_ps(a->d[(t0 + j) * nb + sb * 8]);
            const __m256i isum = q6 ? _mm256_sub_epi32(is[j], _mm256_slli_epi32(ms[j], 5)) : is[j];
            __m256 dd = _mm256_mul_ps(D, dx);
            NO_FUSE(dd);
            __m256 p = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum));
            NO_FUSE(p);
            acc[j] = _mm256_add_ps(acc[j], p);
            if (!q6) {
                __m256 dm = _mm256_mul_ps(Dm, dx);
                NO_FUSE(dm);
                __m256 pm = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(ms[j]));
                NO_FUSE(pm);
                acc[j] = _mm256_sub_ps(acc[j], pm);
            }
        }
    }
    for (int j = 0; j < n; j++) {
        float *out = y + (t0 + j) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[j]) : acc[j]);
    }
}

/* kq8_tile_ over tokens t..t+n-1 (n <= GT), the type and the count constants in each copy */
static ALWAYS_INLINE void FN(kq8_tiles_t_)(const uint8_t *buf, const pt_act *a, int64_t t, int64_t n, float *y,
                                           int64_t ldy, int64_t r, int accumulate, const int32_t type) {
    if (n == GT) {
        FN(kq8_tile_)(buf, a, t, GT, y, ldy, r, accumulate, type);
        return;
    }
#define KQ8_TAIL(m) FN(kq8_tile_)(buf, a, t, m, y, ldy, r, accumulate, type)
    TOKENS_LEFT(n, KQ8_TAIL)
#undef KQ8_TAIL
}

static void FN(kq8_tiles_)(const uint8_t *buf, const pt_act *a, int64_t t, int64_t n, float *y, int64_t ldy,
                           int64_t r, int accumulate, int32_t type) {
    if (type == GG_Q4_K) FN(kq8_tiles_t_)(buf, a, t, n, y, ldy, r, accumulate, GG_Q4_K);
    else if (type == GG_Q5_K) FN(kq8_tiles_t_)(buf, a, t, n, y, ldy, r, accumulate, GG_Q5_K);
    else FN(kq8_tiles_t_)(buf, a, t, n, y, ldy, r, accumulate, GG_Q6_K);
}

/* tokens t..t+n-1 (n <= GT) of one unpacked group: a whole tile, or the tail with n a constant in each copy */
static ALWAYS_INLINE void FN(gguf_tiles_part_)(const uint8_t *buf, const pt_act *a, int64_t t, int64_t n, float *y,
                                               int64_t ldy, int64_t r, int accumulate, const int kind, const int sgn,
                                               const int32_t *xh) {
    if (n == GT) {
        FN(gguf_tile_)(buf, a, t, GT, y, ldy, r, accumulate, kind, sgn, xh);
        return;
    }
#define GGUF_TAIL(m) FN(gguf_tile_)(buf, a, t, m, y, ldy, r, accumulate, kind, sgn, xh)
    TOKENS_LEFT(n, GGUF_TAIL)
#undef GGUF_TAIL
}

/* groups of 8 rows from r0 through the tiles; returns the first row not done (the rest: fewer than 8), or r0 when
 * the buffer cannot be had (the caller's row kernels then do them all). Up to GG_BATCH_BYTES of unpacked groups are
 * made at a time and every tile of 8 tokens goes through all of them before the next: a 7B matrix's activations
 * (512 tokens x 18944 columns: 9.7 MB) are then read once per batch of groups from beyond the L2 cache, not once per
 * group. Each (group, tile) product is the same call either way, so the same bits. */
#define GG_BATCH_BYTES (768 * 1024)
static int64_t FN(gguf_tiled_rows_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1,
                                    const pt_act *a, int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    /* Q2_K and the PT_KQ8 types: larger unpacked blocks; Q2_K: the activations' half-block sums, once for every
     * group */
    const int q2 = type == GG_Q2_K, kq8 = PT_KQ8(type);
    const size_t gbytes = (size_t)(nb * (q2 || kq8 ? GT_BLOCK4 : GT_BLOCK));
    int64_t G = (int64_t)(GG_BATCH_BYTES / gbytes), ngroups = (r1 - r0) / 8;
    if (G < 1) G = 1;
    if (G > ngroups) G = ngroups > 0 ? ngroups : 1;
    const size_t bytes = gbytes * (size_t)G;
    uint8_t *buf = malloc(bytes + (q2 ? (size_t)(T * nb * 2) * sizeof(int32_t) : 0));
    if (!buf) return r0;
    int32_t *xh = q2 ? (int32_t *)(buf + bytes) : NULL;
    for (int64_t i = 0; q2 && i < T * nb * 2; i++) {
        int32_t sum = 0;
        for (int l = 0; l < 16; l++) sum += a->q[16 * i + l];
        xh[i] = sum;
    }
    /* the values' signs (signed ones take the sign trick) and the terms, by type */
    const int sgn = type == GG_Q5_0 || type == GG_Q3_K || type == GG_IQ4_NL || type == GG_IQ4_XS;
    const int kind = type == GG_Q4_1 || type == GG_Q5_1 ? 1 : type == GG_Q3_K ? 3 : q2 ? 4 : 0;
    int64_t r = r0;
    while (r + 8 <= r1) {
        int64_t g = (r1 - r) / 8;
        if (g > G) g = G;
        for (int64_t i = 0; i < g; i++) FN(gguf_unpack8_)(type, w, rb, r + 8 * i, nb, buf + gbytes * i);
        for (int64_t t = 0; t < T; t += GT) {
            const int64_t n = T - t < GT ? T - t : GT;
            for (int64_t i = 0; i < g; i++) {
                const uint8_t *gb = buf + gbytes * i;
                const int64_t ri = r + 8 * i;
                if (kq8) FN(kq8_tiles_)(gb, a, t, n, y, ldy, ri, accumulate, type);
                else if (kind == 1) FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 1, 0, NULL);
                else if (kind == 3) FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 3, 1, NULL);
                else if (kind == 4) FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 4, 0, xh);
                else if (sgn) FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 0, 1, NULL);
                else FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 0, 0, NULL);
            }
        }
        r += 8 * g;
    }
    free(buf);
    return r;
}

static void FN(rows_gguf_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                           int64_t T, float *y, int64_t ldy, int accumulate) {
    if (T >= GT) {      /* a prefill, or a tile of sequences: 8 rows unpacked at a time */
        r0 = FN(gguf_tiled_rows_)(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        if (r0 >= r1) return;
    }
    if (type == GG_Q2_K || type == GG_Q3_K || type == GG_IQ4_XS) {
        FN(kq2_rows_any_)(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        return;
    }
    if (PT_KQ8(type)) {
        FN(kq8_rows_)(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        return;
    }
    if (type != GG_Q4_1 && type != GG_Q5_0 && type != GG_Q5_1 && type != GG_IQ4_NL) {
        rows_gguf_g(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        return;
    }
    {                   /* the 32-value types: groups of 8 rows, their sums side by side */
        for (; r0 + 8 <= r1; r0 += 8)
            for (int64_t t = 0; t < T; t += 4) {
                const int64_t nt = T - t < 4 ? T - t : 4;
                if (type == GG_Q5_0) FN(b32_rows8_nt_)(GG_Q5_0, w, rb, r0, a, t, nt, y, ldy, accumulate);
                else if (type == GG_Q4_1) FN(b32_rows8_nt_)(GG_Q4_1, w, rb, r0, a, t, nt, y, ldy, accumulate);
                else if (type == GG_Q5_1) FN(b32_rows8_nt_)(GG_Q5_1, w, rb, r0, a, t, nt, y, ldy, accumulate);
                else FN(b32_rows8_nt_)(GG_IQ4_NL, w, rb, r0, a, t, nt, y, ldy, accumulate);
            }
    }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * rb;
        _mm_prefetch((const char *)(row + rb), _MM_HINT_T0);
#define B32_ROW(t, n, o) FN(b32_row_)(type, row, a, t, n, o)
        ROW_TOKENS4(B32_ROW)
#undef B32_ROW
    }
}

