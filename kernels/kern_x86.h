/* The x86 SIMD kernels, shared by the AVX2 and the AVX-512 VNNI paths. The including file sets the target
 * pragma, defines DOT_U8S8(u, s) (8 int32 lanes, each the sum of 4 products unsigned u8 x signed s8) and SUFFIX,
 * then includes this file. q8_0 weights use the sign trick (|w| unsigned, x carrying w's sign); q4_0 nibbles are
 * unsigned already and the -8 offset is removed with the activation block sum: sum((n-8)x) = sum(nx) - 8 sum(x). */
#include <immintrin.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(name, SUFFIX)

static inline float FN(hsum8_)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* one fp16 -> fp32 (F16C; _cvtsh_ss is not in every compiler's headers) */
static inline float FN(h2f1_)(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }
static inline float FN(h2f_)(const uint8_t *p) { return FN(h2f1_)(pt_load_u16(p)); }

static void FN(quant_act_)(const float *x, int64_t K, int8_t *q, float *d, int32_t *s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < K / QK; b++) {
        const float *xb = x + b * QK;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
        m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
        if (!isfinite(id)) { db = 0.0f; id = 0.0f; }       /* a block too small to scale: zero */
        __m256 unord = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
                                    _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
        if (_mm256_movemask_ps(unord)) { db = NAN; id = 0.0f; }   /* a NaN input gives NaN outputs */
        const __m256 mul = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, mul)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, mul));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, mul)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, mul));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_max_epi8(_mm256_permutevar8x32_epi32(p, perm), _mm256_set1_epi8(-127));
        _mm256_storeu_si256((__m256i *)(q + b * QK), p);
        /* the block sum of the saturated bytes */
        __m256i w16 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        d[b] = db;
        s[b] = _mm_cvtsi128_si32(t);
    }
}

/* 8 int32 partial dots of one q8_0 weight block (|w| in ax, w for the signs) with 32 int8 activations */
static inline __m256 FN(q8_dot_)(__m256i ax, __m256i w, const int8_t *xq) {
    __m256i y = _mm256_loadu_si256((const __m256i *)xq);
    return _mm256_cvtepi32_ps(DOT_U8S8(ax, _mm256_sign_epi8(y, w)));
}

/* 16 bytes of nibbles -> 32 bytes (low nibbles, then high): the bytes in both halves, the high half shifted by 4 */
static inline __m256i FN(q4_unpack_)(const uint8_t *qs) {
    __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

static inline __m256 FN(q4_dot_)(__m256i nib, const int8_t *xq, int32_t xsum) {
    __m256i y = _mm256_loadu_si256((const __m256i *)xq);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(DOT_U8S8(nib, y), _mm256_set1_epi32(xsum)));
}

/* ---- prefill: one weight row against a tile of GT tokens ----
 * Each weight block is loaded, made unsigned (q8_0) or unpacked (q4_0) and its scale converted once for GT tokens,
 * and each token's block products are scaled by one vector multiply (the tile's activation scales transposed,
 * [block][8]). A token's sum is the one-token loop's exactly: even blocks in one chain, odd blocks in another, each
 * the same fmadd of the same float scale dw * xd with the same 8 integer lanes, the chains added, then the lanes: a
 * token gets the same bits in any batch and at any place in it (see rows_q8_). 2 chains x GT accumulators and the
 * working vectors (|w| and w, or the nibbles; the 1s of vpmaddwd; a product; a scale) fit AVX2's 16 registers with
 * 5 tokens (6 spill: measured slower). The code is written for up to 6 (TILE_BLK's A5 lines are dropped for 5). */
#define GT 5
#define GT_MAX_NB 512   /* blocks (K up to 16384) the transposed scales hold; longer rows take the 4-token loop */
#define GT_DW 4096      /* weight scales converted at a time: a group of at least 8 rows */

