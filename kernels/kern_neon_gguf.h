/* The NEON kernels of GGUF's block types (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS), kern_gguf.h's
 * arithmetic bit for bit; included by kern_neon.c after dot16 (sdot where the compiler targets the dot-product
 * extension, widening multiplies otherwise). rows_gguf_neon at the end is the path's table entry.
 *
 * 4 rows side by side, lane i = row i (a last group of fewer rows repeats its last row in the spare lanes, which are
 * never stored), against a tile of up to 4 tokens: each 32-value block of the 4 rows is unpacked once into 32 signed
 * bytes per row (the reference's values v, in order), with its float factors (gg_block's, computed as it computes
 * them: the K-quants' and IQ4_XS's for a super-block's 8 blocks at once), then used for every token of the tile;
 * a call of more than 4 tokens (a prompt, a batch) unpacks each group of rows once into a buffer for all its tiles.
 * Per token, the integer sums of the 4 rows (whole block, or each half of 16 values) are exact, whichever way dot16
 * spreads them over lanes; one pairwise add tree puts row i's sum in lane i, and the float terms (f dx) isum are
 * added to each row's sum in the reference's order, term by term and block by block. The products are kept from
 * the compiler's contraction into fused multiply-adds (GCC contracts across statements by default, NEON intrinsics
 * too, which it writes as plain vector arithmetic; the selftest fails for every type without NG_NO_FUSE). */

#include <stdlib.h>

#define NG_INLINE static inline __attribute__((always_inline))
#define NG_NO_FUSE(v) __asm__("" : "+w"(v))      /* v is rounded as it is: never fused into the add after it */

/* how a type's terms go (kern_gguf.h): 0 (d, sum v x); 1 that, then + (m, sum x); 3 a scale term per half (+ lo,
 * + hi); 4 Q2_K's per half: + (d sc, sum v x), - (dmin m, sum x). (The PT_KQ8 types: ng_kq8_row.) */
#define NG_KIND(type) ((type) == GG_Q4_1 || (type) == GG_Q5_1 ? 1 : (type) == GG_Q3_K ? 3 : (type) == GG_Q2_K ? 4 : 0)

/* bit k of the 16 bits lo | hi << 8 as 0x10 in byte k (Q5_0 / Q5_1's fifth bits) */
static inline uint8x16_t ng_bits_0x10(uint8_t lo, uint8_t hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t set = vtstq_u8(vcombine_u8(vdup_n_u8(lo), vdup_n_u8(hi)), vld1q_u8(bit));
    return vandq_u8(set, vdupq_n_u8(0x10));
}

/* each byte of v shifted right by s (a variable shift: vshlq by -s) */
static inline uint8x16_t ng_shr(uint8x16_t v, int s) { return vshlq_u8(v, vdupq_n_s8((int8_t)-s)); }

