/* The x86 kernels of GGUF's Q2_K, Q3_K and IQ4_XS (kern_gguf.h's arithmetic, bit for bit), included by
 * kern_x86_gguf.h for each x86 path (the same target, SUFFIX and DOT_ACC). As Q4_K / Q6_K there: a super-block of a
 * row unpacked once into 8 blocks of 32 values in order, each block's integer sums against a token by DOT_ACC and
 * one add tree for 8 blocks, the float terms computed 8 at a time, and 8 rows side by side (transposed, lane i =
 * row i) added in the reference's order:
 *     IQ4_XS  + (d (ls_j - 32) dx) isum_j                      table values, signed (the sign trick)
 *     Q3_K    + (d sc_2j dx) isum_j,lo, then + (d sc_2j+1 dx) isum_j,hi       isum = sum (q + 4) x - 4 xsum
 *     Q2_K    + (d sc dx) isum_lo, - (dmin m dx) xsum_lo, + (d sc' dx) isum_hi, - (dmin m' dx) xsum_hi
 * (Q2_K's q in 0..3 and Q3_K's q + 4 in 0..7 unsigned; xsum: the activations' sum over the half-block, once per
 * token and super-block for 8 rows; the integer sums are exact either way, so the reference's isum) */

#define KQ2_TERMS(type) ((type) == GG_Q2_K ? 4 : (type) == GG_Q3_K ? 2 : 1)

/* One row's super-block sb unpacked: v[j] = block j's 32 values in order (Q2_K unsigned 0..3, Q3_K q + 4 in 0..7,
 * IQ4_XS the table's values), f[k] = the float factor of term k of the 8 blocks (lane j = block j), as gg_block computes
 * them: IQ4_XS f[0] = d (ls_j - 32); Q3_K f[0] / f[1] = d (sc - 32) of each block's first / second half; Q2_K f[0]
 * = d sc, f[1] = dmin m of the first half, f[2], f[3] of the second. */
static ALWAYS_INLINE void FN(kq2_unpack_)(int32_t type, const uint8_t *row, int64_t sb, __m256i *v, __m256 *f) {
    const __m128i even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i odd = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    if (type == GG_IQ4_XS) {
        const uint8_t *x = row + sb * 136;
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_TABLE_G));
        for (int j = 0; j < 8; j++) v[j] = _mm256_shuffle_epi8(table, FN(q4_unpack_)(x + 8 + 16 * j));
        /* ls_j: nibble j of scales_l (bytes 4-7, low nibble first) | bits 2j, 2j + 1 of scales_h << 4, in 8 lanes */
        uint32_t l;
        memcpy(&l, x + 4, 4);
        const __m128i lv = _mm_cvtsi32_si128((int)l), m4 = _mm_set1_epi8(0x0F);
        const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(lv, m4), _mm_and_si128(_mm_srli_epi16(lv, 4), m4));
        const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(
            _mm256_set1_epi32(pt_load_u16(x + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3)), 4);
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(_mm256_cvtepu8_epi32(nib), hi), _mm256_set1_epi32(32));
        f[0] = _mm256_mul_ps(_mm256_set1_ps(FN(h2f_)(x)), _mm256_cvtepi32_ps(ls));
    } else if (type == GG_Q3_K) {
        const uint8_t *x = row + sb * 110;
        /* q + 4 = the 2 low bits | the hmask bit j as bit 2 (word shifts: a byte's bit 2 takes no bit of the other
         * byte for shifts up to 5), so unsigned 0..7; the terms take 4 x the half's activation sum off */
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x), m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x + 32 + 32 * h));
            for (int p = 0; p < 4; p++) {
                const int j = 4 * h + p;
                const __m256i hb = j < 2 ? _mm256_slli_epi16(hm, 2 - j) : _mm256_srli_epi16(hm, j - 2);
                v[j] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3), _mm256_and_si256(hb, b2));
            }
        }
        /* the 16 6-bit scales (gg_block's bits), byte k = scale k, then - 32: the 12 bytes loaded with the 2
         * before them (not the 2 after: past a matrix's end); low 4 bits: byte k's low nibble for k < 8, byte
         * k - 8's high one after; high 2 bits: bits 2 (k / 4) of byte 8 + k % 4 (a word shift per group of 4) */
        const __m128i sb = _mm_srli_si128(_mm_loadu_si128((const __m128i *)(x + 94)), 2), m4 = _mm_set1_epi8(0x0F);
        const __m128i lo4 = _mm_unpacklo_epi64(_mm_and_si128(sb, m4), _mm_and_si128(_mm_srli_epi16(sb, 4), m4));
        const __m128i hb = _mm_shuffle_epi8(sb, _mm_setr_epi8(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11));
        __m128i hi2 = _mm_blend_epi32(hb, _mm_srli_epi16(hb, 2), 0x2);
        hi2 = _mm_blend_epi32(hi2, _mm_srli_epi16(hb, 4), 0x4);
        hi2 = _mm_and_si128(_mm_blend_epi32(hi2, _mm_srli_epi16(hb, 6), 0x8), _mm_set1_epi8(3));
        const __m128i s16 = _mm_sub_epi8(_mm_or_si128(lo4, _mm_slli_epi16(hi2, 4)), _mm_set1_epi8(32));
        const __m256 d = _mm256_set1_ps(FN(h2f_)(x + 108));
        f[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(s16, even))));
        f[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_shuffle_epi8(s16, odd))));
    } else {            /* Q2_K */
        const uint8_t *x = row + sb * 84;
        const __m256i m3 = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x + 16 + 32 * h));
            for (int p = 0; p < 4; p++) v[4 * h + p] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * p), m3);
        }
        const __m128i s16 = _mm_loadu_si128((const __m128i *)x), m4 = _mm_set1_epi8(0x0F);
        const __m128i sc = _mm_and_si128(s16, m4), mn = _mm_and_si128(_mm_srli_epi16(s16, 4), m4);
        const __m256 d = _mm256_set1_ps(FN(h2f_)(x + 80)), dmin = _mm256_set1_ps(FN(h2f_)(x + 82));
        f[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(sc, even))));
        f[1] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(mn, even))));
        f[2] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(sc, odd))));
        f[3] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(mn, odd))));
    }
}

