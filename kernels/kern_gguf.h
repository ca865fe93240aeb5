/* Products of GGUF's other block types (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS; layouts in gguf_quants.c)
 * with the activations as every integer kernel sees them (q8 in blocks of 32 with a float scale dx and the block sum
 * of the quants, pt_act). Included by each kern_<isa>.c: the plain C copy is the reference the SIMD ones are held
 * to, bit for bit.
 *
 * The arithmetic, for one row and one token, block of 32 values b by block in order: the block's weight values are
 * integers q (the nibbles, the 5- or 6-bit values, or IQ4's table entries) with one or two float factors, and each
 * term is an exact integer sum of 32 (or 16) products with the activation quants, scaled in float:
 *     sum += (f * dx) * isum          for each scale term (f: the weight scale of those values)
 *     sum -= (m * dx) * xsum          for each min term (m: the weight min; xsum: the activations' quant sum)
 * multiplies and adds never fused. The terms of a block, in order:
 *     Q4_1, Q5_1      (d, sum q x), then + (m, sum x)      [the min adds: value = d q + m]
 *     Q5_0            (d, sum (q - 16) x)
 *     Q4_K, Q5_K, Q6_K: not block by block but a super-block at a time, against Q8_K-style activations (one
 *                     scale per 256 values): gg_kq8_super below
 *     Q3_K            (d (sc - 32), sum q x) for each half of 16 (q in -4..3)
 *     Q2_K            for each half of 16: (d sc, sum q x), then - (dmin m, sum x over the half)
 *     IQ4_NL          (d, sum v x), v = the table value of each nibble
 *     IQ4_XS          (d (ls_j - 32), sum v x)
 * The factors f are float products of the fp16 scale and the integer sub-scale, as the decoders compute them. */

/* p is rounded as it is, never fused with the add after it: GCC contracts a * b + c across statements by default
 * (-ffp-contract=fast), and on ARM64 or with FMA that would change the reference's bits */
#if defined(__GNUC__) && defined(__aarch64__)
#define GG_ROUNDED(p) __asm__("" : "+w"(p))
#elif defined(__GNUC__) && defined(__x86_64__)
#define GG_ROUNDED(p) __asm__("" : "+x"(p))
#elif defined(__GNUC__)
#define GG_ROUNDED(p) __asm__("" : "+g"(p))
#else
#define GG_ROUNDED(p) ((void)0)
#endif

