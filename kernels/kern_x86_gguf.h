/* The x86 kernels of GGUF's block types (kern_gguf.h's arithmetic, bit for bit), included by kern_x86.h for each
 * x86 path (the same target, SUFFIX and DOT_ACC): the K-quants and IQ4_XS decode 8 rows at a time (Q2_K, Q3_K and
 * IQ4_XS in kern_x86_kq2.h), the 32-value types likewise, and every type in a prefill through 8 rows unpacked once
 * into the interleaved layout. rows_gguf_ at the end is the path's table entry. */

/* ---- GGUF's K-quants (kern_gguf.h's arithmetic, bit for bit): Q4_K, Q5_K and Q6_K here ----
 * One row at a time, each super-block's values unpacked once for up to 4 tokens: a 32-value block is 32 bytes in
 * natural order, so vpmaddubsw + vpmaddwd leave lanes 0-3 the sum of values 0..15 and lanes 4-7 of 16..31 (Q6_K's
 * two halves), and an 8-lane add tree the whole block (Q4_K, Q5_K: unsigned values, the min term from the
 * activations' block sum; Q6_K: q - 32 with the sign trick). */
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

/* One row's super-block sb of Q4_K / Q5_K / Q6_K unpacked: v[j] = block j's 32 values in order (Q4_K / Q5_K the
 * unsigned q; Q6_K q - 32), fa / fb = the float factors of the 8 blocks (Q4_K / Q5_K: d sc_j and dmin m_j; Q6_K: the
 * scales of each block's first and second half, times d), computed as the reference's gg_block computes them. */
static ALWAYS_INLINE void FN(kq_unpack_)(int32_t type, const uint8_t *row, int64_t sb, __m256i *v, __m256 *fa,
                                         __m256 *fb) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 fv = _mm256_setzero_ps(), fmv = _mm256_setzero_ps(), f0 = fv, f1 = fv;
    if (type == GG_Q6_K) {
        const uint8_t *x = row + sb * 210;
        const int8_t *sc = (const int8_t *)(x + 192);
        const float d = FN(h2f_)(x + 208);
        const __m256i m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
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
            for (int p = 0; p < 4; p++)
                v[4 * h + p] = _mm256_sub_epi8(_mm256_or_si256(lo[p], _mm256_slli_epi16(hb[p], 4)), off);
        }
        /* the 16 scales times d, the even ones (each block's first half) and the odd ones apart */
        const __m128i s16 = _mm_loadu_si128((const __m128i *)sc);
        const __m128i ev = _mm_shuffle_epi8(s16, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
        const __m128i od = _mm_shuffle_epi8(s16, _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1));
        f0 = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(ev)));
        f1 = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(od)));
    } else {
        const int q5 = type == GG_Q5_K;
        const uint8_t *x = row + sb * (q5 ? 176 : 144);
        const float d = FN(h2f_)(x), dmin = FN(h2f_)(x + 2);
        const __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(x + 16)) : _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            const __m256i l = _mm256_loadu_si256((const __m256i *)(x + (q5 ? 48 : 16) + 32 * p));
            v[2 * p] = _mm256_and_si256(l, m4);
            v[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
            if (q5) {
                const __m256i one = _mm256_set1_epi8(1);
                v[2 * p] = _mm256_or_si256(v[2 * p], _mm256_slli_epi16(
                    _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), one), 4));
                v[2 * p + 1] = _mm256_or_si256(v[2 * p + 1], _mm256_slli_epi16(
                    _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p + 1), one), 4));
            }
        }
        /* the 8 6-bit scales and mins (gg_scale_min_k4's bits) by word shifts: scales in bytes 0-7 of u, mins
         * in bytes 8-15, then times d and dmin 8 at a time */
        uint32_t u[4];
        memcpy(u, x + 4, 12);
        const uint32_t k1 = 0x3f3f3f3fu, k2 = 0x0f0f0f0fu, k3 = 0x03030303u;
        u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
        const uint32_t mins_lo = u[1] & k1;
        u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
        u[2] = mins_lo;
        u[0] &= k1;
        const __m128i sm = _mm_loadu_si128((const __m128i *)u);
        fv = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)));
        fmv = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    }
    *fa = type == GG_Q6_K ? f0 : fv;
    *fb = type == GG_Q6_K ? f1 : fmv;
}