/* 8 vectors of 8 int32 lanes (p[j]: lanes 0-3 summing values 0..15 of block j, lanes 4-7 values 16..31) to the 8
 * blocks' half sums: *lo lane j = block j's first half, *hi its second */
static inline void FN(kq2_halves_)(const __m256i *p, __m256i *lo, __m256i *hi) {
    const __m256i e = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    *lo = _mm256_permute2x128_si256(e, g, 0x20);
    *hi = _mm256_permute2x128_si256(e, g, 0x31);
}

#if DOT_ACC16
/* the same from 8 vectors of 16 int16 lanes (vpmaddubsw's pair sums: lanes 0-7 values 0..15, 8-15 values 16..31),
 * summed in 16 bits: for unsigned values up to 7 (Q2_K, Q3_K + 4) a half's sum is at most 16 x 7 x 127 = 14224 */
static inline void FN(kq2_halves16_)(const __m256i *p, __m256i *lo, __m256i *hi) {
    const __m256i a = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
    const __m256i b = _mm256_hadd_epi16(_mm256_hadd_epi16(p[4], p[5]), _mm256_hadd_epi16(p[6], p[7]));
    const __m256i c = _mm256_hadd_epi16(a, b);
    *lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(c));
    *hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(c, 1));
}
#endif

/* the activations' half-block sums of super-block sb for token t: lo / hi lane j = block j's first / second half */
static inline void FN(kq2_xhalves_)(const pt_act *a, int64_t t, int64_t sb, __m256i *lo, __m256i *hi) {
    const __m256i ones = _mm256_set1_epi16(1), one8 = _mm256_set1_epi8(1);
    const int8_t *xq = a->q + t * a->K + sb * 8 * QK;
    __m256i p[8];
#if DOT_ACC16
    for (int j = 0; j < 8; j++) p[j] = _mm256_maddubs_epi16(one8, _mm256_loadu_si256((const __m256i *)(xq + j * QK)));
    FN(kq2_halves16_)(p, lo, hi);
#else
    for (int j = 0; j < 8; j++)
        p[j] = DOT_ACC(_mm256_setzero_si256(), one8, _mm256_loadu_si256((const __m256i *)(xq + j * QK)));
    FN(kq2_halves_)(p, lo, hi);
#endif
    (void)ones;
}

/* One row's super-block sb against tokens t0..t0+nt-1: out[k][tj] = term k of the 8 blocks (lane j = block j), as
 * the reference computes it; xl / xh: Q2_K's activation half sums of the nt tokens (kq2_xhalves_) */