static const int8_t IQ4_TABLE_G[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

enum { GG_Q4_1 = 3, GG_Q5_0 = 6, GG_Q5_1 = 7, GG_Q2_K = 10, GG_Q3_K = 11, GG_Q4_K = 12, GG_Q5_K = 13, GG_Q6_K = 14,
       GG_IQ4_NL = 20, GG_IQ4_XS = 23 };

static inline float gg_h(const uint8_t *p) { return pt_h2f(pt_load_u16(p)); }

/* a 32-value block's weight values as integers (v[32]) and its terms: up to 4 (factor, which, half, sign): which =
 * 0: a sum with v, 1: a sum with the activations alone (min terms); half = -1 the whole block, 0 / 1 its halves */
typedef struct { float f[4]; int8_t use_x[4], half[4], sign[4]; int n; } gg_terms;

static inline void gg_scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static inline void gg_add(gg_terms *t, float f, int use_x, int half, int sign) {
    t->f[t->n] = f;
    t->use_x[t->n] = (int8_t)use_x;
    t->half[t->n] = (int8_t)half;
    t->sign[t->n] = (int8_t)sign;
    t->n++;
}

/* block b (of 32 values) of a row: its values v[32] and terms */
static void gg_block(int32_t type, const uint8_t *row, int64_t b, int8_t *v, gg_terms *t) {
    t->n = 0;
    switch (type) {
    case GG_Q4_1: case GG_Q5_0: case GG_Q5_1: {
        const int q5 = type != GG_Q4_1, with_min = type != GG_Q5_0;
        const int64_t bb = q5 ? (with_min ? 24 : 22) : 20;
        const uint8_t *x = row + b * bb, *qs = x + (with_min ? 4 : 2) + (q5 ? 4 : 0);
        uint32_t qh = 0;
        if (q5) memcpy(&qh, x + (with_min ? 4 : 2), 4);
        for (int j = 0; j < 16; j++) {
            int lo = qs[j] & 0xF, hi = qs[j] >> 4;
            if (q5) {
                lo |= (int)((qh >> j) << 4) & 0x10;
                hi |= (int)(qh >> (j + 12)) & 0x10;
            }
            v[j] = (int8_t)(with_min ? lo : lo - 16);
            v[j + 16] = (int8_t)(with_min ? hi : hi - 16);
        }
        gg_add(t, gg_h(x), 0, -1, 1);
        if (with_min) gg_add(t, gg_h(x + 2), 1, -1, 1);
        return;
    }
    case GG_Q4_K: case GG_Q5_K: {
        const int q5 = type == GG_Q5_K;
        const uint8_t *x = row + b / 8 * (q5 ? 176 : 144);
        const int j = (int)(b % 8), pair = j / 2, high = j % 2;
        const uint8_t *ql = x + (q5 ? 48 : 16) + 32 * pair, *qh = x + 16;
        for (int l = 0; l < 32; l++) {
            int q = high ? ql[l] >> 4 : ql[l] & 0xF;
            if (q5) q += ((qh[l] >> j) & 1) << 4;
            v[l] = (int8_t)q;
        }
        int sc, m;
        gg_scale_min_k4(j, x + 4, &sc, &m);
        gg_add(t, gg_h(x) * (float)sc, 0, -1, 1);
        gg_add(t, gg_h(x + 2) * (float)m, 1, -1, -1);
        return;
    }
    case GG_Q6_K: {
        const uint8_t *x = row + b / 8 * 210;
        const int j = (int)(b % 8), half128 = j / 4, part = j % 4;    /* 32 values at offset 32 part of a half */
        const uint8_t *ql = x + 64 * half128, *qh = x + 128 + 32 * half128;
        const int8_t *sc = (const int8_t *)(x + 192) + 8 * half128;
        for (int l = 0; l < 32; l++) {     /* parts 0 / 1: low nibbles of ql[l] / ql[l + 32]; 2 / 3: their high */
            int q;
            switch (part) {
            case 0: q = (ql[l] & 0xF) | ((qh[l] & 3) << 4); break;
            case 1: q = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4); break;
            case 2: q = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4); break;
            default: q = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4); break;
            }
            v[l] = (int8_t)(q - 32);
        }
        const float d = gg_h(x + 208);
        gg_add(t, d * (float)sc[2 * part], 0, 0, 1);           /* values 0..15 of the part: scale l / 16 = 0 */
        gg_add(t, d * (float)sc[2 * part + 1], 0, 1, 1);
        return;
    }
    case GG_Q3_K: {
        const uint8_t *x = row + b / 8 * 110, *hm = x, *s = x + 96;
        const int j = (int)(b % 8), half128 = j / 4, shift = 2 * (j % 4), bit = j;
        const uint8_t *q = x + 32 + 32 * half128;
        for (int l = 0; l < 32; l++)
            v[l] = (int8_t)(((q[l] >> shift) & 3) - ((hm[l] >> bit) & 1 ? 0 : 4));
        const float d = gg_h(x + 108);
        for (int h = 0; h < 2; h++) {
            const int k = 2 * j + h;
            const int lo = (s[k % 8] >> (4 * (k / 8))) & 0xF, hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
            gg_add(t, d * (float)((lo | hi << 4) - 32), 0, h, 1);
        }
        return;
    }
    case GG_Q2_K: {
        const uint8_t *x = row + b / 8 * 84, *sc = x;
        const int j = (int)(b % 8), half128 = j / 4, shift = 2 * (j % 4);
        const uint8_t *q = x + 16 + 32 * half128;
        for (int l = 0; l < 32; l++) v[l] = (int8_t)((q[l] >> shift) & 3);
        const float d = gg_h(x + 80), dmin = gg_h(x + 82);
        for (int h = 0; h < 2; h++) {
            const uint8_t s = sc[2 * j + h];
            gg_add(t, d * (float)(s & 0xF), 0, h, 1);
            gg_add(t, dmin * (float)(s >> 4), 1, h, -1);
        }
        return;
    }
    case GG_IQ4_NL: {
        const uint8_t *x = row + b * 18;
        for (int l = 0; l < 16; l++) {
            v[l] = IQ4_TABLE_G[x[2 + l] & 0xF];
            v[l + 16] = IQ4_TABLE_G[x[2 + l] >> 4];
        }
        gg_add(t, gg_h(x), 0, -1, 1);
        return;
    }
    case GG_IQ4_XS: {
        const uint8_t *x = row + b / 8 * 136;
        const int j = (int)(b % 8);
        const uint8_t *qs = x + 8 + 16 * j;
        for (int l = 0; l < 16; l++) {
            v[l] = IQ4_TABLE_G[qs[l] & 0xF];
            v[l + 16] = IQ4_TABLE_G[qs[l] >> 4];
        }
        const int ls = ((x[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((pt_load_u16(x + 2) >> (2 * j)) & 3) << 4);
        gg_add(t, gg_h(x) * (float)(ls - 32), 0, -1, 1);
        return;
    }
    }
}

