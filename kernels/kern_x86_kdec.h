/* The x86 K-quant decode kernels (kern_gguf.h's arithmetic, bit for bit), included by kern_x86_gguf.h after the
 * one-row kernel kq8_row_ for each x86 path (the same target, SUFFIX and DOT_ACC): a decode step (one token) takes
 * Q4_K / Q5_K / Q6_K rows four at a time (k45_rows4_, q6_rows4_), the rest in pairs (k45_rows2_, q6_rows2_) and a
 * last odd row through kq8_row_; kq8_rows_ is what rows_gguf_ calls for these types, any token count. */

/* Q6_K block j's sub-scales as vpmaddwd takes them after vpmaddubsw over block j's 32 values in order: its first
 * half's scale in the low 128 bits, its second half's in the high (scl: the 16 scales; j < 4 from the low 8, else the
 * high) */
static ALWAYS_INLINE __m256i FN(q6_scale_)(__m256i scl, const int j) {
    const char a = (char)(4 * (j % 4)), b = (char)(4 * (j % 4) + 2);
    return _mm256_shuffle_epi8(scl, _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                                     a, a + 1, a, a + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1,
                                                     b, b + 1, b, b + 1, b, b + 1, b, b + 1));
}

/* Q6_K: one row's super-block sb against one token (xq its 256 quants, hx their sums of 16), for a decode step: each
 * half's 64 + 32 bytes unpacked just before its products, so few registers are live and the loads overlap the
 * arithmetic. Returns the integer sum's lanes less 32 x the offset's sum; *dbits the fp16 d as read */
static ALWAYS_INLINE __m256i FN(q6_sb_)(const uint8_t *row, int64_t sb, const int8_t *xq, const int16_t *hx,
                                        uint32_t *dbits) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i acc = _mm256_setzero_si256(), m16;
    {
        const uint8_t *x = row + sb * 210;
        const __m256i all = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
        m16 = all;
        *dbits = pt_load_u16(x + 208);
        const __m256i m30 = _mm256_set1_epi8(0x30);
        const __m256i scls[2] = {_mm256_permute4x64_epi64(all, 0x44), _mm256_permute4x64_epi64(all, 0xEE)};
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
            const __m256i scl = scls[h];
            /* the high bits 2k, 2k + 1 of each qh byte moved to bits 4-5 by one 16-bit shift and a mask (a bit that
             * crosses into the other byte of the word lands outside 0x30): 5 shifts a half where shift-and-shift
             * took 7, shifts and shuffles sharing two of Zen 3's four vector pipes */
            const __m256i v0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            const __m256i v1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            const __m256i v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
            const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            const __m256i vv[4] = {v0, v1, v2, v3};
#if DOT_ACC16
            for (int p = 0; p < 4; p++) {
                const __m256i pr = _mm256_maddubs_epi16(vv[p], _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * p)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, FN(q6_scale_)(scl, 4 * h + p)));
            }
#else
            /* VNNI: each 32 values' sums by one vpdpbusd, unscaled (lanes 0-3 the scale 8h + 2p's 16 values, 4-7
             * 8h + 2p + 1's), reduced by vphaddd to [S(8h) S(8h+2) S(8h+4) S(8h+6) | S(8h+1) ...] and scaled by one
             * vpmulld: the same integer as the scaled vpmaddwd sums (all exact in int32) */
            (void)scl;
            __m256i b[4];
            for (int p = 0; p < 4; p++)
                b[p] = DOT_ACC(_mm256_setzero_si256(), vv[p], _mm256_loadu_si256((const __m256i *)(xq + 128 * h + 32 * p)));
            const __m256i hs = _mm256_hadd_epi32(_mm256_hadd_epi32(b[0], b[1]), _mm256_hadd_epi32(b[2], b[3]));
            const char o = (char)(8 * h);
            const __m256i s8 = _mm256_cvtepi8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(x + 192)),
                _mm_setr_epi8(o, o + 2, o + 4, o + 6, o + 1, o + 3, o + 5, o + 7, -1, -1, -1, -1, -1, -1, -1, -1)));
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(hs, s8));
#endif
        }
    }
    const __m256i mv = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)hx));
    return _mm256_sub_epi32(acc, _mm256_slli_epi32(mv, 5));
}

