/* The x86 SIMD kernels, shared by the AVX2 and the AVX-512 VNNI paths. The including file sets the target
 * pragma, defines DOT_ACC(acc, u, s) (acc plus 8 int32 lanes, each the sum of 4 products unsigned u8 x signed s8;
 * it may use `ones`, the 16-bit 1s every caller has in scope), DOT_ACC16 (whether q4_0's products may be summed
 * in 16 bits first) and SUFFIX, then includes this file. q8_0 weights use the sign trick (|w| unsigned, x carrying
 * w's sign); q4_0 nibbles are unsigned already and the -8 offset is removed with the activation block sum:
 * sum((n-8)x) = sum(nx) - 8 sum(x). */
#include <immintrin.h>
#include <stdlib.h>

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

/* 16 bytes of nibbles -> 32 bytes (low nibbles, then high): the bytes in both halves, the high half shifted by 4 */
static inline __m256i FN(q4_unpack_)(const uint8_t *qs) {
    __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

/* ---- the integer matmul: groups of 8 rows against tiles of up to 8 tokens ----
 * A row's result for a token is the scalar reference's arithmetic to the bit (kern_scalar.c): each block's 32
 * products summed exactly as integers, then sum += (dw * dx) * isum over the blocks in order, in float, multiplies
 * and adds never fused. So a token gets the same bits in any batch, at any place in it, in any split of the rows,
 * and from this path or the scalar one (the start-up check finds them equal, not merely close).
 * Whole-block integer sums without horizontal adds: a block of 8 rows is transposed in registers, so that vector k
 * holds bytes 4k..4k+3 of each row, one 32-bit lane per row; with a token's 4 activation bytes 4k..4k+3 broadcast,
 * vpmaddubsw + vpmaddwd leave each row's 4 products summed in its own lane, and 8 such steps make the block: 8 rows'
 * sums in one vector, converted, scaled and added for 8 rows at once. The transpose is done once per block for a
 * tile's tokens, and a tile's weights come from L1/L2 while its activations stay in L1.
 * q8_0: the sign trick (|w| unsigned, the activation carrying w's sign). q4_0: the nibbles (0..15) are the unsigned
 * operand and the -8 offset comes off as 8 x the activation block sum; their pair sums are at most 2 x 15 x 127, so
 * the 8 steps add up in 16 bits before one vpmaddwd (DOT_ACC16; VNNI chains vpdpbusd instead). Rows left over
 * from groups of 8 (a matrix's last few) take the scalar kernel, which gives the same bits. */
#define GT 8            /* tokens per tile: their 8 accumulators stay in registers */

/* keeps the compiler from fusing a multiply and the add after it into an FMA (another rounding than the scalar's) */
#if defined(__GNUC__) || defined(__clang__)
#define NO_FUSE(v) __asm__("" : "+x"(v))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define NO_FUSE(v) ((void)0)
#define ALWAYS_INLINE __forceinline
#endif

/* an 8 x 8 transpose of 32-bit elements: v[k] lane i = v[i] lane k */
static inline void FN(transpose8_)(__m256i *v) {
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    v[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    v[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    v[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    v[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    v[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    v[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    v[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    v[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

static inline __m256i FN(bcast4_)(const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

/* Decode streams each weight row once from memory: asking for the bytes 1 KB ahead of the ones being multiplied
 * keeps the loads in flight past the chunk and row boundaries where the hardware prefetcher loses the stream
 * (0.5B q8_0 decode +16 % on one thread, +10 % on two, on an AVX2 EPYC). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 1024
#endif

/* rows r..r+7 against tokens t0..t0+n-1 (n a constant where it is inlined) */
static ALWAYS_INLINE void FN(group_)(const uint8_t *w, int64_t rb, int64_t r, const pt_act *a, int64_t t0,
                                     const int n, float *y, int64_t ldy, int accumulate, const int q4) {
    const int64_t K = a->K, nb = K / QK, bb = q4 ? Q4_BYTES : Q8_BYTES;
    const uint8_t *row0 = w + r * rb;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row0 + b * bb;
        __m256i v[8], av[8];
        uint16_t h[8];
        if (q4 ? (b & 3) == 0 : (b & 1) == 0) {
            /* the weights stream from memory or L3, 8 rows side by side, which the hardware prefetcher does
             * not follow; each row is asked for PREFETCH_AHEAD bytes ahead, past its end the same row of the next
             * group (the next 8 rows) */
            const int64_t ahead = b + PREFETCH_AHEAD / bb;
            const uint8_t *pf = ahead < nb ? row0 + ahead * bb : row0 + 8 * rb + (ahead - nb) * bb;
            for (int i = 0; i < 8; i++) _mm_prefetch((const char *)(pf + i * rb), _MM_HINT_T0);
        }
        for (int i = 0; i < 8; i++) {
            const uint8_t *bi = blk + i * rb;
            h[i] = pt_load_u16(bi);
            v[i] = q4 ? FN(q4_unpack_)(bi + 2) : _mm256_loadu_si256((const __m256i *)(bi + 2));
        }
        FN(transpose8_)(v);
        if (!q4)
            for (int k = 0; k < 8; k++) av[k] = _mm256_sign_epi8(v[k], v[k]);
        /* the 8 scales by inserts, not 8 stores read back as one load (a store-forwarding stall per block) */
        const __m256 dw = _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3],
                                                         (short)h[4], (short)h[5], (short)h[6], (short)h[7]));
        for (int j = 0; j < n; j++) {
            const int64_t tb = (t0 + j) * nb + b;
            const int8_t *x = a->q + (t0 + j) * K + b * QK;
            __m256i s = _mm256_setzero_si256();
            if (q4) {
#if DOT_ACC16
                __m256i s16 = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[k], FN(bcast4_)(x + 4 * k)));
                s = _mm256_madd_epi16(s16, ones);
#else
                for (int k = 0; k < 8; k++) s = DOT_ACC(s, v[k], FN(bcast4_)(x + 4 * k));
#endif
                s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * a->s[tb]));
            } else {
                for (int k = 0; k < 8; k++) s = DOT_ACC(s, av[k], _mm256_sign_epi8(FN(bcast4_)(x + 4 * k), v[k]));
            }
            __m256 prod = _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a->d[tb])), _mm256_cvtepi32_ps(s));
            NO_FUSE(prod);
            acc[j] = _mm256_add_ps(acc[j], prod);
        }
    }
    (void)ones;
    for (int j = 0; j < n; j++) {
        float o[8];
        _mm256_storeu_ps(o, acc[j]);
        for (int i = 0; i < 8; i++) store_y(y + (t0 + j) * ldy + r + i, o[i], accumulate);
    }
}