/* the tile's per-block activation scales (and block sums for q4_0) transposed: dT[b][j] = d of token t0 + j */
static void FN(tile_scales_)(const pt_act *a, int64_t t0, int64_t nb, float *dT, int32_t *sT) {
    for (int64_t b = 0; b < nb; b++)
        for (int j = 0; j < 8; j++) {
            int64_t tb = (t0 + (j < GT ? j : 0)) * nb + b;
            dT[b * 8 + j] = a->d[tb];
            if (sT) sT[b * 8 + j] = a->s[tb];
        }
}

/* One weight block bb into the GT accumulators of its chain, A0..A5 (named variables: an array of them was kept in
 * memory): the block's scale times the GT tokens' in one multiply, stored, then broadcast from memory (a load, no
 * vector op) for each token. PREP loads the block; DOT_BLK(j) is the 8 integer lanes of token j, as float. */
#define TILE_BLK(bb, A0, A1, A2, A3, A4, A5, PREP, DOT_BLK)                                                       \
    do {                                                                                                          \
        const int64_t b_ = (bb);                                                                                  \
        const uint8_t *blk_ = row + b_ * blk_bytes;                                                               \
        const int8_t *x_ = xq + b_ * QK;                                                                            \
        float sc_[8];                                                                                             \
        PREP;                                                                                                     \
        _mm256_storeu_ps(sc_, _mm256_mul_ps(_mm256_broadcast_ss(dw + b_), _mm256_loadu_ps(dT + b_ * 8)));            \
        A0 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 0), DOT_BLK(0), A0);                                       \
        A1 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 1), DOT_BLK(1), A1);                                       \
        A2 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 2), DOT_BLK(2), A2);                                       \
        A3 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 3), DOT_BLK(3), A3);                                       \
        A4 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 4), DOT_BLK(4), A4);                                       \
        if (GT > 5) A5 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc_ + 5), DOT_BLK(5), A5);                           \
    } while (0)

/* the tile: even blocks into e0..e5, odd into o0..o5, as the one-token loop's two chains */
#define TILE_BODY(PREP, DOT_BLK)                                                                                  \
    __m256 e0 = _mm256_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;                                 \
    __m256 o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;                                                  \
    int64_t b = 0;                                                                                                \
    for (; b + 2 <= nb; b += 2) {                                                                                 \
        TILE_BLK(b, e0, e1, e2, e3, e4, e5, PREP, DOT_BLK);                                                       \
        TILE_BLK(b + 1, o0, o1, o2, o3, o4, o5, PREP, DOT_BLK);                                                   \
    }                                                                                                             \
    if (b < nb) TILE_BLK(b, e0, e1, e2, e3, e4, e5, PREP, DOT_BLK);                                               \
    out[0] = FN(hsum8_)(_mm256_add_ps(e0, o0));                                                                   \
    out[1] = FN(hsum8_)(_mm256_add_ps(e1, o1));                                                                   \
    out[2] = FN(hsum8_)(_mm256_add_ps(e2, o2));                                                                   \
    out[3] = FN(hsum8_)(_mm256_add_ps(e3, o3));                                                                   \
    out[4] = FN(hsum8_)(_mm256_add_ps(e4, o4));                                                                   \
    if (GT > 5) out[5] = FN(hsum8_)(_mm256_add_ps(e5, o5))

#define Q8_PREP                                                                                                   \
    const __m256i w_ = _mm256_loadu_si256((const __m256i *)(blk_ + 2));                                           \
    const __m256i ax_ = _mm256_sign_epi8(w_, w_)
#define Q8_DOT(j) FN(q8_dot_)(ax_, w_, x_ + (j) * K)
#define Q4_PREP                                                                                                   \
    const __m256i nib_ = FN(q4_unpack_)(blk_ + 2);                                                                \
    const int32_t *s_ = sT + b_ * 8
#define Q4_DOT(j) FN(q4_dot_)(nib_, x_ + (j) * K, s_[j])

static void FN(tile_q8_)(const uint8_t *row, const float *dw, int64_t nb, const int8_t *xq, int64_t K,
                         const float *dT, float *out) {
    const int64_t blk_bytes = Q8_BYTES;
    TILE_BODY(Q8_PREP, Q8_DOT);
}