/* block b of a row: its 32 values as gg_block gives them (v0: values 0..15, v1: 16..31) */
NG_INLINE void ng_values(const int32_t type, const uint8_t *row, int64_t b, int8x16_t *v0, int8x16_t *v1) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    switch (type) {
    case GG_Q4_1: case GG_Q5_0: case GG_Q5_1: {
        const int q5 = type != GG_Q4_1, with_min = type != GG_Q5_0;
        const uint8_t *x = row + b * (q5 ? (with_min ? 24 : 22) : 20), *qs = x + (with_min ? 4 : 2) + (q5 ? 4 : 0);
        const uint8x16_t raw = vld1q_u8(qs);
        uint8x16_t lo = vandq_u8(raw, m4), hi = vshrq_n_u8(raw, 4);
        if (q5) {
            const uint8_t *qh = x + (with_min ? 4 : 2);     /* bit j: value j's fifth bit (little-endian word) */
            lo = vorrq_u8(lo, ng_bits_0x10(qh[0], qh[1]));
            hi = vorrq_u8(hi, ng_bits_0x10(qh[2], qh[3]));
        }
        *v0 = vreinterpretq_s8_u8(lo);
        *v1 = vreinterpretq_s8_u8(hi);
        if (!with_min) {
            *v0 = vsubq_s8(*v0, vdupq_n_s8(16));
            *v1 = vsubq_s8(*v1, vdupq_n_s8(16));
        }
        return;
    }
    case GG_IQ4_NL: case GG_IQ4_XS: {
        const int8x16_t table = vld1q_s8(IQ4_TABLE_G);
        const uint8x16_t raw = vld1q_u8(type == GG_IQ4_NL ? row + b * 18 + 2 : row + b / 8 * 136 + 8 + 16 * (b % 8));
        *v0 = vqtbl1q_s8(table, vandq_u8(raw, m4));
        *v1 = vqtbl1q_s8(table, vshrq_n_u8(raw, 4));
        return;
    }
    case GG_Q4_K: case GG_Q5_K: {
        const int q5 = type == GG_Q5_K;
        const uint8_t *x = row + b / 8 * (q5 ? 176 : 144);
        const int j = (int)(b % 8);
        const uint8_t *ql = x + (q5 ? 48 : 16) + 32 * (j / 2);
        const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
        uint8x16_t a0 = j % 2 ? vshrq_n_u8(l0, 4) : vandq_u8(l0, m4);
        uint8x16_t a1 = j % 2 ? vshrq_n_u8(l1, 4) : vandq_u8(l1, m4);
        if (q5) {                                   /* bit j of qh[l]: value l's fifth bit */
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << j)), b16 = vdupq_n_u8(0x10);
            a0 = vorrq_u8(a0, vandq_u8(vtstq_u8(vld1q_u8(x + 16), bit), b16));
            a1 = vorrq_u8(a1, vandq_u8(vtstq_u8(vld1q_u8(x + 32), bit), b16));
        }
        *v0 = vreinterpretq_s8_u8(a0);
        *v1 = vreinterpretq_s8_u8(a1);
        return;
    }
    case GG_Q6_K: {
        const uint8_t *x = row + b / 8 * 210;
        const int j = (int)(b % 8), half128 = j / 4, part = j % 4;
        const uint8_t *ql = x + 64 * half128 + 32 * (part & 1), *qh = x + 128 + 32 * half128;
        const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), m2 = vdupq_n_u8(3);
        const uint8x16_t n0 = part >= 2 ? vshrq_n_u8(l0, 4) : vandq_u8(l0, m4);
        const uint8x16_t n1 = part >= 2 ? vshrq_n_u8(l1, 4) : vandq_u8(l1, m4);
        const uint8x16_t h0 = vandq_u8(ng_shr(vld1q_u8(qh), 2 * part), m2);
        const uint8x16_t h1 = vandq_u8(ng_shr(vld1q_u8(qh + 16), 2 * part), m2);
        *v0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(n0, vshlq_n_u8(h0, 4))), vdupq_n_s8(32));
        *v1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(n1, vshlq_n_u8(h1, 4))), vdupq_n_s8(32));
        return;
    }
    case GG_Q3_K: {
        const uint8_t *x = row + b / 8 * 110;
        const int j = (int)(b % 8), shift = 2 * (j % 4);
        const uint8_t *q = x + 32 + 32 * (j / 4);
        /* q = the 2 low bits, less 4 where the hmask bit j is clear: -4..3 */
        const uint8x16_t m2 = vdupq_n_u8(3), four = vdupq_n_u8(4), bit = vdupq_n_u8((uint8_t)(1u << j));
        const uint8x16_t a0 = vandq_u8(ng_shr(vld1q_u8(q), shift), m2);
        const uint8x16_t a1 = vandq_u8(ng_shr(vld1q_u8(q + 16), shift), m2);
        *v0 = vreinterpretq_s8_u8(vsubq_u8(a0, vbicq_u8(four, vtstq_u8(vld1q_u8(x), bit))));
        *v1 = vreinterpretq_s8_u8(vsubq_u8(a1, vbicq_u8(four, vtstq_u8(vld1q_u8(x + 16), bit))));
        return;
    }
    case GG_Q2_K: {
        const uint8_t *q = row + b / 8 * 84 + 16 + 32 * (b % 8 / 4);
        const int shift = 2 * (int)(b % 4);
        const uint8x16_t m2 = vdupq_n_u8(3);
        *v0 = vreinterpretq_s8_u8(vandq_u8(ng_shr(vld1q_u8(q), shift), m2));
        *v1 = vreinterpretq_s8_u8(vandq_u8(ng_shr(vld1q_u8(q + 16), shift), m2));
        return;
    }
    }
}