/* the 8 int32 partial sums of one block of one row and one token */
static inline __m256i FN(block_dot_)(const uint8_t *blk, const int8_t *x, const __m256i ones, const int q4) {
    const __m256i y = _mm256_loadu_si256((const __m256i *)x);
    if (q4) return DOT_ACC(_mm256_setzero_si256(), FN(q4_unpack_)(blk + 2), y);
    const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
    return DOT_ACC(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}

/* One row against nt <= 4 tokens (decode, a few sequences, a prefill's last tokens), the row streamed once and each
 * weight block loaded once for the nt tokens: 4 blocks' integer sums of a token at a time out of one horizontal
 * tree, then the scalar reference's float steps, block by block. Same bits as a tile gives. */
static ALWAYS_INLINE void FN(row_)(const uint8_t *row, const pt_act *a, const int nt, float *out, const int q4) {
    const int64_t K = a->K, nb = K / QK, bb = q4 ? Q4_BYTES : Q8_BYTES;
    const __m256i ones = _mm256_set1_epi16(1);
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        const uint8_t *blk = row + b * bb;
        _mm_prefetch((const char *)(blk + PREFETCH_AHEAD), _MM_HINT_T0);
        if (!q4) _mm_prefetch((const char *)(blk + PREFETCH_AHEAD + 64), _MM_HINT_T0);
        __m256i u[4], sg[4];      /* the unsigned operands (|w| or the nibbles), and w for the signs (q8_0) */
        for (int k = 0; k < 4; k++) {
            if (q4) {
                u[k] = FN(q4_unpack_)(blk + k * bb + 2);
            } else {
                sg[k] = _mm256_loadu_si256((const __m256i *)(blk + k * bb + 2));
                u[k] = _mm256_sign_epi8(sg[k], sg[k]);
            }
        }
        const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16((short)pt_load_u16(blk), (short)pt_load_u16(blk + bb),
                                                      (short)pt_load_u16(blk + 2 * bb),
                                                      (short)pt_load_u16(blk + 3 * bb), 0, 0, 0, 0));
        for (int j = 0; j < nt; j++) {
            const int8_t *x = a->q + j * K + b * QK;
            __m256i p[4];
            for (int k = 0; k < 4; k++) {
                const __m256i y = _mm256_loadu_si256((const __m256i *)(x + k * QK));
                p[k] = DOT_ACC(_mm256_setzero_si256(), u[k], q4 ? y : _mm256_sign_epi8(y, sg[k]));
            }
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            if (q4) s4 = _mm_sub_epi32(s4, _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(a->s + j * nb + b)), 3));
            __m128 prod = _mm_mul_ps(_mm_mul_ps(dw, _mm_loadu_ps(a->d + j * nb + b)), _mm_cvtepi32_ps(s4));
            NO_FUSE(prod);
            float pr[4];
            _mm_storeu_ps(pr, prod);
            sum[j] += pr[0];
            sum[j] += pr[1];
            sum[j] += pr[2];
            sum[j] += pr[3];
        }
    }
    for (; b < nb; b++) {
        const uint8_t *blk = row + b * bb;
        const float dw = FN(h2f_)(blk);
        for (int j = 0; j < nt; j++) {
            const __m256i p = FN(block_dot_)(blk, a->q + j * K + b * QK, ones, q4);
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
            const int32_t isum = _mm_cvtsi128_si32(t) - (q4 ? 8 * a->s[j * nb + b] : 0);
            __m128 prod = _mm_mul_ss(_mm_mul_ss(_mm_set_ss(dw), _mm_set_ss(a->d[j * nb + b])),
                                     _mm_cvtsi32_ss(_mm_setzero_ps(), isum));
            NO_FUSE(prod);
            sum[j] += _mm_cvtss_f32(prod);
        }
    }
    (void)ones;
    for (int j = 0; j < nt; j++) out[j] = sum[j];
}