static void FN(tile_q4_)(const uint8_t *row, const float *dw, int64_t nb, const int8_t *xq, int64_t K,
                         const float *dT, const int32_t *sT, float *out) {
    const int64_t blk_bytes = Q4_BYTES;
    TILE_BODY(Q4_PREP, Q4_DOT);
}

/* Rows in groups whose weight scales are converted to float once for every tile, then tokens in tiles of GT, each
 * tile against the group's rows (the tile's activations stay in L1 while the rows stream from L2); returns the
 * first token not done. q4 selects the q4_0 tile. */
static int64_t FN(tiles_)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                          float *y, int64_t ldy, int accumulate, int q4) {
    const int64_t K = a->K, nb = K / QK, blk_bytes = q4 ? Q4_BYTES : Q8_BYTES;
    if (T < GT || nb > GT_MAX_NB) return 0;
    float dT[GT_MAX_NB * 8], dw[GT_DW];
    int32_t sT[GT_MAX_NB * 8];
    const int64_t group = GT_DW / nb, tiles_end = T / GT * GT;
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
        const int64_t g1 = g0 + group < r1 ? g0 + group : r1;
        for (int64_t r = g0; r < g1; r++)
            for (int64_t b = 0; b < nb; b++) dw[(r - g0) * nb + b] = FN(h2f_)(w + r * row_bytes + b * blk_bytes);
        for (int64_t t = 0; t < tiles_end; t += GT) {
            FN(tile_scales_)(a, t, nb, dT, q4 ? sT : 0);
            const int8_t *xq = a->q + t * K;
            for (int64_t r = g0; r < g1; r++) {
                float out[GT];
                const float *dwr = dw + (r - g0) * nb;
                if (q4) FN(tile_q4_)(w + r * row_bytes, dwr, nb, xq, K, dT, sT, out);
                else FN(tile_q8_)(w + r * row_bytes, dwr, nb, xq, K, dT, out);
                for (int j = 0; j < GT; j++) store_y(y + (t + j) * ldy + r, out[j], accumulate);
            }
        }
    }
    return tiles_end;
}

/* Decode streams each weight row once from memory: asking for the bytes 1 KB ahead of the ones being multiplied
 * keeps the loads in flight past the chunk and row boundaries where the hardware prefetcher loses the stream
 * (0.5B q8_0 decode +16 % on one thread, +10 % on two, on an AVX2 EPYC). The arithmetic is unchanged. */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 1024
#endif
static void FN(rows_q8_)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                         int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t K = a->K, nb = K / QK;
    const int64_t t0 = FN(tiles_)(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 0);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        int64_t t = t0;
        /* 4 tokens share each weight block load. Each token sums its blocks exactly as the one-token loop below
         * does (even blocks in one chain, odd in another, the two added, then the lanes): a token's result must
         * not depend on the batch it came in, or a reused KV cache would not give the logits a fresh prefill gives
         * (an ulp moves an int8 activation rounding downstream) */
        for (; t + 4 <= T; t += 4) {
            __m256 acc[2][4];
            for (int j = 0; j < 4; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * Q8_BYTES;
                __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + 2));
                __m256i ax = _mm256_sign_epi8(wv, wv);
                float dw = FN(h2f_)(blk);
                for (int j = 0; j < 4; j++) {
                    __m256 p = FN(q8_dot_)(ax, wv, a->q + (t + j) * K + b * QK);
                    acc[b & 1][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d[(t + j) * nb + b]), p, acc[b & 1][j]);
                }
            }
            for (int j = 0; j < 4; j++)
                store_y(y + (t + j) * ldy + r, FN(hsum8_)(_mm256_add_ps(acc[0][j], acc[1][j])), accumulate);
        }
        for (; t < T; t++) {                      /* one token: two chains hide the FMA latency */
            const int8_t *xq = a->q + t * K;
            const float *xd = a->d + t * nb;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
            int64_t b = 0;
            for (; b + 2 <= nb; b += 2) {
                const uint8_t *b0 = row + b * Q8_BYTES, *b1 = b0 + Q8_BYTES;
                _mm_prefetch((const char *)(b0 + PREFETCH_AHEAD), _MM_HINT_T0);
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
                __m256i w1 = _mm256_loadu_si256((const __m256i *)(b1 + 2));
                __m256 p0 = FN(q8_dot_)(_mm256_sign_epi8(w0, w0), w0, xq + b * QK);
                __m256 p1 = FN(q8_dot_)(_mm256_sign_epi8(w1, w1), w1, xq + (b + 1) * QK);
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b0) * xd[b]), p0, acc0);
                acc1 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b1) * xd[b + 1]), p1, acc1);
            }
            if (b < nb) {
                const uint8_t *b0 = row + b * Q8_BYTES;
                __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
                __m256 p0 = FN(q8_dot_)(_mm256_sign_epi8(w0, w0), w0, xq + b * QK);
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b0) * xd[b]), p0, acc0);
            }
            store_y(y + t * ldy + r, FN(hsum8_)(_mm256_add_ps(acc0, acc1)), accumulate);
        }
    }
}