/* Q4_K, Q5_K and Q6_K (PT_KQ8) against activations in Q8_K's super-blocks (a->d the same for a super-block's 8
 * blocks, pt_quant_act_k), one super-block sb of one row against one token: the exact integer sums
 *     Q4_K, Q5_K  isum = sum_j sc_j (sum q x over block j),   msum = sum_j m_j (sum x over block j)
 *     Q6_K        isum = sum_k sc_k (sum (q - 32) x over half-block k)
 * and the float steps, multiplies and adds never fused:
 *     sum += (d dx) isum;   Q4_K, Q5_K: then sum -= (dmin dx) msum */
static inline float gg_kq8_super(int32_t type, const uint8_t *row, int64_t sb, const int8_t *xq, const int32_t *xs,
                                 float dx, float sum) {
    const int q6 = type == GG_Q6_K;
    const uint8_t *x = row + sb * (q6 ? 210 : type == GG_Q5_K ? 176 : 144);
    int8_t v[QK];
    gg_terms terms;
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        gg_block(type, row, sb * 8 + j, v, &terms);
        const int8_t *xb = xq + (sb * 8 + j) * QK;
        int32_t s0 = 0, s1 = 0;
        for (int l = 0; l < 16; l++) s0 += (int32_t)v[l] * xb[l];
        for (int l = 16; l < 32; l++) s1 += (int32_t)v[l] * xb[l];
        if (q6) {
            const int8_t *sc = (const int8_t *)(x + 192);
            isum += sc[2 * j] * s0 + sc[2 * j + 1] * s1;
        } else {
            int sc, m;
            gg_scale_min_k4(j, x + 4, &sc, &m);
            isum += sc * (s0 + s1);
            msum += m * xs[sb * 8 + j];
        }
    }
    float dd = gg_h(q6 ? x + 208 : x) * dx;
    GG_ROUNDED(dd);
    float p = dd * (float)isum;
    GG_ROUNDED(p);
    sum += p;
    if (!q6) {
        float dm = gg_h(x + 2) * dx;
        GG_ROUNDED(dm);
        float pm = dm * (float)msum;
        GG_ROUNDED(pm);
        sum -= pm;
    }
    return sum;
}

static void rows_kq8_g(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                       int64_t T, float *y, int64_t ldy, int accumulate) {
    const int64_t nb = a->K / QK;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int64_t sb = 0; sb < nb / 8; sb++)
                sum = gg_kq8_super(type, w + r * rb, sb, a->q + t * a->K, a->s + t * nb, a->d[t * nb + sb * 8], sum);
            y[t * ldy + r] = accumulate ? y[t * ldy + r] + sum : sum;
        }
}

/* y[t][r] = row r . token t for rows r0..r1, the reference arithmetic above */
static void rows_gguf_g(int32_t type, const uint8_t *w, int64_t rb, int64_t r0, int64_t r1, const pt_act *a,
                        int64_t T, float *y, int64_t ldy, int accumulate) {
    if (PT_KQ8(type)) {
        rows_kq8_g(type, w, rb, r0, r1, a, T, y, ldy, accumulate);
        return;
    }
    const int64_t nb = a->K / QK;
    int8_t v[QK];
    gg_terms terms;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * rb;
        for (int64_t t = 0; t < T; t++) {
            const int8_t *aq = a->q + t * a->K;
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                gg_block(type, row, b, v, &terms);
                const int8_t *x = aq + b * QK;
                const float dx = a->d[t * nb + b];
                for (int k = 0; k < terms.n; k++) {
                    const int lo = terms.half[k] == 1 ? 16 : 0, hi = terms.half[k] == 0 ? 16 : 32;
                    int32_t isum = 0;
                    for (int l = lo; l < hi; l++) isum += terms.use_x[k] ? x[l] : (int32_t)v[l] * x[l];
                    float p = (terms.f[k] * dx) * (float)isum;
                    GG_ROUNDED(p);
                    sum = terms.sign[k] > 0 ? sum + p : sum - p;
                }
            }
            y[t * ldy + r] = accumulate ? y[t * ldy + r] + sum : sum;
        }
    }
}