static ALWAYS_INLINE void FN(kq2_terms_)(int32_t type, const uint8_t *row, int64_t sb, const pt_act *a, int64_t t0,
                                         const int nt, const __m256i *xl, const __m256i *xh, __m256 out[4][4]) {
    const int64_t K = a->K, nb = K / QK;
    const __m256i ones = _mm256_set1_epi16(1);
    const int sgn = type == GG_IQ4_XS;
    __m256i v[8], av[8];
    __m256 f[4];
    FN(kq2_unpack_)(type, row, sb, v, f);
    if (sgn)
        for (int j = 0; j < 8; j++) av[j] = _mm256_sign_epi8(v[j], v[j]);
    for (int tj = 0; tj < nt; tj++) {
        const int64_t t = t0 + tj, b0 = sb * 8;
        const int8_t *xq = a->q + t * K + b0 * QK;
        __m256i p[8], lo, hi;
#if DOT_ACC16
        if (!sgn) {     /* Q2_K, Q3_K: small unsigned values, the half sums in 16 bits */
            for (int j = 0; j < 8; j++) p[j] = _mm256_maddubs_epi16(v[j], _mm256_loadu_si256((const __m256i *)(xq + j * QK)));
            FN(kq2_halves16_)(p, &lo, &hi);
        } else
#endif
        {
            for (int j = 0; j < 8; j++) {      /* |pairs| <= 2 * 127 * 127: no saturation, VNNI or not */
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + j * QK));
                p[j] = sgn ? DOT_ACC(_mm256_setzero_si256(), av[j], _mm256_sign_epi8(xv, v[j]))
                           : DOT_ACC(_mm256_setzero_si256(), v[j], xv);
            }
            FN(kq2_halves_)(p, &lo, &hi);
        }
        const __m256 dx = _mm256_loadu_ps(a->d + t * nb + b0);
        if (type == GG_IQ4_XS) {
            __m256 t0v = _mm256_mul_ps(_mm256_mul_ps(f[0], dx), _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi)));
            NO_FUSE(t0v);
            out[0][tj] = t0v;
        } else {
            if (type == GG_Q3_K) {      /* the values q + 4: 4 x the activations' half sums off, exactly */
                lo = _mm256_sub_epi32(lo, _mm256_slli_epi32(xl[tj], 2));
                hi = _mm256_sub_epi32(hi, _mm256_slli_epi32(xh[tj], 2));
            }
            __m256 t0v = _mm256_mul_ps(_mm256_mul_ps(f[0], dx), _mm256_cvtepi32_ps(lo));
            __m256 t1v = _mm256_mul_ps(_mm256_mul_ps(f[type == GG_Q2_K ? 2 : 1], dx), _mm256_cvtepi32_ps(hi));
            NO_FUSE(t0v);
            NO_FUSE(t1v);
            if (type == GG_Q3_K) {
                out[0][tj] = t0v;
                out[1][tj] = t1v;
            } else {
                __m256 m0v = _mm256_mul_ps(_mm256_mul_ps(f[1], dx), _mm256_cvtepi32_ps(xl[tj]));
                __m256 m1v = _mm256_mul_ps(_mm256_mul_ps(f[3], dx), _mm256_cvtepi32_ps(xh[tj]));
                NO_FUSE(m0v);
                NO_FUSE(m1v);
                out[0][tj] = t0v;
                out[1][tj] = m0v;
                out[2][tj] = t1v;
                out[3][tj] = m1v;
            }
        }
    }
    (void)ones;
}

/* one row against nt <= 4 tokens: the terms added to the row's sum one by one, in the reference's order (Q2_K's
 * odd terms, the min terms, subtracted) */
static ALWAYS_INLINE void FN(kq2_row_)(int32_t type, const uint8_t *row, const pt_act *a, int64_t t0, const int nt,
                                       float *out) {
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int nterms = KQ2_TERMS(type);
    for (int64_t sb = 0; sb < a->K / QK / 8; sb++) {
        __m256i xl[4], xh[4];
        if (type != GG_IQ4_XS)
            for (int tj = 0; tj < nt; tj++) FN(kq2_xhalves_)(a, t0 + tj, sb, &xl[tj], &xh[tj]);
        __m256 terms[4][4];
        FN(kq2_terms_)(type, row, sb, a, t0, nt, xl, xh, terms);
        for (int tj = 0; tj < nt; tj++) {
            float tr[4][8];
            for (int k = 0; k < nterms; k++) _mm256_storeu_ps(tr[k], terms[k][tj]);
            for (int j = 0; j < 8; j++)
                for (int k = 0; k < nterms; k++)
                    sum[tj] = type == GG_Q2_K && (k & 1) ? sum[tj] - tr[k][j] : sum[tj] + tr[k][j];
        }
    }
    for (int j = 0; j < nt; j++) out[j] = sum[j];
}

/* 8 rows against nt <= 4 tokens, each row's sum in a lane: the terms of the 8 rows transposed (lane i = row i) and
 * added in the reference's order, so the same bits as a row alone, without its dependent float adds */