static void FN(rows_q4_)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                         int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t K = a->K, nb = K / QK;
    const int64_t t0 = FN(tiles_)(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * row_bytes;
        int64_t t = t0;
        for (; t + 4 <= T; t += 4) {              /* as rows_q8_: the one-token loop's order, token by token */
            __m256 acc[2][4];
            for (int j = 0; j < 4; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * Q4_BYTES;
                __m256i nib = FN(q4_unpack_)(blk + 2);
                float dw = FN(h2f_)(blk);
                for (int j = 0; j < 4; j++) {
                    int64_t tb = (t + j) * nb + b;
                    __m256 p = FN(q4_dot_)(nib, a->q + (t + j) * K + b * QK, a->s[tb]);
                    acc[b & 1][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d[tb]), p, acc[b & 1][j]);
                }
            }
            for (int j = 0; j < 4; j++)
                store_y(y + (t + j) * ldy + r, FN(hsum8_)(_mm256_add_ps(acc[0][j], acc[1][j])), accumulate);
        }
        for (; t < T; t++) {
            const int8_t *xq = a->q + t * K;
            const float *xd = a->d + t * nb;
            const int32_t *xs = a->s + t * nb;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
            int64_t b = 0;
            for (; b + 2 <= nb; b += 2) {
                const uint8_t *b0 = row + b * Q4_BYTES, *b1 = b0 + Q4_BYTES;
                _mm_prefetch((const char *)(b0 + PREFETCH_AHEAD), _MM_HINT_T0);
                __m256 p0 = FN(q4_dot_)(FN(q4_unpack_)(b0 + 2), xq + b * QK, xs[b]);
                __m256 p1 = FN(q4_dot_)(FN(q4_unpack_)(b1 + 2), xq + (b + 1) * QK, xs[b + 1]);
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b0) * xd[b]), p0, acc0);
                acc1 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b1) * xd[b + 1]), p1, acc1);
            }
            if (b < nb) {
                const uint8_t *b0 = row + b * Q4_BYTES;
                __m256 p0 = FN(q4_dot_)(FN(q4_unpack_)(b0 + 2), xq + b * QK, xs[b]);
                acc0 = _mm256_fmadd_ps(_mm256_set1_ps(FN(h2f_)(b0) * xd[b]), p0, acc0);
            }
            store_y(y + t * ldy + r, FN(hsum8_)(_mm256_add_ps(acc0, acc1)), accumulate);
        }
    }
}

