/* The AVX-512 path's kernels on 512-bit vectors (included by kern_avx512.c after kern_x86.h): interleaved q8_0 /
 * q4_0 matrices (PT_Q8_0_X8 / PT_Q4_0_X8, layout in interleave.c), two groups of 8 rows at a time, one group's
 * vector in each half of a zmm register, so one vpdpbusd sums a 4-value step for 16 rows. On CPUs that run 512-bit
 * integer ops at full rate (Zen 5, Intel server cores) this doubles the multiply-adds per instruction of the 256-bit
 * kernels; a matrix's last odd group takes kern_x86.h's 256-bit kernel.
 *
 * vpdpbusd multiplies unsigned by signed bytes, and AVX-512 has no vpsignb for the sign trick, so both types make the
 * weight the unsigned operand with an offset the activation block sum takes off again:
 *   q4_0: nibbles n = w + 8 (0..15):           sum(w x) = sum(n x) - 8 sum(x)
 *   q8_0: w ^ 0x80 = w + 128 (0..255):          sum(w x) = sum((w + 128) x) - 128 sum(x)
 * (products at most 255 x 127 x 32 per block: no overflow). Each row's float steps are the scalar reference's, in
 * its order, so the same bits as every other path (the start-up check and the parity tests compare them exactly). */

#if defined(__GNUC__) || defined(__clang__)
#define NO_FUSE512(v) __asm__("" : "+v"(v))
#else
#define NO_FUSE512(v) ((void)0)
#endif
/* the loops over a block's vectors unrolled: rolled, gcc 12 copies every token's accumulator around the loop (16
 * register moves per 8 vpdpbusd; 1 thread, q8_0 [4864, 896] x 512 tokens: 435 -> 510 GOPS on Zen 5) */
#if defined(__clang__)
#define UNROLL_ALL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL_ALL _Pragma("GCC unroll 8")
#else
#define UNROLL_ALL
#endif

/* bytes p0[0..31] in the low half, p1[0..31] in the high half */
static ALWAYS_INLINE __m512i FN(pair_)(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

static ALWAYS_INLINE __m512i FN(bcast4_512_)(const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
}

/* acc + the 4-byte products of u (unsigned) with x[0..3] (signed) broadcast to every lane: the broadcast folded into
 * the instruction's memory operand ({1to16}), which gcc 12 does not do itself (a separate vpbroadcastd each) */
static ALWAYS_INLINE __m512i FN(dot_bcast_)(__m512i acc, __m512i u, const int8_t *x) {
#if defined(__GNUC__) && !defined(__clang__)
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)x));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, u, FN(bcast4_512_)(x));
#endif
}

/* the 16 rows of groups g0 (rows r..r+7) and g1 (r+8..r+15) against tokens t0..t0+n-1 (n a constant where inlined) */
static ALWAYS_INLINE void FN(x16_tile_)(const uint8_t *g0, const uint8_t *g1, const pt_act *a, int64_t t0, const int n,
                                        float *y, int64_t ldy, int64_t r, int accumulate, const int q4,
                                        const int stream) {
    const int64_t K = a->K, nb = K / QK, bb = q4 ? Q4X8_BYTES : Q8X8_BYTES;
    __m512 acc[GT];
    for (int j = 0; j < n; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *b0 = g0 + b * bb, *b1 = g1 + b * bb;
        if (stream)     /* a decode streams both groups from memory: each asked for PREFETCH_AHEAD bytes ahead */
            for (int c = 0; c < (q4 ? 3 : 5); c++) {
                _mm_prefetch((const char *)(b0 + PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
                _mm_prefetch((const char *)(b1 + PREFETCH_AHEAD + 64 * c), _MM_HINT_T0);
            }
        const __m512 dw = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b0)), _mm_loadu_si128((const __m128i *)b1), 1));
        __m512i s[GT];
        for (int j = 0; j < n; j++) s[j] = _mm512_setzero_si512();
        if (q4) {       /* vector k's low nibbles are values 4k..4k+3 of each row, its high nibbles 16+4k.. */
            const __m512i m = _mm512_set1_epi8(0x0F);
            UNROLL_ALL
            for (int k = 0; k < 4; k++) {
                const __m512i p = FN(pair_)(b0 + 16 + 32 * k, b1 + 16 + 32 * k);
                const __m512i lo = _mm512_and_si512(p, m), hi = _mm512_and_si512(_mm512_srli_epi16(p, 4), m);
                for (int j = 0; j < n; j++) {
                    const int8_t *x = a->q + (t0 + j) * K + b * QK;
                    s[j] = FN(dot_bcast_)(s[j], lo, x + 4 * k);
                    s[j] = FN(dot_bcast_)(s[j], hi, x + 16 + 4 * k);
                }
            }
        } else {
            const __m512i flip = _mm512_set1_epi8((char)0x80);
            UNROLL_ALL
            for (int k = 0; k < 8; k++) {
                const __m512i u = _mm512_xor_si512(FN(pair_)(b0 + 16 + 32 * k, b1 + 16 + 32 * k), flip);
                for (int j = 0; j < n; j++)
                    s[j] = FN(dot_bcast_)(s[j], u, a->q + (t0 + j) * K + b * QK + 4 * k);
            }
        }
        for (int j = 0; j < n; j++) {
            const int64_t tb = (t0 + j) * nb + b;
            const __m512i isum = _mm512_sub_epi32(s[j], _mm512_set1_epi32((q4 ? 8 : 128) * a->s[tb]));
            __m512 prod = _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a->d[tb])), _mm512_cvtepi32_ps(isum));
            NO_FUSE512(prod);
            acc[j] = _mm512_add_ps(acc[j], prod);
        }
    }
    for (int j = 0; j < n; j++) {
        float *out = y + (t0 + j) * ldy + r;
        _mm512_storeu_ps(out, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[j]) : acc[j]);
    }
}