/* blocks per chunk: a super-block's 8 for the types that have them (their factors computed once for the 8) */
#define NG_CHUNK(type) ((type) == GG_Q4_1 || (type) == GG_Q5_0 || (type) == GG_Q5_1 || (type) == GG_IQ4_NL ? 1 : 8)

/* the factors of a row's chunk c (block c of a 32-value type, super-block c otherwise) as gg_block computes them:
 * f[4 (n k + j)] = term k of the chunk's block j (n blocks in the chunk; the 4: the rows' lanes) */
NG_INLINE void ng_factors(const int32_t type, const uint8_t *row, int64_t c, float *f) {
    switch (type) {
    case GG_Q4_1: case GG_Q5_1: {
        const uint8_t *x = row + c * (type == GG_Q4_1 ? 20 : 24);
        f[0] = gg_h(x);
        f[4] = gg_h(x + 2);
        return;
    }
    case GG_Q5_0: f[0] = gg_h(row + c * 22); return;
    case GG_IQ4_NL: f[0] = gg_h(row + c * 18); return;
    case GG_IQ4_XS: {
        const uint8_t *x = row + c * 136;
        const float d = gg_h(x);
        const int hb = pt_load_u16(x + 2);
        for (int j = 0; j < 8; j++) {
            const int ls = ((x[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((hb >> (2 * j)) & 3) << 4);
            f[4 * j] = d * (float)(ls - 32);
        }
        return;
    }
    case GG_Q3_K: {
        const uint8_t *x = row + c * 110, *s = x + 96;
        const float d = gg_h(x + 108);
        for (int j = 0; j < 8; j++)
            for (int h = 0; h < 2; h++) {
                const int k = 2 * j + h;
                const int lo = (s[k % 8] >> (4 * (k / 8))) & 0xF, hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
                f[4 * (8 * h + j)] = d * (float)((lo | hi << 4) - 32);
            }
        return;
    }
    case GG_Q2_K: {         /* terms: + scale, - min of the first half, then of the second */
        const uint8_t *x = row + c * 84;
        const float d = gg_h(x + 80), dmin = gg_h(x + 82);
        for (int j = 0; j < 8; j++)
            for (int h = 0; h < 2; h++) {
                const uint8_t sm = x[2 * j + h];
                f[4 * (8 * 2 * h + j)] = d * (float)(sm & 0xF);
                f[4 * (8 * (2 * h + 1) + j)] = dmin * (float)(sm >> 4);
            }
        return;
    }
    }
}

/* lane i = the total of p[i]'s 4 lanes */
static inline int32x4_t ng_sum4(const int32x4_t *p) {
    return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

/* acc (lane i = row i's sum) + or - the term (f dx) isum, rounded as the reference rounds it */
NG_INLINE float32x4_t ng_term(float32x4_t acc, float32x4_t f, float dx, int32x4_t isum, const int sub) {
    float32x4_t p = vmulq_f32(vmulq_n_f32(f, dx), vcvtq_f32_s32(isum));
    NG_NO_FUSE(p);
    return sub ? vsubq_f32(acc, p) : vaddq_f32(acc, p);
}

/* one block of 4 rows (values v, term k's factors fk) against tokens t0..t0+nt-1: acc[j] (lane i = row i's sum for
 * token t0 + j) takes the block's terms in the reference's order */
NG_INLINE void ng_block(const int kind, int8x16_t v[4][2], float32x4_t f0, float32x4_t f1, float32x4_t f2,
                        float32x4_t f3, int64_t b, const pt_act *a, int64_t t0, const int nt, float32x4_t *acc) {
    const int64_t K = a->K, nb = K / QK;
    for (int j = 0; j < nt; j++) {
        const int64_t tb = (t0 + j) * nb + b;
        const int8_t *xq = a->q + (t0 + j) * K + b * QK;
        const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
        const float dx = a->d[tb];
        if (kind >= 3) {                            /* a term per half */
            int32x4_t lo[4], hi[4];
            for (int i = 0; i < 4; i++) {
                lo[i] = dot16(vdupq_n_s32(0), v[i][0], x0);
                hi[i] = dot16(vdupq_n_s32(0), v[i][1], x1);
            }
            const int32x4_t ilo = ng_sum4(lo), ihi = ng_sum4(hi);
            if (kind == 3) {
                acc[j] = ng_term(acc[j], f0, dx, ilo, 0);
                acc[j] = ng_term(acc[j], f1, dx, ihi, 0);
            } else {                                /* Q2_K: the activations' sum over each half */
                const int32x4_t xlo = vdupq_n_s32((int32_t)vaddlvq_s8(x0));
                const int32x4_t xhi = vdupq_n_s32((int32_t)vaddlvq_s8(x1));
                acc[j] = ng_term(acc[j], f0, dx, ilo, 0);
                acc[j] = ng_term(acc[j], f1, dx, xlo, 1);
                acc[j] = ng_term(acc[j], f2, dx, ihi, 0);
                acc[j] = ng_term(acc[j], f3, dx, xhi, 1);
            }
        } else {
            int32x4_t p[4];
            for (int i = 0; i < 4; i++) p[i] = dot16(dot16(vdupq_n_s32(0), v[i][0], x0), v[i][1], x1);
            acc[j] = ng_term(acc[j], f0, dx, ng_sum4(p), 0);
            if (kind) acc[j] = ng_term(acc[j], f1, dx, vdupq_n_s32(a->s[tb]), kind == 2);
        }
    }
}

/* the 4 rows' sums of nt tokens stored (only the nr rows that are real) */
NG_INLINE void ng_store(const float32x4_t *acc, int nr, int64_t r, int64_t t0, const int nt, float *y, int64_t ldy,
                        int accumulate) {
    for (int j = 0; j < nt; j++) {
        float *out = y + (t0 + j) * ldy + r;
        if (nr == 4) {
            vst1q_f32(out, accumulate ? vaddq_f32(vld1q_f32(out), acc[j]) : acc[j]);
        } else {
            float s[4];
            vst1q_f32(s, acc[j]);
            for (int i = 0; i < nr; i++) store_y(out + i, s[i], accumulate);
        }
    }
}

/* the 4 rows' pointers: a group of nr < 4 rows repeats its last row */
static inline void ng_row_ptrs(const uint8_t *w, int64_t rb, int64_t r, int nr, const uint8_t **rows) {
    for (int i = 0; i < 4; i++) rows[i] = w + (r + (i < nr ? i : nr - 1)) * rb;
}

/* rows r..r+nr-1 (nr <= 4) against tokens t0..t0+nt-1 (nt <= 4), each block unpacked as it comes (decode: a
 * token or a few); type and nt constants where inlined */
NG_INLINE void ng_rows4(const int32_t type, const uint8_t *w, int64_t rb, int64_t r, int nr, const pt_act *a,
                        int64_t t0, const int nt, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    const int kind = NG_KIND(type), n = NG_CHUNK(type);
    const uint8_t *rows[4];
    ng_row_ptrs(w, rb, r, nr, rows);
    float32x4_t acc[4];
    for (int j = 0; j < nt; j++) acc[j] = vdupq_n_f32(0.0f);
    for (int64_t c = 0; c < nb / n; c++) {
        float f[4 * 8 * 4];                         /* f[4 (n k + jb) + i]: term k of the chunk's block jb, row i */
        for (int i = 0; i < 4; i++) ng_factors(type, rows[i], c, f + i);
        for (int jb = 0; jb < n; jb++) {
            const int64_t b = c * n + jb;
            int8x16_t v[4][2];
            for (int i = 0; i < 4; i++) ng_values(type, rows[i], b, &v[i][0], &v[i][1]);
            const float *fb = f + 4 * jb;           /* term k's 4 rows: fb + 4 n k (only the type's terms are set) */
            const float32x4_t f0 = vld1q_f32(fb);
            const float32x4_t f1 = kind ? vld1q_f32(fb + 4 * n) : f0;
            const float32x4_t f2 = kind == 4 ? vld1q_f32(fb + 8 * n) : f0;
            const float32x4_t f3 = kind == 4 ? vld1q_f32(fb + 12 * n) : f0;
            ng_block(kind, v, f0, f1, f2, f3, b, a, t0, nt, acc);
        }
    }
    ng_store(acc, nr, r, t0, nt, y, ldy, accumulate);
}

/* a block of 4 rows unpacked: values, then the factor vectors of its terms */
typedef struct { int8x16_t v[4][2]; float32x4_t f[4]; } ng_blk;

/* the same against tokens t0..t0+nt-1 from blocks unpacked once for every tile of the call (a prompt) */
NG_INLINE void ng_rows4_buf(const int32_t type, const ng_blk *buf, int64_t r, int nr, const pt_act *a, int64_t t0,
                            const int nt, float *y, int64_t ldy, int accumulate) {
    const int kind = NG_KIND(type);
    float32x4_t acc[4];
    for (int j = 0; j < nt; j++) acc[j] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < a->K / QK; b++) {
        int8x16_t v[4][2];
        for (int i = 0; i < 4; i++) {
            v[i][0] = buf[b].v[i][0];
            v[i][1] = buf[b].v[i][1];
        }
        ng_block(kind, v, buf[b].f[0], buf[b].f[1], buf[b].f[2], buf[b].f[3], b, a, t0, nt, acc);
    }
    ng_store(acc, nr, r, t0, nt, y, ldy, accumulate);
}

/* rows r..r+nr-1 unpacked into buf (nb blocks) */
NG_INLINE void ng_unpack4(const int32_t type, const uint8_t *w, int64_t rb, int64_t r, int nr, int64_t nb,
                          ng_blk *buf) {
    const int kind = NG_KIND(type), n = NG_CHUNK(type), nterms = kind == 4 ? 4 : kind ? 2 : 1;
    const uint8_t *rows[4];
    ng_row_ptrs(w, rb, r, nr, rows);
    for (int64_t c = 0; c < nb / n; c++) {
        float f[4 * 8 * 4];
        for (int i = 0; i < 4; i++) ng_factors(type, rows[i], c, f + i);
        for (int jb = 0; jb < n; jb++) {
            ng_blk *blk = buf + c * n + jb;
            for (int i = 0; i < 4; i++) ng_values(type, rows[i], c * n + jb, &blk->v[i][0], &blk->v[i][1]);
            for (int k = 0; k < 4; k++) blk->f[k] = vld1q_f32(f + 4 * (n * (k < nterms ? k : 0) + jb));
        }
    }
}

/* every group of 4 rows in r0..r1 against T tokens, 4 at a time (the last tile: the tokens left); with more than one
 * tile, each group unpacked once into a buffer (when it can be had) for all of them */
NG_INLINE void ng_rows(const int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                       int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    ng_blk *buf = T > 4 ? (ng_blk *)malloc((size_t)nb * sizeof(ng_blk)) : NULL;
    for (int64_t r = r0; r < r1; r += 4) {
        const int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
        if (buf) ng_unpack4(type, w, rb, r, nr, nb, buf);
        for (int64_t t = 0; t < T; t += 4) {
#define NG_TILE(nt) (buf ? ng_rows4_buf(type, buf, r, nr, a, t, nt, y, ldy, accumulate) \
                         : ng_rows4(type, w, rb, r, nr, a, t, nt, y, ldy, accumulate))
            switch (T - t < 4 ? T - t : 4) {
            case 1: NG_TILE(1); break;
            case 2: NG_TILE(2); break;
            case 3: NG_TILE(3); break;
            default: NG_TILE(4); break;
            }
#undef NG_TILE
        }
    }
    free(buf);
}

/* one copy per type, the type a constant in each */
#define NG_TYPE(TY) \
    static void ng_rows_##TY(const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a, int64_t T, \
                             float *y, int64_t ldy, int accumulate) { \
        ng_rows(GG_##TY, w, rb, r0, r1, a, T, y, ldy, accumulate); \
    }
NG_TYPE(Q4_1)
NG_TYPE(Q5_0)
NG_TYPE(Q5_1)
NG_TYPE(Q2_K)
NG_TYPE(Q3_K)
NG_TYPE(IQ4_NL)
NG_TYPE(IQ4_XS)
#undef NG_TYPE

/* PT_KQ8 (Q4_K, Q5_K, Q6_K; kern_gguf.h's gg_kq8_super, the same bits): one row at a time, a super-block's 8 blocks
 * unpacked once for up to NG_KQ8_T tokens (a prompt's tokens share the unpacking; each token's sum still takes the
 * super-blocks in order); each half-block's integer sum times its sub-scale in lanes (vmlaq_n_s32), one
 * add across the lanes per super-block; the mins' sum from the activations' block sums; then the float steps */
#define NG_KQ8_T 64
NG_INLINE void ng_kq8_row(const int32_t type, const uint8_t *row, const pt_act *a, int64_t t0, const int nt,
                          float *out) {
    const int64_t K = a->K, nb = K / QK;
    const int q6 = type == GG_Q6_K;
    float sum[NG_KQ8_T];
    for (int j = 0; j < nt; j++) sum[j] = 0.0f;
    for (int64_t sb = 0; sb < nb / 8; sb++) {
        int8x16_t v[8][2];
        for (int j = 0; j < 8; j++) ng_values(type, row, sb * 8 + j, &v[j][0], &v[j][1]);
        const uint8_t *x = row + sb * (q6 ? 210 : type == GG_Q5_K ? 176 : 144);
        int32_t sc[16], mn[8] = {0};
        float d, dmin = 0.0f;
        if (q6) {
            for (int k = 0; k < 16; k++) sc[k] = ((const int8_t *)(x + 192))[k];
            d = gg_h(x + 208);
        } else {
            for (int j = 0; j < 8; j++) {
                int s, m;
                gg_scale_min_k4(j, x + 4, &s, &m);
                sc[2 * j] = sc[2 * j + 1] = s;
                mn[j] = m;
            }
            d = gg_h(x);
            dmin = gg_h(x + 2);
        }
        for (int tj = 0; tj < nt; tj++) {
            const int64_t t = t0 + tj;
            const int8_t *xq = a->q + t * K + sb * 256;
            int32x4_t acc = vdupq_n_s32(0);
            for (int j = 0; j < 8; j++) {
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), v[j][0], vld1q_s8(xq + 32 * j)), sc[2 * j]);
                acc = vmlaq_n_s32(acc, dot16(vdupq_n_s32(0), v[j][1], vld1q_s8(xq + 32 * j + 16)), sc[2 * j + 1]);
            }
            const int32_t isum = vaddvq_s32(acc);
            const float dx = a->d[t * nb + sb * 8];
            float dd = d * dx;
            GG_ROUNDED(dd);
            float p = dd * (float)isum;
            GG_ROUNDED(p);
            sum[tj] += p;
            if (!q6) {
                int32_t msum = 0;
                for (int j = 0; j < 8; j++) msum += mn[j] * a->s[t * nb + sb * 8 + j];
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

#define NG_KQ8(TY) \
    static void ng_kq8_rows_##TY(const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a, int64_t T, \
                                 float *y, int64_t ldy, int accumulate) { \
        for (int64_t r = r0; r < r1; r++) \
            for (int64_t t = 0; t < T; t += NG_KQ8_T) { \
                float o[NG_KQ8_T]; \
                const int64_t nt = T - t < NG_KQ8_T ? T - t : NG_KQ8_T; \
                if (nt == 1) ng_kq8_row(GG_##TY, w + r * rb, a, t, 1, o); \
                else ng_kq8_row(GG_##TY, w + r * rb, a, t, (int)nt, o); \
                for (int j = 0; j < nt; j++) { \
                    store_y(y + (t + j) * ldy + r, o[j], accumulate); \
                } \
            } \
    }
NG_KQ8(Q4_K)
NG_KQ8(Q5_K)
NG_KQ8(Q6_K)
#undef NG_KQ8

#define NEON_GGUF_SIMD ((1u << GG_Q4_1) | (1u << GG_Q5_0) | (1u << GG_Q5_1) | (1u << GG_Q2_K) | (1u << GG_Q3_K) | \
                        (1u << GG_Q4_K) | (1u << GG_Q5_K) | (1u << GG_Q6_K) | (1u << GG_IQ4_NL) | (1u << GG_IQ4_XS))

static void rows_gguf_neon(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                           int64_t T, float *y, int64_t ldy, int accumulate) {
    switch (type) {
    case GG_Q4_1: ng_rows_Q4_1(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q5_0: ng_rows_Q5_0(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q5_1: ng_rows_Q5_1(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q2_K: ng_rows_Q2_K(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q3_K: ng_rows_Q3_K(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q4_K: ng_kq8_rows_Q4_K(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q5_K: ng_kq8_rows_Q5_K(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_Q6_K: ng_kq8_rows_Q6_K(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_IQ4_NL: ng_rows_IQ4_NL(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    case GG_IQ4_XS: ng_rows_IQ4_XS(w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    default: rows_gguf_g(type, w, rb, r0, r1, a, T, y, ldy, accumulate); break;
    }
}