/* One row's super-block sb against tokens t0..t0+nt-1: the reference's float terms of its 8 blocks, 8 at a time, in
 * ta[tj] and tb[tj]: Q4_K / Q5_K ta = the scale terms, tb = the min terms (the row's sum takes + ta[j], then - tb[j],
 * block by block); Q6_K ta / tb = the terms of each block's first / second half (+ ta[j], then + tb[j]). */
static ALWAYS_INLINE void FN(kq_terms_)(int32_t type, const uint8_t *row, int64_t sb, const pt_act *a, int64_t t0,
                                        const int nt, __m256 *ta, __m256 *tb) {
    const int64_t K = a->K, nb = K / QK;
    const __m256i ones = _mm256_set1_epi16(1);
    {
        __m256i v[8];
        __m256 fa, fb;
        FN(kq_unpack_)(type, row, sb, v, &fa, &fb);
        __m256i av[8];
        if (type == GG_Q6_K)
            for (int j = 0; j < 8; j++) av[j] = _mm256_sign_epi8(v[j], v[j]);
        for (int tj = 0; tj < nt; tj++) {
            const int64_t t = t0 + tj, b0 = sb * 8;
            const int8_t *xq = a->q + t * K + b0 * QK;
            __m256i p[8];
            for (int j = 0; j < 8; j++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + j * QK));
                p[j] = type == GG_Q6_K ? DOT_ACC(_mm256_setzero_si256(), av[j], _mm256_sign_epi8(xv, v[j]))
                                       : DOT_ACC(_mm256_setzero_si256(), v[j], xv);
            }
            /* the 8 blocks' integer sums (Q6_K: their halves' sums) by one add tree, then the float steps of the
             * reference for 8 terms at once, added to the row's sum in the reference's order */
            const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
            const __m256 dx = _mm256_loadu_ps(a->d + t * nb + b0);
            if (type == GG_Q6_K) {
                /* e: lanes 0-3 the first halves of blocks 0-3, lanes 4-7 their second halves; g: blocks 4-7 */
                const __m256i h0 = _mm256_permute2x128_si256(e, g, 0x20), h1 = _mm256_permute2x128_si256(e, g, 0x31);
                __m256 t0v = _mm256_mul_ps(_mm256_mul_ps(fa, dx), _mm256_cvtepi32_ps(h0));
                __m256 t1v = _mm256_mul_ps(_mm256_mul_ps(fb, dx), _mm256_cvtepi32_ps(h1));
                NO_FUSE(t0v);
                NO_FUSE(t1v);
                ta[tj] = t0v;
                tb[tj] = t1v;
            } else {
                const __m256i isum = _mm256_add_epi32(_mm256_permute2x128_si256(e, g, 0x20),
                                                      _mm256_permute2x128_si256(e, g, 0x31));
                __m256 tv = _mm256_mul_ps(_mm256_mul_ps(fa, dx), _mm256_cvtepi32_ps(isum));
                __m256 mv = _mm256_mul_ps(_mm256_mul_ps(fb, dx),
                                          _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(a->s + t * nb + b0))));
                NO_FUSE(tv);
                NO_FUSE(mv);
                ta[tj] = tv;
                tb[tj] = mv;
            }
        }
    }
    (void)ones;
}

/* one row against nt <= 4 tokens: the terms added to the row's sum one by one, in the reference's order */
static ALWAYS_INLINE void FN(kq_row_)(int32_t type, const uint8_t *row, const pt_act *a, int64_t t0, const int nt,
                                      float *out) {
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float sign = type == GG_Q6_K ? 1.0f : -1.0f;
    for (int64_t sb = 0; sb < a->K / QK / 8; sb++) {
        __m256 ta[4], tb[4];
        FN(kq_terms_)(type, row, sb, a, t0, nt, ta, tb);
        for (int tj = 0; tj < nt; tj++) {
            float tr[8], mr[8];
            _mm256_storeu_ps(tr, ta[tj]);
            _mm256_storeu_ps(mr, tb[tj]);
            for (int j = 0; j < 8; j++) {
                sum[tj] += tr[j];
                sum[tj] = sign > 0 ? sum[tj] + mr[j] : sum[tj] - mr[j];
            }
        }
    }
    for (int j = 0; j < nt; j++) out[j] = sum[j];
}