/* groups of rows r0..r1 (multiples of 8) against T tokens: pairs of groups in tiles of 8 tokens and the tokens left,
 * then an odd last group by the 256-bit kernel. With AMX on (cpu.c), the pairs' whole tiles of 16 tokens go to the
 * AMX kernel (kern_amx.c) first, the same bits, and only the tokens after them come here. */
static inline void FN(rows_x16_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                                 int64_t ldy, int accumulate, const int q4) {
    const int64_t gbytes = a->K / QK * (q4 ? Q4X8_BYTES : Q8X8_BYTES);
    const int64_t amx_tokens = T >= 16 && r0 + 16 <= r1 && pt_amx_on() ? T / 16 * 16 : 0;
    if (amx_tokens) pt_amx_rows(w, r0, r1, a, amx_tokens, y, ldy, accumulate, q4);
    int64_t r = r0;
    for (; r + 16 <= r1; r += 16) {
        const uint8_t *g0 = w + r / 8 * gbytes, *g1 = g0 + gbytes;
        int64_t t = amx_tokens;
        for (; t + GT <= T; t += GT) FN(x16_tile_)(g0, g1, a, t, GT, y, ldy, r, accumulate, q4, 0);
#define X16_TAIL(n) FN(x16_tile_)(g0, g1, a, t, n, y, ldy, r, accumulate, q4, 1)
        TOKENS_LEFT(T - t, X16_TAIL)
#undef X16_TAIL
    }
    if (r < r1) FN(rows_x8_)(w, r, r1, a, T, y, ldy, accumulate, q4);
}

static void FN(rows_q8x16_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                            int64_t ldy, int accumulate) {
    FN(rows_x16_)(w, r0, r1, a, T, y, ldy, accumulate, 0);
}

static void FN(rows_q4x16_)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                            int64_t ldy, int accumulate) {
    FN(rows_x16_)(w, r0, r1, a, T, y, ldy, accumulate, 1);
}

/* ---- attention on 512-bit vectors: one query head over a block of the float cache (attn_block_g's contract) ----
 * The scores of 8 keys at a time, each key's q . k in its own accumulator of 16 lanes, halved to 8 and summed by
 * the 256-bit kernel's fixed tree (a key's score depends on its own accumulator only); the weighted sum of the value
 * rows with two accumulators per 16 columns (even and odd positions, added at the end), so 8 independent FMA chains
 * for a 64-wide head instead of 2-4 waiting on each other's latency (the 512-token prefill spent 16 % of its time in
 * attention). Every query of every step goes through the same arithmetic, so decode still equals prefill; against
 * the other paths it differs by rounding only (the start-up check's tolerance). */
static inline __m256 FN(halve512_)(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

static void FN(weigh_rows512_)(const float *w, const float *v, int64_t n, int64_t hd, float *out) {
    for (int64_t c = 0; c < hd; c += 64) {
        const int64_t nc = hd - c < 64 ? (hd - c) / 16 : 4;
        __m512 e[4], o[4];
        for (int i = 0; i < 4; i++) e[i] = o[i] = _mm512_setzero_ps();
        int64_t p = 0;
        for (; p + 2 <= n; p += 2) {
            const __m512 w0 = _mm512_set1_ps(w[p]), w1 = _mm512_set1_ps(w[p + 1]);
            const float *v0 = v + p * hd + c, *v1 = v0 + hd;
            for (int i = 0; i < nc; i++) {
                e[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(v0 + 16 * i), e[i]);
                o[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(v1 + 16 * i), o[i]);
            }
        }
        if (p < n) {
            const __m512 w0 = _mm512_set1_ps(w[p]);
            for (int i = 0; i < nc; i++) e[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(v + p * hd + c + 16 * i), e[i]);
        }
        for (int i = 0; i < nc; i++) _mm512_storeu_ps(out + c + 16 * i, _mm512_add_ps(e[i], o[i]));
    }
}

static void FN(attn_block512_)(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                               float softcap, float slope, float rel0, float *scores, float *out, float *ml) {
    if (hd % 16 || hd > 512) {
        FN(attn_block_)(q, k, v, n, hd, scale, softcap, slope, rel0, scores, out, ml);
        return;
    }
    float m = -INFINITY;
    for (int64_t p = 0; p < n; p += 8) {
        const int64_t r = n - p < 8 ? n - p : 8;
        __m512 acc[8];
        for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
        if (r == 8) {
            for (int64_t i = 0; i < hd; i += 16) {
                const __m512 qi = _mm512_loadu_ps(q + i);
                for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + (p + j) * hd + i), acc[j]);
            }
        } else {
            for (int64_t i = 0; i < hd; i += 16) {
                const __m512 qi = _mm512_loadu_ps(q + i);
                for (int j = 0; j < r; j++) acc[j] = _mm512_fmadd_ps(qi, _mm512_loadu_ps(k + (p + j) * hd + i), acc[j]);
            }
        }
        __m256 h[8];
        for (int j = 0; j < 8; j++) h[j] = FN(halve512_)(acc[j]);
        m = FN(cap_scores_)(FN(sum8x8_)(h), scale, softcap, slope, rel0 + (float)p, scores + p, r, m);
    }
    ml[0] = m;
    ml[1] = exp_scores(scores, n, m);
    FN(weigh_rows512_)(scores, v, n, hd, out);
}