/* how far ahead a K-quant decode asks for each row's bytes. A decode streams its matrices from memory and the row
 * pair's kernel leaves the loads little time: at PREFETCH_AHEAD (1024) a 7B shape's [18944, 3584] matrices ran at
 * 12-13 GB/s on two AVX2 cores (Zen 3), at 4096 15-19 GB/s (2048: 15; 6144-8192 no better). Every cache line of a
 * super-block is asked for (Q6_K's 210 bytes are more than two lines) */
#ifndef KQ_PREFETCH_AHEAD
#define KQ_PREFETCH_AHEAD 4096
#endif
#ifndef KQ_PREFETCH_LINES
#define KQ_PREFETCH_LINES(sbytes) ((int)(((sbytes) + 63) / 64))
#endif

/* Q6_K, two rows against one token (a decode step), q6_sb_ for each: their two integer sums by one add tree, the two
 * float products (d dx) isum at once (the reference's roundings, lane by lane), each added to its row's sum (lanes 0
 * and 1, in a register) in the reference's order. A last odd row: kq8_row_ */
static ALWAYS_INLINE void FN(q6_rows2_)(const uint8_t *row0, const uint8_t *row1, const pt_act *a, float *o0,
                                        float *o1) {
    const int64_t nsb = a->K / 256;
    __m128 sv = _mm_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint32_t d0, d1;
        for (int c = 0; c < KQ_PREFETCH_LINES(210); c++) {      /* two streams from memory */
            _mm_prefetch((const char *)(row0 + sb * 210 + KQ_PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
            _mm_prefetch((const char *)(row1 + sb * 210 + KQ_PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
        }
        const __m256i a0 = FN(q6_sb_)(row0, sb, a->q + sb * 256, a->h + sb * 16, &d0);
        const __m256i a1 = FN(q6_sb_)(row1, sb, a->q + sb * 256, a->h + sb * 16, &d1);
        const __m256i h = _mm256_hadd_epi32(a0, a1);        /* [a0 01, a0 23, a1 01, a1 23 | the same of 4-7] */
        const __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128i is = _mm_hadd_epi32(h4, h4);          /* [isum0, isum1, ...] */
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_set_epi32(0, 0, 0, (int)(d0 | d1 << 16))), _mm_set1_ps(a->d[sb * 8]));
        NO_FUSE(dd);
        __m128 p = _mm_mul_ps(dd, _mm_cvtepi32_ps(is));
        NO_FUSE(p);
        sv = _mm_add_ps(sv, p);
    }
    *o0 = _mm_cvtss_f32(sv);
    *o1 = _mm_cvtss_f32(_mm_shuffle_ps(sv, sv, 1));
}

/* Q6_K, four rows against one token: q6_sb_ for each, the four integer sums by one add tree, the four float products
 * at once, each row's sum in its lane: the same bits as q6_rows2_, the reductions shared by four rows. Used for rows
 * longer than 4,096 values: from memory, one AVX2 core (Zen 3), 20.2 against q6_rows2_'s 25.9 ns per row and
 * super-block at 18,944 values, but 24.9 against 24.1 at 3,584 and 33.7 against 31.4 at 2,048. Each row asks for
 * its bytes one group of four rows ahead (4 rb): 4,096 bytes ahead, as the pair does, lands in the group's own next
 * rows when rows are short (from memory 42 against 30 ns at 2,048 values) */
static ALWAYS_INLINE void FN(q6_rows4_)(const uint8_t *row0, int64_t rb, const pt_act *a, float *o) {
    const int64_t nsb = a->K / 256;
    __m128 sv = _mm_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        uint32_t d[4];
        __m256i acc[4];
        for (int i = 0; i < 4; i++) {
            const uint8_t *x = row0 + i * rb;
            for (int c = 0; c < KQ_PREFETCH_LINES(210); c++)
                _mm_prefetch((const char *)(x + 4 * rb + sb * 210 + 64 * c), _MM_HINT_T0);
            acc[i] = FN(q6_sb_)(x, sb, a->q + sb * 256, a->h + sb * 16, &d[i]);
        }
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
        const __m128i is = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_set_epi32(0, 0, (int)(d[2] | d[3] << 16), (int)(d[0] | d[1] << 16))),
                               _mm_set1_ps(a->d[sb * 8]));
        NO_FUSE(dd);
        __m128 p = _mm_mul_ps(dd, _mm_cvtepi32_ps(is));
        NO_FUSE(p);
        sv = _mm_add_ps(sv, p);
    }
    _mm_storeu_ps(o, sv);
}

