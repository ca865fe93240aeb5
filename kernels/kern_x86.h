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
/* the 0-7 tokens after a call's whole tiles, through CALL(n) with n a constant (each copy keeps its accumulators in
 * registers) */
#define TOKENS_LEFT(left, CALL) \
    switch (left) { \
    case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; case 4: CALL(4); break; \
    case 5: CALL(5); break; case 6: CALL(6); break; case 7: CALL(7); break; default: break; \
    }

/* row r against all T tokens, 4 at a time: ROW(t, n, o) fills o[0..n) for tokens t..t+n-1 (n a constant in each
 * copy), then stored into (or added onto) column r of y */
#define ROW_TOKENS4(ROW) \
    for (int64_t t = 0; t < T; t += 4) { \
        float o[4]; \
        const int64_t nt = T - t < 4 ? T - t : 4; \
        switch (nt) { \
        case 1: ROW(t, 1, o); break; case 2: ROW(t, 2, o); break; case 3: ROW(t, 3, o); break; \
        default: ROW(t, 4, o); break; \
        } \
        for (int j = 0; j < nt; j++) store_y(y + (t + j) * ldy + r, o[j], accumulate); \
    }

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
    const pt_act at = {a->q + t0 * K, a->d + t0 * nb, a->s + t0 * nb, K, NULL, NULL};
    for (int64_t r = r0; r < r1; r++) {
        float o[4];
        FN(row_)(w + r * rb, &at, nt, o, q4);
        for (int j = 0; j < nt; j++) store_y(y + (t0 + j) * ldy + r, o[j], accumulate);
    }
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
        /* a decode (1 token, or one per sequence) streams its weights from memory */
#define X8_TAIL(n) FN(x8_tile_)(gp, a, t, n, y, ldy, r, accumulate, q4, 1)
        TOKENS_LEFT(T - t, X8_TAIL)
#undef X8_TAIL
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

/* tokens in tiles of 8 against groups of 8 rows (rows left over: the scalar kernel, same bits); the tokens left
 * (all of them below 8: decode, a few sequences) row by row, up to 4 at a time. A prefill of at least
 * X8_PREFILL_MIN tokens first interleaves each group of 8 rows into a buffer (interleave.c's layout; a copy of the
 * group's bytes) and runs its tiles on the interleaved kernel: the same bits, without the group kernel's transposes
 * (a [3584, 3584] q8_0 matrix at 128 tokens, one AVX2 core: 70 -> 110 GOPS), so a matrix kept as stored (a GGUF
 * file mapped, not repacked) prefills as fast as a repacked one. */
#define X8_PREFILL_MIN 16
static inline void FN(rows_int_)(const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                                 float *y, int64_t ldy, int accumulate, const int q4) {
    const int64_t T8 = T / GT * GT, nb = a->K / QK;
    if (T8) {
        uint8_t *buf = T8 >= X8_PREFILL_MIN && r1 - r0 >= 8 ? (uint8_t *)malloc((size_t)(nb * (q4 ? Q4X8_BYTES : Q8X8_BYTES))) : NULL;
        int64_t r = r0;
        for (; r + 8 <= r1; r += 8) {
            if (buf) {
                pt_x8_group(w + r * rb, rb, nb, buf, q4);
                for (int64_t t = 0; t < T8; t += GT) FN(x8_tile_)(buf, a, t, GT, y, ldy, r, accumulate, q4, 0);
            } else {
                for (int64_t t = 0; t < T8; t += GT) FN(group_)(w, rb, r, a, t, GT, y, ldy, accumulate, q4);
            }
        }
        free(buf);
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

#include "kern_x86_gguf.h"     /* GGUF's block types: rows_gguf_ */

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

/* float weights (f32, f16, bf16) against float activations: each token's sum of a row in two accumulators (values
 * i..i+7 and i+8..i+15 of each 16) in order, then the 8 left and the scalar tail, whatever T and the split: a token
 * gets the same bits in any batch. rf_run_ carries nt <= 4 tokens' accumulators a[2t], a[2t + 1] over [i0, i1)
 * (multiples of 16), each 16 weights converted once for all of them. */
static ALWAYS_INLINE void FN(rf_run_)(const void *row, int32_t dtype, int64_t i0, int64_t i1, const float *x,
                                      int64_t K, const int nt, __m256 *a) {
    __m256 l[8];
    for (int t = 0; t < 2 * nt; t++) l[t] = a[t];
    for (int64_t i = i0; i < i1; i += 16) {
        const __m256 w0 = FN(load8_)(row, dtype, i), w1 = FN(load8_)(row, dtype, i + 8);
        for (int t = 0; t < nt; t++) {
            l[2 * t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * K + i), l[2 * t]);
            l[2 * t + 1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * K + i + 8), l[2 * t + 1]);
        }
    }
    for (int t = 0; t < 2 * nt; t++) a[t] = l[t];
}