/* 8 float weights from f32, f16 (F16C) or bf16 (shift into the high half) */
static inline __m256 FN(load8_)(const void *w, int32_t dtype, int64_t i) {
    if (dtype == PT_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (dtype == PT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float FN(load1_)(const void *w, int32_t dtype, int64_t i) {
    if (dtype == PT_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dtype == PT_F16 ? FN(h2f1_)(h) : pt_bf2f(h);
}

static void FN(rows_float_)(const void *w, int32_t dtype, int64_t K, int64_t r0, int64_t r1, const float *x,
                            int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t esize = dtype == PT_F32 ? 4 : 2;
    for (int64_t r = r0; r < r1; r++) {
        const void *row = (const uint8_t *)w + r * K * esize;
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * K;
            __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 16 <= K; i += 16) {
                acc0 = _mm256_fmadd_ps(FN(load8_)(row, dtype, i), _mm256_loadu_ps(xt + i), acc0);
                acc1 = _mm256_fmadd_ps(FN(load8_)(row, dtype, i + 8), _mm256_loadu_ps(xt + i + 8), acc1);
            }
            for (; i + 8 <= K; i += 8) acc0 = _mm256_fmadd_ps(FN(load8_)(row, dtype, i), _mm256_loadu_ps(xt + i), acc0);
            float s = FN(hsum8_)(_mm256_add_ps(acc0, acc1));
            for (; i < K; i++) s += FN(load1_)(row, dtype, i) * xt[i];
            store_y(y + t * ldy + r, s, accumulate);
        }
    }
}

/* the sums of 8 vectors' lanes, one per lane of the result, by one fixed tree: a key's score depends on its own
 * accumulator only, never on which keys share its group (a group of fewer than 8 passes zeros for the rest) */
static inline __m256 FN(sum8x8_)(const __m256 *a) {
    __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* scores[p] = softcap(s[p] * mul) for the r <= 8 keys of a group; returns the largest */
static inline float FN(cap_scores_)(__m256 s, float mul, float softcap, float *scores, int64_t r, float m) {
    float tmp[8];
    _mm256_storeu_ps(tmp, _mm256_mul_ps(s, _mm256_set1_ps(mul)));
    for (int64_t i = 0; i < r; i++) {
        const float v = softcap_g(tmp[i], softcap);
        scores[i] = v;
        if (v > m) m = v;
    }
    return m;
}

/* One query head over a block of the float cache (attn_block_g's contract, kern_generic.h): the scores of 8 keys
 * at a time, each in its own accumulator (8 independent FMA chains instead of one), summed by one tree. Head sizes
 * that are not a multiple of 8 take the generic loop. */
static void FN(attn_block_)(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                            float softcap, float *scores, float *out, float *ml) {
    if (hd % 8 || hd > 512) {
        attn_block_g(q, k, v, n, hd, scale, softcap, scores, out, ml);
        return;
    }
    float m = -INFINITY;
    for (int64_t p = 0; p < n; p += 8) {
        const int64_t r = n - p < 8 ? n - p : 8;
        __m256 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
        if (r == 8) {           /* the same arithmetic as below, with the 8 accumulators in registers */
            for (int64_t i = 0; i < hd; i += 8) {
                const __m256 qi = _mm256_loadu_ps(q + i);
                for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k + (p + j) * hd + i), acc[j]);
            }
        } else {
            for (int64_t i = 0; i < hd; i += 8) {
                const __m256 qi = _mm256_loadu_ps(q + i);
                for (int j = 0; j < r; j++) acc[j] = _mm256_fmadd_ps(qi, _mm256_loadu_ps(k + (p + j) * hd + i), acc[j]);
            }
        }
        m = FN(cap_scores_)(FN(sum8x8_)(acc), scale, softcap, scores + p, r, m);
    }
    ml[0] = m;
    ml[1] = exp_scores(scores, n, m);
    weigh_rows_g(scores, v, n, hd, out);
}

#define PT_X86_TABLE(var, label) \
    const pt_kernels var = { \
        .name = label, \
        .quant_act = FN(quant_act_), \
        .rows_q8 = FN(rows_q8_), \
        .rows_q4 = FN(rows_q4_), \
        .rows_float = FN(rows_float_), \
        .norm = norm_g, \
        .attn_block = FN(attn_block_), \
        .bias_act = bias_act_g, \
        .glu = glu_g, \
    }