static ALWAYS_INLINE void FN(kq2_rows8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, const pt_act *a,
                                         int64_t t0, const int nt, float *y, int64_t ldy, int accumulate) {
    const int nterms = KQ2_TERMS(type);
    const int64_t sbytes = type == GG_Q2_K ? 84 : type == GG_Q3_K ? 110 : 136;
    __m256 acc[4];
    for (int tj = 0; tj < nt; tj++) acc[tj] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < a->K / QK / 8; sb++) {
        __m256i xl[4], xh[4];       /* the activations' half sums (Q2_K, Q3_K): once for the 8 rows */
        if (type != GG_IQ4_XS)
            for (int tj = 0; tj < nt; tj++) FN(kq2_xhalves_)(a, t0 + tj, sb, &xl[tj], &xh[tj]);
        __m256i tv[4][4][8];        /* [term][token][row] */
        for (int i = 0; i < 8; i++) {
            const uint8_t *row = w + (r + i) * rb;
            /* 8 rows side by side are 8 streams, which the hardware prefetcher loses: each row asked for
             * PREFETCH_AHEAD bytes ahead of its super-block (past its end, the same row of the next group) */
            const uint8_t *pf = row + sb * sbytes + PREFETCH_AHEAD;
            if (pf >= row + rb) pf += 7 * rb;
            for (int c = 0; c < (sbytes + 63) / 64; c++) _mm_prefetch((const char *)(pf + 64 * c), _MM_HINT_T0);
            __m256 xt[4][4];
            FN(kq2_terms_)(type, row, sb, a, t0, nt, xl, xh, xt);
            for (int k = 0; k < nterms; k++)
                for (int tj = 0; tj < nt; tj++) tv[k][tj][i] = _mm256_castps_si256(xt[k][tj]);
        }
        for (int tj = 0; tj < nt; tj++) {
            for (int k = 0; k < nterms; k++) FN(transpose8_)(tv[k][tj]);
            for (int j = 0; j < 8; j++)
                for (int k = 0; k < nterms; k++) {
                    const __m256 p = _mm256_castsi256_ps(tv[k][tj][j]);
                    acc[tj] = type == GG_Q2_K && (k & 1) ? _mm256_sub_ps(acc[tj], p) : _mm256_add_ps(acc[tj], p);
                }
        }
    }
    for (int tj = 0; tj < nt; tj++) {
        float *out = y + (t0 + tj) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[tj]) : acc[tj]);
    }
}

/* kq2_rows8_ with the type and nt constants in each copy */
#define KQ2_ROWS8_NT(TY) \
    static void FN(kq2_rows8_##TY##_)(const uint8_t *w, int64_t rb, int64_t r, const pt_act *a, int64_t t0, \
                                      int64_t nt, float *y, int64_t ldy, int accumulate) { \
        switch (nt) { \
        case 1: FN(kq2_rows8_)(GG_##TY, w, rb, r, a, t0, 1, y, ldy, accumulate); break; \
        case 2: FN(kq2_rows8_)(GG_##TY, w, rb, r, a, t0, 2, y, ldy, accumulate); break; \
        case 3: FN(kq2_rows8_)(GG_##TY, w, rb, r, a, t0, 3, y, ldy, accumulate); break; \
        default: FN(kq2_rows8_)(GG_##TY, w, rb, r, a, t0, 4, y, ldy, accumulate); break; \
        } \
    }
KQ2_ROWS8_NT(Q2_K)
KQ2_ROWS8_NT(Q3_K)
KQ2_ROWS8_NT(IQ4_XS)
#undef KQ2_ROWS8_NT

/* rows r0..r1 of a Q2_K / Q3_K / IQ4_XS matrix against T tokens, 4 at a time: groups of 8 rows side by side, the
 * rows after them one at a time (type a constant where it is inlined) */
static ALWAYS_INLINE void FN(kq2_rows_)(const int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                          int64_t T, float *y, int64_t ldy, int accumulate) {
    for (; r0 + 8 <= r1; r0 += 8)
        for (int64_t t = 0; t < T; t += 4) {
            const int64_t nt = T - t < 4 ? T - t : 4;
            if (type == GG_Q2_K) FN(kq2_rows8_Q2_K_)(w, rb, r0, a, t, nt, y, ldy, accumulate);
            else if (type == GG_Q3_K) FN(kq2_rows8_Q3_K_)(w, rb, r0, a, t, nt, y, ldy, accumulate);
            else FN(kq2_rows8_IQ4_XS_)(w, rb, r0, a, t, nt, y, ldy, accumulate);
        }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * rb;
#define KQ2_ROW(t, n, o) FN(kq2_row_)(type, row, a, t, n, o)
        ROW_TOKENS4(KQ2_ROW)
#undef KQ2_ROW
    }
}

static void FN(kq2_rows_any_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                              int64_t T, float *y, int64_t ldy, int accumulate) {
    if (type == GG_Q2_K) FN(kq2_rows_)(GG_Q2_K, w, rb, r0, r1, a, T, y, ldy, accumulate);
    else if (type == GG_Q3_K) FN(kq2_rows_)(GG_Q3_K, w, rb, r0, r1, a, T, y, ldy, accumulate);
    else FN(kq2_rows_)(GG_IQ4_XS, w, rb, r0, r1, a, T, y, ldy, accumulate);
}