/* rows r0..r1 against nt <= 4 tokens starting at t0, row by row */
static ALWAYS_INLINE void FN(rows_few_)(const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                                        int64_t t0, const int nt, float *y, int64_t ldy, int accumulate,
                                        const int q4) {
    const int64_t K = a->K, nb = K / QK;
    const pt_act at = {a->q + t0 * K, a->d + t0 * nb, a->s + t0 * nb, K};
    for (int64_t r = r0; r < r1; r++) {
        float o[4];
        FN(row_)(w + r * rb, &at, nt, o, q4);
        for (int j = 0; j < nt; j++) store_y(y + (t0 + j) * ldy + r, o[j], accumulate);
    }
}

/* tokens in tiles of 8 against groups of 8 rows (rows left over: the scalar kernel, same bits); the tokens left
 * (all of them below 8: decode, a few sequences) row by row, up to 4 at a time */
static inline void FN(rows_int_)(const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                                 float *y, int64_t ldy, int accumulate, const int q4) {
    const int64_t T8 = T / GT * GT;
    if (T8) {
        int64_t r = r0;
        for (; r + 8 <= r1; r += 8)
            for (int64_t t = 0; t < T8; t += GT) FN(group_)(w, rb, r, a, t, GT, y, ldy, accumulate, q4);
        if (r < r1) (q4 ? pt_kernels_scalar.rows_q4 : pt_kernels_scalar.rows_q8)(w, rb, r, r1, a, T8, y, ldy, accumulate);
    }
    int64_t t = T8;
    for (; t + 4 <= T; t += 4) FN(rows_few_)(w, rb, r0, r1, a, t, 4, y, ldy, accumulate, q4);
    if (T - t == 3) FN(rows_few_)(w, rb, r0, r1, a, t, 3, y, ldy, accumulate, q4);
    else if (T - t == 2) FN(rows_few_)(w, rb, r0, r1, a, t, 2, y, ldy, accumulate, q4);
    else if (T - t == 1) FN(rows_few_)(w, rb, r0, r1, a, t, 1, y, ldy, accumulate, q4);
}