/* Q4_K / Q5_K: a super-block's scales (bytes 0-7) and mins (8-15), gg_scale_min_k4's bits, from its first 16 bytes
 * head (lanes: d | dmin << 16, then the scale words u0, u1, u2): lanes [u0 & k1, (u2 & k2) | ((u0 >> 6) & k3) << 4,
 * u1 & k1, ((u2 >> 4) & k2) | ((u1 >> 6) & k3) << 4], where ((u >> 6) & k3) << 4 is (u >> 2) & 0x30303030. In vector
 * registers from the load on: the scalar way, four words moved into a vector one by one, made the scales the decode
 * loop's longest dependency chain. */
static ALWAYS_INLINE __m128i FN(k45_scales_)(__m128i head) {
    const __m128i a = _mm_shuffle_epi32(head, _MM_SHUFFLE(3, 2, 3, 1)), b = _mm_shuffle_epi32(head, _MM_SHUFFLE(2, 2, 1, 1));
    return _mm_or_si128(_mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
                        _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

/* Q4_K / Q5_K: one row's super-block at x against one token's quants laid out by pairs of blocks (xr: for blocks 2p
 * and 2p + 1, values 0-15 of each, then values 16-31 of each; k4_relay_): the integer sum's lanes with the
 * sub-scales applied (the mins apart), *sc the scales (bytes 0-7) and mins (8-15), *head the first 16 bytes (lane 0:
 * d | dmin << 16). A quarter fewer multiplies than blocks in stored order would take: a pair's 32 bytes of nibbles hold block 2p in the low nibbles and 2p + 1 in the high;
 * each 16-byte half is loaded into both 128-bit lanes and shifted by 0 in the low lane, 4 in the high, so one
 * vpmaddubsw multiplies 16 values of each block; two such (values 0-15 and 16-31) add in 16 bits (4 products of
 * at most 15 x 127: no overflow) and one vpmaddwd applies both blocks' scales, s(2p) in the low lane, s(2p + 1) in
 * the high. With VNNI (DOT_ACC16 0: the avx512 and avxvnni paths) a pair's halves chain through two vpdpbusd
 * unscaled and the 8 blocks' sums take their scales at the end, in one vpmulld (a fifth fewer vector ops). */
static ALWAYS_INLINE __m256i FN(k4_sb_)(const int q5, const uint8_t *x, const int8_t *xr, __m128i *sc_out,
                                        __m128i *head_out) {
    const __m128i head = _mm_loadu_si128((const __m128i *)x), sc = FN(k45_scales_)(head);
    const __m256i m4 = _mm256_set1_epi8(0x0F), shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const uint8_t *qs = x + (q5 ? 48 : 16);
    /* Q5_K: the fifth bits of values 0-15 and 16-31, both lanes (bit 2p of qh[i]: block 2p's value i, 2p + 1: the next) */
    const __m256i qh0 = q5 ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16))) : m4;
    const __m256i qh1 = q5 ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 32))) : m4;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
#if DOT_ACC16
    /* 16-bit lanes [s0 s0 s2 s2 s4 s4 s6 s6 | s1 s1 s3 s3 s5 s5 s7 s7]: pair p's scales by vpshufd p * 0x55 */
    const __m256i even_odd = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, -1, -1, -1, -1, 1, 3,
                                                                                     5, 7, -1, -1, -1, -1)));
    const __m256i su = _mm256_unpacklo_epi16(even_odd, even_odd);
    __m256i acc = _mm256_setzero_si256();
#else
    __m256i blk[4];