static inline __m256 FN(cast_ps_)(__m256i v) { return _mm256_castsi256_ps(v); }

/* 8 rows against nt <= 4 tokens, each row's sum in a lane: a row alone waits on its 16 dependent float adds per
 * super-block (the reference's order), 8 rows side by side do them 8 at a time. The terms of the 8 rows are
 * transposed (lane i = row i) and added in the same order, so the same bits as a row alone. */
static ALWAYS_INLINE void FN(kq_rows8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, const pt_act *a,
                                        int64_t t0, const int nt, float *y, int64_t ldy, int accumulate) {
    __m256 acc[4];
    const int64_t sbytes = type == GG_Q6_K ? 210 : type == GG_Q5_K ? 176 : 144;
    for (int tj = 0; tj < nt; tj++) acc[tj] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < a->K / QK / 8; sb++) {
        __m256i ta[4][8], tb[4][8];
        for (int i = 0; i < 8; i++) {
            const uint8_t *row = w + (r + i) * rb;
            /* 8 rows side by side are 8 streams, which the hardware prefetcher loses: each row asked for
             * PREFETCH_AHEAD bytes ahead of its super-block (past its end, the same row of the next group) */
            const uint8_t *pf = row + sb * sbytes + PREFETCH_AHEAD;
            if (pf >= row + rb) pf += 7 * rb;
            for (int c = 0; c < 4; c++) _mm_prefetch((const char *)(pf + 64 * c), _MM_HINT_T0);
            __m256 xa[4], xb[4];
            FN(kq_terms_)(type, row, sb, a, t0, nt, xa, xb);
            for (int tj = 0; tj < nt; tj++) {
                ta[tj][i] = _mm256_castps_si256(xa[tj]);
                tb[tj][i] = _mm256_castps_si256(xb[tj]);
            }
        }
        for (int tj = 0; tj < nt; tj++) {
            FN(transpose8_)(ta[tj]);
            FN(transpose8_)(tb[tj]);
            for (int j = 0; j < 8; j++) {
                acc[tj] = _mm256_add_ps(acc[tj], FN(cast_ps_)(ta[tj][j]));
                acc[tj] = type == GG_Q6_K ? _mm256_add_ps(acc[tj], FN(cast_ps_)(tb[tj][j]))
                                          : _mm256_sub_ps(acc[tj], FN(cast_ps_)(tb[tj][j]));
            }
        }
    }
    for (int tj = 0; tj < nt; tj++) {
        float *out = y + (t0 + tj) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[tj]) : acc[tj]);
    }
}

/* kq_rows8_ with nt a constant in each copy */
static ALWAYS_INLINE void FN(kq_rows8_nt_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, const pt_act *a,
                                           int64_t t0, int64_t nt, float *y, int64_t ldy, int accumulate) {
    switch (nt) {
    case 1: FN(kq_rows8_)(type, w, rb, r, a, t0, 1, y, ldy, accumulate); break;
    case 2: FN(kq_rows8_)(type, w, rb, r, a, t0, 2, y, ldy, accumulate); break;
    case 3: FN(kq_rows8_)(type, w, rb, r, a, t0, 3, y, ldy, accumulate); break;
    default: FN(kq_rows8_)(type, w, rb, r, a, t0, 4, y, ldy, accumulate); break;
    }
}

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
static ALWAYS_INLINE void FN(gguf_store8_)(__m256i v[8][8], __m256i *fa, __m256i *fb, uint8_t *buf, const int pair) {
    FN(transpose8_)(fa);        /* lane i = row i: fa[j] the 8 rows' factors of block j */
    FN(transpose8_)(fb);
    const int64_t bs = pair ? GT_PAIR : GT_BLOCK, vs = pair ? 64 : 32;
    for (int j = 0; j < 8; j++) {
        uint8_t *blk = buf + j * bs;
        __m256i vv[8];
        for (int i = 0; i < 8; i++) vv[i] = v[i][j];
        FN(transpose8_)(vv);
        for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + vs * k), vv[k]);
        _mm256_storeu_si256((__m256i *)(blk + 8 * vs), fa[j]);
        _mm256_storeu_si256((__m256i *)(blk + 8 * vs + (pair ? 64 : 32)), fb[j]);
    }
}