static void FN(rows_q8_)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                         int64_t T, float *y, int64_t ldy, int accumulate) {
    FN(rows_int_)(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 0);
}

static void FN(rows_q4_)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                         int64_t T, float *y, int64_t ldy, int accumulate) {
    FN(rows_int_)(w, row_bytes, r0, r1, a, T, y, ldy, accumulate, 1);
}

/* ---- interleaved matrices (PT_Q8_0_X8 / PT_Q4_0_X8, layout in interleave.c) ----
 * A group's block already holds the 8 rows in the lanes, in the order the tile above builds with a transpose: each
 * vector is loaded as is, and 8 rows' integer sums come out of vpmaddubsw + vpmaddwd (a vpdpbusd chain on VNNI)
 * with no horizontal adds; the 8 scales convert in one vcvtph2ps, and 8 rows' float steps run in one vector. The
 * weights stream from memory in file order (one stream the hardware prefetcher follows, helped 1 KB ahead when the
 * tile is a decode's few tokens), and the float arithmetic is the scalar reference's, so the same bits. */

/* the 8 rows of group gp against tokens t0..t0+n-1 (n a constant where it is inlined) */
static ALWAYS_INLINE void FN(x8_tile_)(const uint8_t *gp, const pt_act *a, int64_t t0, const int n, float *y,
                                       int64_t ldy, int64_t r, int accumulate, const int q4, const int stream) {
    const int64_t K = a->K, nb = K / QK, bb = q4 ? Q4X8_BYTES : Q8X8_BYTES;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = gp + b * bb;
        if (stream)
            for (int c = 0; c < (q4 ? 3 : 5); c++) _mm_prefetch((const char *)(blk + PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
        __m256i s[GT];
        if (q4) {       /* the nibbles unpacked once for the tile's tokens: vector k, then k + 4 from the high half */
            const __m256i m = _mm256_set1_epi8(0x0F);
            __m256i v[8];
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * k));
                v[k] = _mm256_and_si256(p, m);
                v[k + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), m);
            }
            for (int j = 0; j < n; j++) {
                const int8_t *x = a->q + (t0 + j) * K + b * QK;
                /* values 4k..4k+3 are in v[k] for k < 4, and 16+4(k-4).. in v[k] for k >= 4 */
#if DOT_ACC16
                __m256i s16 = _mm256_maddubs_epi16(v[0], FN(bcast4_)(x));
                for (int k = 1; k < 8; k++)
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[k], FN(bcast4_)(x + (k < 4 ? 4 * k : 16 + 4 * (k - 4)))));
                s[j] = _mm256_madd_epi16(s16, ones);
#else
                s[j] = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) s[j] = DOT_ACC(s[j], v[k], FN(bcast4_)(x + (k < 4 ? 4 * k : 16 + 4 * (k - 4))));
#endif
                s[j] = _mm256_sub_epi32(s[j], _mm256_set1_epi32(8 * a->s[(t0 + j) * nb + b]));
            }
        } else {        /* one weight vector at a time, against every token of the tile (the sign trick) */
            for (int j = 0; j < n; j++) s[j] = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * k)), aw = _mm256_sign_epi8(w, w);
                for (int j = 0; j < n; j++)
                    s[j] = DOT_ACC(s[j], aw, _mm256_sign_epi8(FN(bcast4_)(a->q + (t0 + j) * K + b * QK + 4 * k), w));
            }
        }
        for (int j = 0; j < n; j++) {
            __m256 prod = _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a->d[(t0 + j) * nb + b])), _mm256_cvtepi32_ps(s[j]));
            NO_FUSE(prod);
            acc[j] = _mm256_add_ps(acc[j], prod);
        }
    }
    (void)ones;
    for (int j = 0; j < n; j++) {
        float *out = y + (t0 + j) * ldy + r;
        _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[j]) : acc[j]);
    }
}