#endif
    for (int p = 0; p < 4; p++) {
        __m256i w0 = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(
                                          _mm_loadu_si128((const __m128i *)(qs + 32 * p))), shift), m4);
        __m256i w1 = _mm256_and_si256(_mm256_srlv_epi32(_mm256_broadcastsi128_si256(
                                          _mm_loadu_si128((const __m128i *)(qs + 16 + 32 * p))), shift), m4);
        if (q5) {
            /* bit c = 2p (low lane) or 2p + 1 (high lane) of each byte moved to bit 4 by one shift of the 32-bit
             * words, left by 4 - c or right by c - 4 (the bit landing on bit 4 of a byte is always the same byte's
             * bit c), then masked */
            const int l = p < 2 ? 4 - 2 * p : 2 * p - 4, h = p < 2 ? 3 - 2 * p : 2 * p - 3;
            const __m256i c = _mm256_setr_epi32(l, l, l, l, h, h, h, h);
            w0 = _mm256_or_si256(w0, _mm256_and_si256(p < 2 ? _mm256_sllv_epi32(qh0, c) : _mm256_srlv_epi32(qh0, c), bit4));
            w1 = _mm256_or_si256(w1, _mm256_and_si256(p < 2 ? _mm256_sllv_epi32(qh1, c) : _mm256_srlv_epi32(qh1, c), bit4));
        }
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(xr + 64 * p));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xr + 64 * p + 32));
#if DOT_ACC16
        const __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1));
        const __m256i s = p == 0 ? _mm256_shuffle_epi32(su, 0x00) : p == 1 ? _mm256_shuffle_epi32(su, 0x55)
                          : p == 2 ? _mm256_shuffle_epi32(su, 0xAA) : _mm256_shuffle_epi32(su, 0xFF);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, s));
#else
        /* VNNI: the pair's two halves chained by vpdpbusd, unscaled: lanes 0-3 block 2p's partial sums, 4-7 2p + 1's */
        blk[p] = DOT_ACC(DOT_ACC(_mm256_setzero_si256(), w0, x0), w1, x1);
#endif
    }
#if !DOT_ACC16
    /* each block's 4 lanes added by three vphaddd into [S0 S2 S4 S6 | S1 S3 S5 S7], times the scales in the same order
     * by one vpmulld: lanes whose total is the integer the scaled vpmaddwd sums make (every product and sum exact in
     * int32), so the same bits follow */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(blk[0], blk[1]), _mm256_hadd_epi32(blk[2], blk[3]));
    const __m256i s8 = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, -1, -1, -1, -1,
                                                                               -1, -1, -1, -1)));
    const __m256i acc = _mm256_mullo_epi32(h, s8);
#endif
    *sc_out = sc;
    *head_out = head;
    return acc;
}

/* a token's K quants laid out for k4_sb_: per pair of 32-value blocks, values 0-15 of each, then 16-31 of each;
 * then, at xr + K, each super-block's block sums as k45_rows2_'s min terms take them (K / 8 bytes: hx's sums of 16
 * added in pairs, as 16-bit lanes [S0-3, S0-3 | S4-7, S4-7]), made once per token instead of once per row pair */
#define K4_RELAY_BYTES(K) ((K) + (K) / 8)
static inline void FN(k4_relay_)(const int8_t *xq, const int16_t *h, int64_t K, int8_t *xr) {
    for (int64_t i = 0; i < K; i += 64) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(xq + i)), b1 = _mm256_loadu_si256((const __m256i *)(xq + i + 32));
        _mm256_storeu_si256((__m256i *)(xr + i), _mm256_permute2x128_si256(b0, b1, 0x20));
        _mm256_storeu_si256((__m256i *)(xr + i + 32), _mm256_permute2x128_si256(b0, b1, 0x31));
    }
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const __m128i hx = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(h + sb * 16)),
                                          _mm_loadu_si128((const __m128i *)(h + sb * 16 + 8)));
        _mm256_storeu_si256((__m256i *)(xr + K + 32 * sb), _mm256_permute4x64_epi64(_mm256_castsi128_si256(hx), 0x50));
    }
}