/* rows r..r+7 unpacked into buf (nb blocks of GT_BLOCK bytes) */
static void FN(gguf_unpack8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, int64_t nb, uint8_t *buf,
                              const int q6_signed, const int pair) {
    if (type == GG_Q4_K || type == GG_Q5_K || type == GG_Q6_K) {
        /* the K-quants a super-block of 8 rows at a time, by the decode kernel's unpacking (gg_block, a value at a
         * time, took 6 ms for a [4864, 1024] Q6_K matrix: a 16-token prompt paid it whole) */
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            __m256i v[8][8], fa[8], fb[8];
            for (int i = 0; i < 8; i++) {
                __m256 a0, b0;
                FN(kq_unpack_)(type, w + (r + i) * rb, sb, v[i], &a0, &b0);
                /* Q6_K as its unsigned q (0..63): the tile takes 32 x the activations' half sums off after, the
                 * same integer sums without the sign trick's two vpsignb per product */
                if (type == GG_Q6_K && !q6_signed)
                    for (int j = 0; j < 8; j++) v[i][j] = _mm256_add_epi8(v[i][j], _mm256_set1_epi8(32));
                fa[i] = _mm256_castps_si256(a0);
                fb[i] = _mm256_castps_si256(b0);
            }
            if (pair) FN(gguf_store8_)(v, fa, fb, buf + sb * 8 * GT_PAIR, 1);
            else FN(gguf_store8_)(v, fa, fb, buf + sb * 8 * GT_BLOCK, 0);
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
            FN(gguf_store8_)(v, fa, fb, buf + sb * 8 * GT_BLOCK, 0);
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
 * (m, sum x) added (Q4_1, Q5_1); 2 the same subtracted (Q4_K, Q5_K); 3 a term per half-block (Q3_K); 4 per
 * half-block a scale term and a min term subtracted, xh[2 (t nb + b) + h] the activations' half sums (Q2_K); 5 as 3
 * with the values stored unsigned, q + 32, and 32 xh taken off each half's integer sum (Q6_K: the same sums) */
static ALWAYS_INLINE void FN(gguf_tile_)(const uint8_t *buf, const pt_act *a, int64_t t0, const int n, float *y,
                                         int64_t ldy, int64_t r, int accumulate, const int kind, const int sgn,
                                         const int32_t *xh, const int pair) {
    /* pair: a group in a pair's place (AMX's layout, internal.h): its vectors 64 bytes apart, factors at +512, +576 */
    const int64_t K = a->K, nb = K / QK, bs = pair ? GT_PAIR : kind == 4 ? GT_BLOCK4 : GT_BLOCK, vs = pair ? 64 : 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = buf + b * bs;
        __m256i lo[GT], hi[GT];
        for (int j = 0; j < n; j++) lo[j] = hi[j] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + vs * k));
            const __m256i u = sgn ? _mm256_sign_epi8(wv, wv) : wv;
            for (int j = 0; j < n; j++) {
                const __m256i xb = FN(bcast4_)(a->q + (t0 + j) * K + b * QK + 4 * k);
                const __m256i xs = sgn ? _mm256_sign_epi8(xb, wv) : xb;
                if (kind >= 3 && k >= 4) hi[j] = DOT_ACC(hi[j], u, xs);
                else lo[j] = DOT_ACC(lo[j], u, xs);
            }
        }
        const __m256 f0 = _mm256_loadu_ps((const float *)(blk + 8 * vs)),
                     f1 = _mm256_loadu_ps((const float *)(blk + 8 * vs + (pair ? 64 : 32)));
        if (kind == 5)
            for (int j = 0; j < n; j++) {
                const int64_t tb = (t0 + j) * nb + b;
                lo[j] = _mm256_sub_epi32(lo[j], _mm256_set1_epi32(32 * xh[2 * tb]));
                hi[j] = _mm256_sub_epi32(hi[j], _mm256_set1_epi32(32 * xh[2 * tb + 1]));
            }
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
                acc[j] = kind == 2 ? _mm256_sub_ps(acc[j], p1) : _mm256_add_ps(acc[j], p1);
            }
        }
    }
    (void)ones;
    for (int j = 0; j < n; j++) {
        float *out = y + (t0 + j) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[j]) : acc[j]);
    }
}