/* groups of rows r0..r1 (multiples of 8) against T tokens, in tiles of 8 and the tokens left */
static inline void FN(rows_x8_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                                int64_t ldy, int accumulate, const int q4) {
    const int64_t gbytes = a->K / QK * (q4 ? Q4X8_BYTES : Q8X8_BYTES);
    for (int64_t r = r0; r < r1; r += 8) {
        const uint8_t *gp = w + r / 8 * gbytes;
        int64_t t = 0;
        for (; t + GT <= T; t += GT) FN(x8_tile_)(gp, a, t, GT, y, ldy, r, accumulate, q4, 0);
        switch (T - t) {       /* a decode (1 token, or one per sequence) streams its weights from memory */
        case 1: FN(x8_tile_)(gp, a, t, 1, y, ldy, r, accumulate, q4, 1); break;
        case 2: FN(x8_tile_)(gp, a, t, 2, y, ldy, r, accumulate, q4, 1); break;
        case 3: FN(x8_tile_)(gp, a, t, 3, y, ldy, r, accumulate, q4, 1); break;
        case 4: FN(x8_tile_)(gp, a, t, 4, y, ldy, r, accumulate, q4, 1); break;
        case 5: FN(x8_tile_)(gp, a, t, 5, y, ldy, r, accumulate, q4, 1); break;
        case 6: FN(x8_tile_)(gp, a, t, 6, y, ldy, r, accumulate, q4, 1); break;
        case 7: FN(x8_tile_)(gp, a, t, 7, y, ldy, r, accumulate, q4, 1); break;
        default: break;
        }
    }
}

static void FN(rows_q8x8_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                           int64_t ldy, int accumulate) {
    FN(rows_x8_)(w, r0, r1, a, T, y, ldy, accumulate, 0);
}

static void FN(rows_q4x8_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                           int64_t ldy, int accumulate) {
    FN(rows_x8_)(w, r0, r1, a, T, y, ldy, accumulate, 1);
}

/* ---- GGUF's K-quants (kern_gguf.h's arithmetic, bit for bit): Q4_K, Q5_K and Q6_K here, the other GGUF types
 * through the plain C copy ----
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

/* ---- GGUF block types in a prefill: 8 rows unpacked once, then multiplied like an interleaved q8_0 group ----
 * A row at a time (above), each super-block's values are unpacked again for every few tokens: fine for a decode,
 * but a prefill's hundreds of tokens then pay the unpacking hundreds of times (0.5B Q4_K_M prefill 0.30x
 * llama.cpp). Here a group of 8 rows is unpacked once per call, by the reference's own gg_block (kern_gguf.h), into
 * the interleaved layout (per 32-value block 8 vectors, lane i of vector k = values 4k..4k+3 of row i, and each
 * float factor for the 8 rows as one vector), and every token of the call is multiplied against it from L1 / L2 in
 * tiles of 8, 8 rows' block sums per vector with no horizontal adds. Each row's terms are the reference's, in its
 * order, so the same bits. Every type but Q2_K (whose min terms are over half-blocks) takes it. */
#define GT_BLOCK 320     /* bytes of one unpacked block of 8 rows: 8 x 32 values, then 2 factor vectors */

static int FN(gguf_tiles_)(int32_t type) { return type != GG_Q2_K; }