/* Q4_K / Q5_K, two rows against one token (a decode step): k4_sb_ for each, both rows' min terms by one vpmaddwd
 * (their mins side by side against the activations' block sums, hx's sums of 16 added in pairs), the four integer
 * sums [isum0, isum1, msum0, msum1] out of two horizontal adds, the four float products (d dx) isum, (dmin dx) msum
 * at once, and each row's sum (lanes 0 and 1, in registers) takes them in the reference's order: the same bits as
 * gg_kq8_super. (Two rows' reductions shared: a quarter of the step's time went to them, row by row.) */
static ALWAYS_INLINE void FN(k45_rows2_)(const int q5, const uint8_t *row0, const uint8_t *row1, const pt_act *a,
                                         const int8_t *xr, float *o0, float *o1) {
    const int64_t nsb = a->K / 256, sbytes = q5 ? 176 : 144;
    const __m128 dx = _mm_set1_ps(a->d[0]);
    __m128 sv = _mm_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int c = 0; c < KQ_PREFETCH_LINES(sbytes); c++) {
            _mm_prefetch((const char *)(row0 + sb * sbytes + KQ_PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
            _mm_prefetch((const char *)(row1 + sb * sbytes + KQ_PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
        }
        __m128i sc0, sc1, h0, h1;
        const __m256i a0 = FN(k4_sb_)(q5, row0 + sb * sbytes, xr + sb * 256, &sc0, &h0);
        const __m256i a1 = FN(k4_sb_)(q5, row1 + sb * sbytes, xr + sb * 256, &sc1, &h1);
        /* the block sums S0..S7 as [S0-3, S0-3 | S4-7, S4-7] (k4_relay_) against the mins [row 0's m0-3, row 1's
         * m0-3 | row 0's m4-7, row 1's m4-7]: lanes 0-1 and 4-5 row 0's min terms, 2-3 and 6-7 row 1's */
        const __m256i mv = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi32(sc0, sc1)),
                                             _mm256_loadu_si256((const __m256i *)(xr + a->K + 32 * sb)));
        const __m256i u = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), mv);
        const __m128i is = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
        /* [d0, d1, dmin0, dmin1] times dx (a->d holds the super-block's scale for each of its 8 blocks) */
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_unpacklo_epi16(h0, h1)), sb ? _mm_set1_ps(a->d[sb * 8]) : dx);
        NO_FUSE(dd);
        __m128 p = _mm_mul_ps(dd, _mm_cvtepi32_ps(is));
        NO_FUSE(p);
        sv = _mm_sub_ps(_mm_add_ps(sv, p), _mm_movehl_ps(p, p));
    }
    *o0 = _mm_cvtss_f32(sv);
    *o1 = _mm_cvtss_f32(_mm_shuffle_ps(sv, sv, 1));
}

/* Q4_K / Q5_K, four rows against one token: k4_sb_ for each, the four integer sums and the four min terms out of
 * one add tree ([is0..is3 | ms0..ms3]), the eight float products at once, each row's sum (lanes 0-3) taking them in
 * the reference's order: the same bits as k45_rows2_ and gg_kq8_super, with the reductions a pair of rows pays
 * shared by four. Each row asks for its bytes one group ahead (4 rb; see q6_rows4_). From memory, one AVX2 core
 * (Zen 3), Q4_K ns per row and super-block against the pair: 20.1 / 23.6 at 3,584 values, 14.4 / 20.1 at 18,944,
 * 23.0 / 26.6 at 2,048 */