/* tokens t..t+n-1 (n <= GT) of one unpacked group: a whole tile, or the tail with n a constant in each copy */
static ALWAYS_INLINE void FN(gguf_tiles_part_)(const uint8_t *buf, const pt_act *a, int64_t t, int64_t n, float *y,
                                               int64_t ldy, int64_t r, int accumulate, const int kind, const int sgn,
                                               const int32_t *xh, const int pair) {
    if (n == GT) {
        FN(gguf_tile_)(buf, a, t, GT, y, ldy, r, accumulate, kind, sgn, xh, pair);
        return;
    }
#define GGUF_TAIL(m) FN(gguf_tile_)(buf, a, t, m, y, ldy, r, accumulate, kind, sgn, xh, pair)
    TOKENS_LEFT(n, GGUF_TAIL)
#undef GGUF_TAIL
}

/* groups of 8 rows from r0 through the tiles; returns the first row not done (the rest: fewer than 8), or r0 when
 * the buffer cannot be had (the caller's row kernels then do them all). Up to GG_BATCH_BYTES of unpacked groups are
 * made at a time and every tile of 8 tokens goes through all of them before the next: a 7B matrix's activations
 * (512 tokens x 18944 columns: 9.7 MB) are then read once per batch of groups from beyond the L2 cache, not once per
 * group. Each (group, tile) product is the same call either way, so the same bits. */