/* rows r..r+7 unpacked into buf (nb blocks of GT_BLOCK bytes) */
static void FN(gguf_unpack8_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r, int64_t nb, uint8_t *buf) {
    if (type == GG_Q4_K || type == GG_Q5_K || type == GG_Q6_K) {
        /* the K-quants a super-block of 8 rows at a time, by the decode kernel's unpacking (gg_block, a value at a
         * time, took 6 ms for a [4864, 1024] Q6_K matrix: a 16-token prompt paid it whole) */
        for (int64_t sb = 0; sb < nb / 8; sb++) {
            __m256i v[8][8], fa[8], fb[8];
            for (int i = 0; i < 8; i++) {
                __m256 a0, b0;
                FN(kq_unpack_)(type, w + (r + i) * rb, sb, v[i], &a0, &b0);
                fa[i] = _mm256_castps_si256(a0);
                fb[i] = _mm256_castps_si256(b0);
            }
            FN(transpose8_)(fa);        /* lane i = row i: fa[j] the 8 rows' factors of block j */
            FN(transpose8_)(fb);
            for (int j = 0; j < 8; j++) {
                uint8_t *blk = buf + (sb * 8 + j) * GT_BLOCK;
                __m256i vv[8];
                for (int i = 0; i < 8; i++) vv[i] = v[i][j];
                FN(transpose8_)(vv);
                for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(blk + 32 * k), vv[k]);
                _mm256_storeu_si256((__m256i *)(blk + 256), fa[j]);
                _mm256_storeu_si256((__m256i *)(blk + 288), fb[j]);
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
 * (m, sum x) added (Q4_1, Q5_1); 2 the same subtracted (Q4_K, Q5_K); 3 a term per half-block (Q6_K, Q3_K) */
static ALWAYS_INLINE void FN(gguf_tile_)(const uint8_t *buf, const pt_act *a, int64_t t0, const int n, float *y,
                                         int64_t ldy, int64_t r, int accumulate, const int kind, const int sgn) {
    const int64_t K = a->K, nb = K / QK;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = buf + b * GT_BLOCK;
        __m256i lo[GT], hi[GT];
        for (int j = 0; j < n; j++) lo[j] = hi[j] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(blk + 32 * k));
            const __m256i u = sgn ? _mm256_sign_epi8(wv, wv) : wv;
            for (int j = 0; j < n; j++) {
                const __m256i xb = FN(bcast4_)(a->q + (t0 + j) * K + b * QK + 4 * k);
                const __m256i xs = sgn ? _mm256_sign_epi8(xb, wv) : xb;
                if (kind == 3 && k >= 4) hi[j] = DOT_ACC(hi[j], u, xs);
                else lo[j] = DOT_ACC(lo[j], u, xs);
            }
        }
        const __m256 f0 = _mm256_loadu_ps((const float *)(blk + 256)), f1 = _mm256_loadu_ps((const float *)(blk + 288));
        for (int j = 0; j < n; j++) {
            const int64_t tb = (t0 + j) * nb + b;
            const __m256 dx = _mm256_set1_ps(a->d[tb]);
            __m256 p0 = _mm256_mul_ps(_mm256_mul_ps(f0, dx), _mm256_cvtepi32_ps(lo[j]));
            NO_FUSE(p0);
            acc[j] = _mm256_add_ps(acc[j], p0);
            if (kind) {
                __m256 p1 = _mm256_mul_ps(_mm256_mul_ps(f1, dx), _mm256_cvtepi32_ps(
                    kind == 3 ? hi[j] : _mm256_set1_epi32(a->s[tb])));
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

static ALWAYS_INLINE void FN(gguf_tiles_kind_)(const uint8_t *buf, const pt_act *a, int64_t T, float *y, int64_t ldy,
                                               int64_t r, int accumulate, const int kind, const int sgn) {
    int64_t t = 0;
    for (; t + GT <= T; t += GT) FN(gguf_tile_)(buf, a, t, GT, y, ldy, r, accumulate, kind, sgn);
    switch (T - t) {
    case 1: FN(gguf_tile_)(buf, a, t, 1, y, ldy, r, accumulate, kind, sgn); break;
    case 2: FN(gguf_tile_)(buf, a, t, 2, y, ldy, r, accumulate, kind, sgn); break;
    case 3: FN(gguf_tile_)(buf, a, t, 3, y, ldy, r, accumulate, kind, sgn); break;
    case 4: FN(gguf_tile_)(buf, a, t, 4, y, ldy, r, accumulate, kind, sgn); break;
    case 5: FN(gguf_tile_)(buf, a, t, 5, y, ldy, r, accumulate, kind, sgn); break;
    case 6: FN(gguf_tile_)(buf, a, t, 6, y, ldy, r, accumulate, kind, sgn); break;
    case 7: FN(gguf_tile_)(buf, a, t, 7, y, ldy, r, accumulate, kind, sgn); break;
    default: break;
    }
}

/* groups of 8 rows from r0 through the tiles; returns the first row not done (the rest: fewer than 8), or r0 when
 * the buffer cannot be had (the caller's row kernels then do them all) */
static int64_t FN(gguf_tiled_rows_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1,
                                    const pt_act *a, int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    uint8_t *buf = malloc((size_t)(nb * GT_BLOCK));
    if (!buf) return r0;
    /* the values' signs (signed ones take the sign trick) and the terms, by type */
    const int sgn = type == GG_Q5_0 || type == GG_Q6_K || type == GG_Q3_K || type == GG_IQ4_NL || type == GG_IQ4_XS;
    const int kind = type == GG_Q4_1 || type == GG_Q5_1 ? 1 : type == GG_Q4_K || type == GG_Q5_K ? 2
                   : type == GG_Q6_K || type == GG_Q3_K ? 3 : 0;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        FN(gguf_unpack8_)(type, w, rb, r, nb, buf);
        switch (kind * 2 + sgn) {
        case 0: FN(gguf_tiles_kind_)(buf, a, T, y, ldy, r, accumulate, 0, 0); break;
        case 1: FN(gguf_tiles_kind_)(buf, a, T, y, ldy, r, accumulate, 0, 1); break;
        case 2: FN(gguf_tiles_kind_)(buf, a, T, y, ldy, r, accumulate, 1, 0); break;
        case 4: FN(gguf_tiles_kind_)(buf, a, T, y, ldy, r, accumulate, 2, 0); break;
        default: FN(gguf_tiles_kind_)(buf, a, T, y, ldy, r, accumulate, 3, 1); break;
        }
    }
    free(buf);
    return r;
}

static void FN(rows_gguf_)(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                           int64_t T, float *y, int64_t ldy, int accumulate) {
    if (T >= GT && FN(gguf_tiles_)(type)) {      /* a prefill, or a tile of sequences: 8 rows unpacked at a time */
        r0 = FN(gguf_tiled_rows_)(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        if (r0 >= r1) return;
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

/* The GGUF types the loader keeps as stored on x86 (the rest it decodes to q8_0, which it then interleaves). Q4_1,
 * Q5_0, Q5_1 and IQ4_NL have SIMD kernels above (b32_row_) but stay out: a row at a time they decode at a third
 * of the interleaved q8_0 kernel's speed (a Q4_K_M file whose rows are not whole super-blocks is mostly Q5_0:
 * 0.5B decode 24.7 tok/s as stored, 43.3 as q8_0, on an AVX2 EPYC), so by default they cost memory (8.5 bits a
 * value in place of 5.5-6) to run fast; a load that asks for the stored types (kquants=True) keeps them. */
#define X86_GGUF_FAST ((1u << GG_Q4_K) | (1u << GG_Q5_K) | (1u << GG_Q6_K))
#define X86_GGUF_B32 ((1u << GG_Q4_1) | (1u << GG_Q5_0) | (1u << GG_Q5_1) | (1u << GG_IQ4_NL))

/* the interleaved kernels a path's table holds: these 256-bit ones unless the including file has its own */
#ifndef X8_KERNEL
#define X8_KERNEL(t) FN(rows_##t##x8_)
#endif
#ifndef ATTN_KERNEL
#define ATTN_KERNEL FN(attn_block_)
#endif

#define PT_X86_TABLE(var, label) \
    const pt_kernels var = { \
        .name = label, \
        .quant_act = FN(quant_act_), \
        .rows_q8 = FN(rows_q8_), \
        .rows_q4 = FN(rows_q4_), \
        .rows_float = FN(rows_float_), \
        .rows_q8x8 = X8_KERNEL(q8), \
        .rows_q4x8 = X8_KERNEL(q4), \
        .interleave = 1, \
        .rows_gguf = FN(rows_gguf_), \
        .gguf_fast = X86_GGUF_FAST, \
        .gguf_simd = X86_GGUF_FAST | X86_GGUF_B32, \
        .norm = norm_g, \
        .attn_block = ATTN_KERNEL, \
        .bias_act = bias_act_g, \
        .glu = glu_g, \
    }