static ALWAYS_INLINE void FN(k45_rows4_)(const int q5, const uint8_t *row0, int64_t rb, const pt_act *a,
                                         const int8_t *xr, float *o) {
    const int64_t nsb = a->K / 256, sbytes = q5 ? 176 : 144;
    __m128 sv = _mm_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        __m128i sc[4], h[4];
        __m256i acc[4];
        for (int i = 0; i < 4; i++) {
            const uint8_t *x = row0 + i * rb + sb * sbytes;
            for (int c = 0; c < KQ_PREFETCH_LINES(sbytes); c++)
                _mm_prefetch((const char *)(x + 4 * rb + 64 * c), _MM_HINT_T0);
            acc[i] = FN(k4_sb_)(q5, x, xr + sb * 256, &sc[i], &h[i]);
        }
        const __m256i hx = _mm256_loadu_si256((const __m256i *)(xr + a->K + 32 * sb));
        const __m256i mA = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi32(sc[0], sc[1])), hx);
        const __m256i mB = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi32(sc[2], sc[3])), hx);
        /* [is0..is3 | is0..is3] halves and [ms0..ms3 | ms0..ms3] halves, then lane i + 4 added to lane i */
        const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
        const __m256i hm = _mm256_hadd_epi32(mA, mB);
        const __m256i t = _mm256_add_epi32(_mm256_permute2x128_si256(hi, hm, 0x20), _mm256_permute2x128_si256(hi, hm, 0x31));
        /* [d0..d3 | dmin0..dmin3] times dx */
        const __m128i dh = _mm_unpacklo_epi32(_mm_unpacklo_epi16(h[0], h[1]), _mm_unpacklo_epi16(h[2], h[3]));
        __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_set1_ps(a->d[sb * 8]));
        NO_FUSE(dd);
        __m256 p = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(t));
        NO_FUSE(p);
        sv = _mm_sub_ps(_mm_add_ps(sv, _mm256_castps256_ps128(p)), _mm256_extractf128_ps(p, 1));
    }
    _mm_storeu_ps(o, sv);
}

#define K4_RELAY_MAX 32768      /* values of a row whose Q4_K / Q5_K decode lays its quants out on the stack */

/* kq8_row_ over rows r0..r1 and all T tokens, 4 at a time, the type and the count constants in each copy; a decode
 * step's rows in pairs (q6_rows2_, k45_rows2_: the Q4_K / Q5_K token's quants laid out first, on the stack or, for a
 * row longer than K4_RELAY_MAX values, on the heap; without that memory the rows go one at a time) */
static ALWAYS_INLINE void FN(kq8_rows_t_)(const int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1,
                                          const pt_act *a, int64_t T, float *y, int64_t ldy, int accumulate) {
    _Alignas(32) int8_t relay[K4_RELAY_BYTES(K4_RELAY_MAX)];
    int8_t *xr = NULL, *heap = NULL;
    if (type != GG_Q6_K && T == 1 && r1 - r0 >= 2) {
        xr = a->K <= K4_RELAY_MAX ? relay : (heap = (int8_t *)malloc((size_t)K4_RELAY_BYTES(a->K)));
        if (xr) FN(k4_relay_)(a->q, a->h, a->K, xr);
    }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * rb;
        _mm_prefetch((const char *)(row + rb), _MM_HINT_T0);
        if (T == 1 && r + 3 < r1 && (type == GG_Q6_K ? a->K > 4096 : xr != NULL)) {
            float o4[4];
            if (type == GG_Q6_K) FN(q6_rows4_)(row, rb, a, o4);
            else FN(k45_rows4_)(type == GG_Q5_K, row, rb, a, xr, o4);
            for (int i = 0; i < 4; i++) store_y(y + r + i, o4[i], accumulate);
            r += 3;
            continue;
        }
        if (T == 1 && r + 1 < r1 && (type == GG_Q6_K || xr)) {
            float o0, o1;
            if (type == GG_Q6_K) FN(q6_rows2_)(row, row + rb, a, &o0, &o1);
            else if (type == GG_Q5_K) FN(k45_rows2_)(1, row, row + rb, a, xr, &o0, &o1);
            else FN(k45_rows2_)(0, row, row + rb, a, xr, &o0, &o1);
            store_y(y + r, o0, accumulate);
            store_y(y + r + 1, o1, accumulate);
            r++;
            continue;
        }
#define KQ8_ROW(t, n, o) FN(kq8_row_)(type, row, a, t, n, o)
        ROW_TOKENS4(KQ8_ROW)
#undef KQ8_ROW
    }
    free(heap);
}

static void FN(kq8_rows_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                          int64_t T, float *y, int64_t ldy, int accumulate) {
    if (type == GG_Q4_K) FN(kq8_rows_t_)(GG_Q4_K, w, rb, r0, r1, a, T, y, ldy, accumulate);
    else if (type == GG_Q5_K) FN(kq8_rows_t_)(GG_Q5_K, w, rb, r0, r1, a, T, y, ldy, accumulate);
    else FN(kq8_rows_t_)(GG_Q6_K, w, rb, r0, r1, a, T, y, ldy, accumulate);
}