#define GG_BATCH_BYTES (768 * 1024)
#ifndef GGUF_AMX
#define GGUF_AMX 0
#endif
static int64_t FN(gguf_tiled_rows_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1,
                                    const pt_act *a, int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    /* Q2_K: its larger unpacked blocks; Q2_K and Q6_K: the activations' half-block sums, once for every group */
    const int q2 = type == GG_Q2_K;
    /* AMX's tiles (kern_amx.c, the avx512 path with AMX on) take the K-quants' pairs of groups and whole tiles of 16
     * tokens, Q6_K's values signed; the vectors below then do an odd group and the tokens after the tiles (Q6_K
     * signed as Q3_K is: the sign trick, a term per half-block; the same integer sums) */
    const int amx = GGUF_AMX && T >= 16 && r1 - r0 >= 16 && pt_amx_on() &&
                    (type == GG_Q4_K || type == GG_Q5_K || type == GG_Q6_K);
    const int q6s = amx && type == GG_Q6_K, halves = q2 || (type == GG_Q6_K && !q6s);
    const int64_t T16 = amx ? T / 16 * 16 : 0;
    const size_t gbytes = (size_t)(nb * (q2 ? GT_BLOCK4 : GT_BLOCK));
    int64_t G = (int64_t)(GG_BATCH_BYTES / gbytes), ngroups = (r1 - r0) / 8;
    if (G < 1) G = 1;
    if (G > ngroups) G = ngroups > 0 ? ngroups : 1;
    if (amx && G > 1) G &= ~(int64_t)1;     /* whole pairs in every batch but the last */
    const size_t bytes = gbytes * (size_t)G;
    uint8_t *buf = malloc(bytes + (halves ? (size_t)(T * nb * 2) * sizeof(int32_t) : 0));
    if (!buf) return r0;
    int32_t *xh = halves ? (int32_t *)(buf + bytes) : NULL;
    for (int64_t i = 0; halves && i < T * nb * 2; i++) {
        int32_t sum = 0;
        for (int l = 0; l < 16; l++) sum += a->q[16 * i + l];
        xh[i] = sum;
    }
    /* the values' signs (signed ones take the sign trick) and the terms, by type */
    const int sgn = type == GG_Q5_0 || type == GG_Q3_K || type == GG_IQ4_NL || type == GG_IQ4_XS || q6s;
    const int kind = type == GG_Q4_1 || type == GG_Q5_1 ? 1 : type == GG_Q4_K || type == GG_Q5_K ? 2
                   : type == GG_Q3_K || q6s ? 3 : q2 ? 4 : type == GG_Q6_K ? 5 : 0;
    int64_t r = r0;
    while (r + 8 <= r1) {
        int64_t g = (r1 - r) / 8;
        if (g > G) g = G;
        /* with AMX the batch's pairs of groups in pairs' places (AMX's layout; gbytes x 2 each), an odd last group
         * in its own */
        const int64_t paired = amx ? g / 2 * 2 : 0;
        for (int64_t i = 0; i < g; i++) {
            if (i < paired) FN(gguf_unpack8_)(type, w, rb, r + 8 * i, nb, buf + gbytes * (i & ~1) + 32 * (i & 1), q6s, 1);
            else FN(gguf_unpack8_)(type, w, rb, r + 8 * i, nb, buf + gbytes * i, q6s, 0);
        }
        if (T16) pt_amx_gguf(buf, g / 2, a, T16, y, ldy, r, accumulate, q6s);
        for (int64_t t = 0; t < T; t += GT) {
            const int64_t n = T - t < GT ? T - t : GT;
            /* the tokens the tiles did: only the odd group's */
            for (int64_t i = t < T16 ? paired : 0; i < g; i++) {
                const int pr = i < paired;
                const uint8_t *gb = pr ? buf + gbytes * (i & ~1) + 32 * (i & 1) : buf + gbytes * i;
                const int64_t ri = r + 8 * i;
                switch (kind * 2 + sgn) {
                case 0: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 0, 0, NULL, 0); break;
                case 1: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 0, 1, NULL, 0); break;
                case 2: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 1, 0, NULL, 0); break;
                case 4: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 2, 0, NULL, pr); break;
                case 8: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 4, 0, xh, 0); break;
                case 10: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 5, 0, xh, 0); break;
                default: FN(gguf_tiles_part_)(gb, a, t, n, y, ldy, ri, accumulate, 3, 1, NULL, pr); break;
                }
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
    const int k_type = type == GG_Q4_K || type == GG_Q5_K || type == GG_Q6_K;
    if (!k_type && type != GG_Q4_1 && type != GG_Q5_0 && type != GG_Q5_1 && type != GG_IQ4_NL) {
        rows_gguf_g(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        return;
    }
    if (k_type) {       /* groups of 8 rows, their sums side by side; the type a constant in each copy */
        for (; r0 + 8 <= r1; r0 += 8)
            for (int64_t t = 0; t < T; t += 4) {
                const int64_t nt = T - t < 4 ? T - t : 4;
                if (type == GG_Q4_K) FN(kq_rows8_nt_)(GG_Q4_K, w, rb, r0, a, t, nt, y, ldy, accumulate);
                else if (type == GG_Q5_K) FN(kq_rows8_nt_)(GG_Q5_K, w, rb, r0, a, t, nt, y, ldy, accumulate);
                else FN(kq_rows8_nt_)(GG_Q6_K, w, rb, r0, a, t, nt, y, ldy, accumulate);
            }
    } else {            /* the 32-value types likewise */
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
        for (int64_t t = 0; t < T; t += 4) {
            float o[4];
            const int64_t nt = T - t < 4 ? T - t : 4;
            if (k_type) {
                switch (nt) {
                case 1: FN(kq_row_)(type, row, a, t, 1, o); break;
                case 2: FN(kq_row_)(type, row, a, t, 2, o); break;
                case 3: FN(kq_row_)(type, row, a, t, 3, o); break;
                default: FN(kq_row_)(type, row, a, t, 4, o); break;
                }
            } else {
                switch (nt) {
                case 1: FN(b32_row_)(type, row, a, t, 1, o); break;
                case 2: FN(b32_row_)(type, row, a, t, 2, o); break;
                case 3: FN(b32_row_)(type, row, a, t, 3, o); break;
                default: FN(b32_row_)(type, row, a, t, 4, o); break;
                }
            }
            for (int j = 0; j < nt; j++) store_y(y + (t + j) * ldy + r, o[j], accumulate);
        }
    }
}