static ALWAYS_INLINE float FN(rf_finish_)(const void *row, int32_t dtype, int64_t K, const float *xt, __m256 a0,
                                          __m256 a1) {
    int64_t i = K / 16 * 16;
    if (i + 8 <= K) {
        a0 = _mm256_fmadd_ps(FN(load8_)(row, dtype, i), _mm256_loadu_ps(xt + i), a0);
        i += 8;
    }
    float v = FN(hsum8_)(_mm256_add_ps(a0, a1));
    for (; i < K; i++) v += FN(load1_)(row, dtype, i) * xt[i];
    return v;
}

#define RF_ROWS 32      /* rows whose accumulators a few tokens' pass keeps (8 KiB) ... */
#define RF_SPAN 1024    /* ... over this many values at a time: the tokens' 16 KiB of them stay in L1 for all the rows */
static void FN(rows_float_)(const void *w, int32_t dtype, int64_t K, int64_t r0, int64_t r1, const float *x,
                            int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t esize = dtype == PT_F32 ? 4 : 2, K16 = K / 16 * 16;
#define RF_ROW(r) ((const void *)((const uint8_t *)w + (r) * K * esize))
    if (T == 1) {
        for (int64_t r = r0; r < r1; r++) {
            __m256 a[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
            FN(rf_run_)(RF_ROW(r), dtype, 0, K16, x, K, 1, a);
            store_y(y + r, FN(rf_finish_)(RF_ROW(r), dtype, K, x, a[0], a[1]), accumulate);
        }
        return;
    }
    _Alignas(32) __m256 acc[RF_ROWS][8];
    for (int64_t rb = r0; rb < r1; rb += RF_ROWS) {
        const int64_t nr = r1 - rb < RF_ROWS ? r1 - rb : RF_ROWS;
        for (int64_t t = 0; t < T; t += 4) {
            const int64_t n = T - t < 4 ? T - t : 4;
            const float *xt = x + t * K;
            for (int64_t r = 0; r < nr; r++)
                for (int u = 0; u < 8; u++) acc[r][u] = _mm256_setzero_ps();
            for (int64_t i0 = 0; i0 < K16; i0 += RF_SPAN) {
                const int64_t i1 = i0 + RF_SPAN < K16 ? i0 + RF_SPAN : K16;
                for (int64_t r = 0; r < nr; r++) {
                    if (n == 4) FN(rf_run_)(RF_ROW(rb + r), dtype, i0, i1, xt, K, 4, acc[r]);
                    else if (n == 3) FN(rf_run_)(RF_ROW(rb + r), dtype, i0, i1, xt, K, 3, acc[r]);
                    else if (n == 2) FN(rf_run_)(RF_ROW(rb + r), dtype, i0, i1, xt, K, 2, acc[r]);
                    else FN(rf_run_)(RF_ROW(rb + r), dtype, i0, i1, xt, K, 1, acc[r]);
                }
            }
            for (int64_t r = 0; r < nr; r++)
                for (int64_t u = 0; u < n; u++)
                    store_y(y + (t + u) * ldy + rb + r,
                            FN(rf_finish_)(RF_ROW(rb + r), dtype, K, xt + u * K, acc[r][2 * u], acc[r][2 * u + 1]),
                            accumulate);
        }
    }
#undef RF_ROW
}

/* the sums of 8 vectors' lanes, one per lane of the result, by one fixed tree: a key's score depends on its own
 * accumulator only, never on which keys share its group (a group of fewer than 8 passes zeros for the rest) */
static inline __m256 FN(sum8x8_)(const __m256 *a) {
    __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* scores[p] = softcap(s[p] * mul + slope * (rel + p)) for the r <= 8 keys of a group (ALiBi when slope != 0);
 * returns the largest */
static inline float FN(cap_scores_)(__m256 s, float mul, float softcap, float slope, float rel, float *scores,
                                    int64_t r, float m) {
    float tmp[8];
    _mm256_storeu_ps(tmp, _mm256_mul_ps(s, _mm256_set1_ps(mul)));
    for (int64_t i = 0; i < r; i++) {
        float v = tmp[i];
        if (slope != 0.0f) v += slope * (rel + (float)i);
        v = softcap_g(v, softcap);
        scores[i] = v;
        if (v > m) m = v;
    }
    return m;
}

/* One query head over a block of the float cache (attn_block_g's contract, kern_generic.h): the scores of 8 keys
 * at a time, each in its own accumulator (8 independent FMA chains instead of one), summed by one tree. Head sizes
 * that are not a multiple of 8 take the generic loop. */
static void FN(attn_block_)(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                            float softcap, float slope, float rel0, float *scores, float *out, float *ml) {
    if (hd % 8 || hd > 512) {
        attn_block_g(q, k, v, n, hd, scale, softcap, slope, rel0, scores, out, ml);
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
        m = FN(cap_scores_)(FN(sum8x8_)(acc), scale, softcap, slope, rel0 + (float)p, scores + p, r, m);
    }
    ml[0] = m;
    ml[1] = exp_scores(scores, n, m);
    weigh_rows_g(scores, v, n, hd, out);
}

/* The GGUF types the loader keeps as stored on x86 (the rest it decodes to q8_0, which it then interleaves). Q4_1,
 * Q5_0, Q5_1 and IQ4_NL have SIMD kernels (b32_rows8_, 8 rows side by side) but stay out: a Q4_K_M file whose rows
 * are not whole super-blocks is mostly Q5_0, and the 0.5B Qwen shape's decodes, one thread, Zen 5: 44-45 tok/s as
 * stored against 47-49 as q8_0 on the AVX-512 path, 46-48 against 54-55 on AVX2 / AVX-VNNI (rows one at a time it
 * was 23). So by default they cost memory (8.5 bits a value in place of 5.5-6) to run fastest; a load that asks for
 * the stored types (gguf_stored=True) keeps them, within 5-15 % of that speed.
 * Q2_K and Q3_K (kern_x86_kq2.h) are kept: a third and 0.4x of q8_0's bytes, they decode faster once the weights
 * come from memory, as a model's do (bench/bench_gguf_decode.py, 24 [4864, 1024] matrices in turn, Zen 3 AVX2, one
 * thread, several runs: 0.70-0.86x and 0.74-0.82x q8_0's time; two threads on that 2-core machine shared with other
 * jobs 0.6-1.1x, not measurable there), though a matrix hot in the caches takes about 2.2x. IQ4_XS is kept too:
 * half q8_0's bytes at q8_0's decode speed once the weights come from memory (the same benchmark on the idle Zen 3:
 * 0.93 / 0.89x and 1.00 / 1.05x q8_0's time on one / two threads in two runs; shared, earlier: 0.79-1.12x), so
 * decoding it would double the memory a model takes for nothing. */
#define X86_GGUF_FAST ((1u << GG_Q4_K) | (1u << GG_Q5_K) | (1u << GG_Q6_K) | (1u << GG_Q2_K) | (1u << GG_Q3_K) | \
                       (1u << GG_IQ4_XS))
#define X86_GGUF_B32 ((1u << GG_Q4_1) | (1u << GG_Q5_0) | (1u << GG_Q5_1) | (1u << GG_IQ4_NL) | (1u << GG_IQ4_XS))

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
        .delta_chunk = delta_chunk_g, \
        .ssd_chunk = ssd_chunk_g, \
        .sel_steps = sel_steps_g, \
        .delta_step = delta_step_g, \
        .ssd_steps = ssd_steps_g, \
        .sel_chunk = sel_chunk_g, \
        .rows_tq2 = rows_tq2_g, \
        .bias_act = bias_act_g, \
        .glu = glu_g, \
        .mt_panel = mt_panel_g, \
    }
