/* The chunked forms of the recurrent mixers' scans, one chunk of at most PT_SCAN_CHUNK tokens of one head, as small
 * matrix products (included by kern_generic.h, so every ISA compiles its own copy; the scalar path's is the
 * reference the others are checked against in pathcheck.c), and their recurrent forms, a token at a time, for
 * decode and short prompts, per path too (kernels/deltanet.c, ssd.c, ssm.c and selscan.c choose per call).
 *
 * Gated delta rule (Qwen3-Next's linear attention), per token t of a head: S <- e^{g_t} S, then
 * S <- S + k_t (beta_t (v_t - S^T k_t))^T, o_t = S^T q_t (S [dk][dv]). Over a chunk, with G_t = g_0 + ... + g_t and S0
 * the state before it, the corrections u_t = beta_t (v_t - (e^{g_t} S_{t-1})^T k_t) solve the unit lower-triangular
 * system (I + A) U = diag(beta) V - diag(beta e^G) K S0, A[t][s] = beta_t e^{G_t - G_s} k_t . k_s (s < t). So
 * U = W - Kc S0 with [W | Kc] = (I + A)^{-1} [diag(beta) V | diag(beta e^G) K] (forward substitution), and
 *   o_t = e^{G_t} S0^T q_t + sum_{s <= t} e^{G_t - G_s} (q_t . k_s) u_s,
 *   S  = e^{G_last} S0 + sum_s e^{G_last - G_s} k_s u_s^T.
 * Every exponent is G_t - G_s with s <= t, or G_t: at most 0 for a decay (g <= 0), so nothing overflows. This is
 * the WY / chunked form of transformers' torch_chunk_gated_delta_rule (chunks of 64), derived here from the
 * recurrence; it solves the triangular system on the rows instead of inverting I + A. */

#define SCAN_MR 4               /* rows x columns of a register tile of the products below */
#define SCAN_NR 16
#define SCAN_SOLVE 16           /* rows of a block of the forward substitution */

/* C[M][N] (+= or -= with sub) A[M][K] B[K][N], row-major with leading dimensions. tri: A is zero above its diagonal
 * (row m reads k <= m only; K = M), so a row tile stops at its last row's diagonal. Each C value sums its K products
 * in k order in one accumulator, then adds to C: the same bits whatever the buffers' alignment. */
static void scan_gemm_g(float *C, int64_t ldc, const float *A, int64_t lda, const float *B, int64_t ldb, int64_t M,
                        int64_t N, int64_t K, int sub, int tri) {
    const float sign = sub ? -1.0f : 1.0f;
    for (int64_t m0 = 0; m0 < M; m0 += SCAN_MR) {
        const int64_t mr = M - m0 < SCAN_MR ? M - m0 : SCAN_MR;
        const int64_t kend = tri && m0 + mr < K ? m0 + mr : K;
        int64_t n0 = 0;
        if (mr == SCAN_MR)
            for (; n0 + SCAN_NR <= N; n0 += SCAN_NR) {
                float acc[SCAN_MR][SCAN_NR];
                for (int r = 0; r < SCAN_MR; r++)
                    for (int c = 0; c < SCAN_NR; c++) acc[r][c] = 0.0f;
                for (int64_t k = 0; k < kend; k++) {
                    const float *b = B + k * ldb + n0;
                    for (int r = 0; r < SCAN_MR; r++) {
                        const float a = A[(m0 + r) * lda + k];
#pragma omp simd
                        for (int c = 0; c < SCAN_NR; c++) acc[r][c] += a * b[c];
                    }
                }
                for (int r = 0; r < SCAN_MR; r++) {
                    float *y = C + (m0 + r) * ldc + n0;
#pragma omp simd
                    for (int c = 0; c < SCAN_NR; c++) y[c] += sign * acc[r][c];
                }
            }
        /* the columns past the last whole tile (all of them for a short row tile), a row at a time */
        for (int64_t r = 0; r < mr; r++) {
            const int64_t c0 = mr == SCAN_MR ? n0 : 0;
            if (c0 >= N) break;
            float acc[SCAN_NR];
            for (int64_t cb = c0; cb < N; cb += SCAN_NR) {
                const int64_t nc = N - cb < SCAN_NR ? N - cb : SCAN_NR;
                for (int64_t c = 0; c < nc; c++) acc[c] = 0.0f;
                for (int64_t k = 0; k < kend; k++) {
                    const float a = A[(m0 + r) * lda + k], *b = B + k * ldb + cb;
                    for (int64_t c = 0; c < nc; c++) acc[c] += a * b[c];
                }
                float *y = C + (m0 + r) * ldc + cb;
                for (int64_t c = 0; c < nc; c++) y[c] += sign * acc[c];
            }
        }
    }
}

/* one chunk of n <= PT_SCAN_CHUNK tokens of one head of the gated delta rule (above): q, k [n] rows of dk at stride
 * ldqk (q already l2-normed and scaled, k l2-normed), v [n] rows of dv at stride ldv, g [n] the log decays, beta [n];
 * S [dk][dv] updated in place; o [n] rows of dv at stride ldo written; work: PT_SCAN_DELTA_WORK(dk, dv) floats (internal.h) */
static void delta_chunk_g(float *S, const float *q, const float *k, int64_t ldqk, const float *v, int64_t ldv,
                          const float *g, const float *beta, int64_t n, int64_t dk, int64_t dv, float *o, int64_t ldo,
                          float *work) {
    const int64_t w = dv + dk;
    float *G = work, *eG = G + PT_SCAN_CHUNK, *KT = eG + PT_SCAN_CHUNK, *Qg = KT + dk * PT_SCAN_CHUNK;
    float *X = Qg + dk * PT_SCAN_CHUNK, *Am = X + w * PT_SCAN_CHUNK, *Mq = Am + PT_SCAN_CHUNK * PT_SCAN_CHUNK;
    float acc = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        acc += g[t];
        G[t] = acc;
        eG[t] = exp_g(acc);
    }
    for (int64_t t = 0; t < n; t++)                          /* K^T [dk][n], and q_t e^{G_t} */
        for (int64_t i = 0; i < dk; i++) {
            KT[i * n + t] = k[t * ldqk + i];
            Qg[t * dk + i] = q[t * ldqk + i] * eG[t];
        }
    for (int64_t i = 0; i < n * n; i++) Am[i] = Mq[i] = 0.0f;
    scan_gemm_g(Am, n, k, ldqk, KT, n, n, n, dk, 0, 0);     /* k_t . k_s */
    scan_gemm_g(Mq, n, q, ldqk, KT, n, n, n, dk, 0, 0);     /* q_t . k_s */
    for (int64_t t = 0; t < n; t++) {
        float *a = Am + t * n, *mq = Mq + t * n;
#pragma omp simd
        for (int64_t s = 0; s <= t; s++) {
            const float d = exp_g(G[t] - G[s]);
            a[s] *= beta[t] * d;
            mq[s] *= d;
        }
        for (int64_t s = t; s < n; s++) a[s] = 0.0f;         /* A strictly below the diagonal, Mq on and below */
        for (int64_t s = t + 1; s < n; s++) mq[s] = 0.0f;
    }
    for (int64_t t = 0; t < n; t++) {                         /* the right-hand sides [beta v | beta e^G k] */
        float *x = X + t * w;
        const float b = beta[t], be = beta[t] * eG[t];
        for (int64_t c = 0; c < dv; c++) x[c] = b * v[t * ldv + c];
        for (int64_t i = 0; i < dk; i++) x[dv + i] = be * k[t * ldqk + i];
    }
    /* (I + A) X = R by forward substitution, in blocks: the rows before a block as one product, then within it */
    for (int64_t b0 = 0; b0 < n; b0 += SCAN_SOLVE) {
        const int64_t bn = n - b0 < SCAN_SOLVE ? n - b0 : SCAN_SOLVE;
        scan_gemm_g(X + b0 * w, w, Am + b0 * n, n, X, w, bn, w, b0, 1, 0);
        for (int64_t t = b0 + 1; t < b0 + bn; t++) {
            float *x = X + t * w;
            for (int64_t s = b0; s < t; s++) {
                const float a = Am[t * n + s], *xs = X + s * w;
#pragma omp simd
                for (int64_t c = 0; c < w; c++) x[c] -= a * xs[c];
            }
        }
    }
    scan_gemm_g(X, w, X + dv, w, S, dv, n, dv, dk, 1, 0);   /* U = W - Kc S0, in W's place */
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < dv; c++) o[t * ldo + c] = 0.0f;
    scan_gemm_g(o, ldo, Qg, dk, S, dv, n, dv, dk, 0, 0);    /* e^{G_t} S0^T q_t */
    scan_gemm_g(o, ldo, Mq, n, X, w, n, dv, n, 0, 1);       /* + the chunk's own tokens */
    const float last = G[n - 1], eL = eG[n - 1];
    for (int64_t i = 0; i < dk * dv; i++) S[i] *= eL;
    for (int64_t s = 0; s < n; s++) {
        const float d = exp_g(last - G[s]);
        for (int64_t i = 0; i < dk; i++) KT[i * n + s] *= d;
    }
    scan_gemm_g(S, dv, KT, n, X, w, dk, dv, n, 0, 0);       /* S = e^{G_last} S0 + sum_s e^{G_last - G_s} k_s u_s^T */
}

/* the delta rule's recurrent form, one token of one head: S <- decay S, S <- S + k (beta (v - S^T k))^T, o = S^T q
 * (kv: dv floats of room). Every sum runs over i in order, vectorised over the dv columns: the same bits whatever T. */
static void delta_step_g(float *S, const float *q, const float *k, const float *v, float beta, float decay, float *o,
                         int64_t dk, int64_t dv, float *kv) {
    for (int64_t c = 0; c < dv; c++) kv[c] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        float *s = S + i * dv;
        const float ki = k[i];
#pragma omp simd
        for (int64_t c = 0; c < dv; c++) {
            s[c] *= decay;
            kv[c] += s[c] * ki;
        }
    }
#pragma omp simd
    for (int64_t c = 0; c < dv; c++) kv[c] = (v[c] - kv[c]) * beta;       /* the correction, in kv's place */
    for (int64_t c = 0; c < dv; c++) o[c] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        float *s = S + i * dv;
        const float ki = k[i], qi = q[i];
#pragma omp simd
        for (int64_t c = 0; c < dv; c++) {
            s[c] += ki * kv[c];
            o[c] += s[c] * qi;
        }
    }
}

/* Mamba-2's SSD recurrent form, T tokens of one head a token at a time: S <- e^{dt A} S + dt x B^T, y = S C (without
 * D x; S [P][N]; x at [t * ldx + p], B and C at [t * ldbc + i], dt at [t * lddt], y at [t * ldy + p]). Each y sums
 * over the states in 8 partial sums in a fixed order, so a token gets the same bits alone or within a prompt. */
static void ssd_steps_g(float *S, const float *x, int64_t ldx, const float *B, const float *C, int64_t ldbc,
                        const float *dt, int64_t lddt, float A, int64_t T, int64_t P, int64_t N, float *y,
                        int64_t ldy) {
    for (int64_t t = 0; t < T; t++) {
        const float dtv = dt[t * lddt], a = exp_g(dtv * A), *b = B + t * ldbc, *c = C + t * ldbc;
        for (int64_t p = 0; p < P; p++) {
            float *s = S + p * N, part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, acc = 0.0f;
            const float dx = dtv * x[t * ldx + p];
            int64_t i = 0;
            for (; i + 8 <= N; i += 8) {
#pragma omp simd
                for (int l = 0; l < 8; l++) {
                    s[i + l] = a * s[i + l] + dx * b[i + l];
                    part[l] += s[i + l] * c[i + l];
                }
            }
            for (int l = 0; l < 8; l++) acc += part[l];
            for (; i < N; i++) {
                s[i] = a * s[i] + dx * b[i];
                acc += s[i] * c[i];
            }
            y[t * ldy + p] = acc;
        }
    }
}

/* Mamba-2's SSD, one chunk of n <= PT_SCAN_CHUNK tokens of one head: per token S <- e^{dt_t A} S + dt_t x_t B_t^T
 * (S [P][N]), y_t = S C_t. With L_t = A (dt_0 + ... + dt_t) over the chunk and S0 the state before it,
 *   y_t = e^{L_t} S0 C_t + sum_{s <= t} e^{L_t - L_s} (C_t . B_s) dt_s x_s,
 *   S   = e^{L_last} S0 + sum_s e^{L_last - L_s} dt_s x_s B_s^T
 * (A <= 0: every exponent is at most 0). x [n] rows of P at stride ldx, B and C [n] rows of N at stride ldbc, dt [n];
 * S updated in place; y [n] rows of P at stride ldy written (without D x); work: PT_SCAN_SSD_WORK(P, N) floats */
static void ssd_chunk_g(float *S, const float *x, int64_t ldx, const float *B, const float *C, int64_t ldbc,
                        const float *dt, float A, int64_t n, int64_t P, int64_t N, float *y, int64_t ldy,
                        float *work) {
    float *L = work, *eL = L + PT_SCAN_CHUNK, *ST = eL + PT_SCAN_CHUNK, *Cg = ST + N * P;
    float *BT = Cg + PT_SCAN_CHUNK * N, *Bd = BT + N * PT_SCAN_CHUNK, *Xd = Bd + PT_SCAN_CHUNK * N;
    float *XdT = Xd + PT_SCAN_CHUNK * P, *M = XdT + P * PT_SCAN_CHUNK;
    float acc = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        acc += dt[t] * A;
        L[t] = acc;
        eL[t] = exp_g(acc);
    }
    const float last = L[n - 1];
    for (int64_t p = 0; p < P; p++)
        for (int64_t i = 0; i < N; i++) ST[i * P + p] = S[p * N + i];
    for (int64_t t = 0; t < n; t++) {
        const float d = exp_g(last - L[t]);
        for (int64_t i = 0; i < N; i++) {
            Cg[t * N + i] = C[t * ldbc + i] * eL[t];
            BT[i * n + t] = B[t * ldbc + i];
            Bd[t * N + i] = B[t * ldbc + i] * d;
        }
        for (int64_t p = 0; p < P; p++) {
            Xd[t * P + p] = dt[t] * x[t * ldx + p];
            XdT[p * n + t] = Xd[t * P + p];
        }
    }
    for (int64_t i = 0; i < n * n; i++) M[i] = 0.0f;
    scan_gemm_g(M, n, C, ldbc, BT, n, n, n, N, 0, 0);       /* C_t . B_s */
    for (int64_t t = 0; t < n; t++) {
        float *mt = M + t * n;
#pragma omp simd
        for (int64_t s = 0; s <= t; s++) mt[s] *= exp_g(L[t] - L[s]);
        for (int64_t s = t + 1; s < n; s++) mt[s] = 0.0f;
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t p = 0; p < P; p++) y[t * ldy + p] = 0.0f;
    scan_gemm_g(y, ldy, Cg, N, ST, P, n, P, N, 0, 0);       /* e^{L_t} S0 C_t */
    scan_gemm_g(y, ldy, M, n, Xd, P, n, P, n, 0, 1);        /* + the chunk's own tokens */
    const float eLast = eL[n - 1];
    for (int64_t i = 0; i < P * N; i++) S[i] *= eLast;
    scan_gemm_g(S, N, XdT, n, Bd, N, P, N, n, 0, 0);        /* + sum_s e^{L_last - L_s} dt_s x_s B_s^T */
}

/* Mamba-1's selective scan (mamba, falcon_mamba, jamba) over a block of nd <= PT_SEL_BLOCK channels: per channel d
 * and state i, s[d][i] <- e^{dt_d A[d][i]} s[d][i] + dt_d u_d B_i, y_d = sum_i s[d][i] C_i + D_d u_d, times silu(z_d)
 * when z is given. Its decay differs per channel and state, so a chunk is no matrix product: the cost is the exp per
 * (token, channel, state), and the chunked form's gain is computing those exps for a whole chunk in one vectorised
 * pass (exp_g) before the recurrence, which then runs with the channels in the vector lanes.
 *
 * The arguments of both forms: S the block's state rows [nd][ds] (the state's layout), A [nd][ds], Dp [nd]; dt and u
 * at [t * ld + d] (dt after softplus), z at [t * ldz + d] (NULL: no gate); B and C at [t * ldbc + i]; y at
 * [t * ldy + d]. */

/* the recurrence a token at a time, for decode and short prompts: the states in the vector lanes, y summed over them
 * in 8 partial sums in a fixed order, so a token gets the same bits alone (decode) or within a prompt */
static void sel_steps_g(float *S, const float *A, const float *Dp, const float *dt, const float *u, int64_t ld,
                        const float *z, int64_t ldz, const float *B, const float *C, int64_t ldbc, int64_t T,
                        int64_t nd, int64_t ds, float *y, int64_t ldy) {
    for (int64_t d = 0; d < nd; d++) {
        float *s = S + d * ds;
        const float *a = A + d * ds;
        for (int64_t t = 0; t < T; t++) {
            const float dtv = dt[t * ld + d], uv = u[t * ld + d], dtu = dtv * uv;
            const float *b = B + t * ldbc, *c = C + t * ldbc;
            float part[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, acc = 0.0f;
            int64_t i = 0;
            for (; i + 8 <= ds; i += 8) {
#pragma omp simd
                for (int l = 0; l < 8; l++) {
                    s[i + l] = exp_g(dtv * a[i + l]) * s[i + l] + dtu * b[i + l];
                    part[l] += s[i + l] * c[i + l];
                }
            }
            for (int l = 0; l < 8; l++) acc += part[l];
            for (; i < ds; i++) {
                s[i] = exp_g(dtv * a[i]) * s[i] + dtu * b[i];
                acc += s[i] * c[i];
            }
            acc += Dp[d] * uv;
            y[t * ldy + d] = z ? acc * silu_g(z[t * ldz + d]) : acc;
        }
    }
}

/* one chunk of n <= PT_SEL_CHUNK tokens: the state and A turned to [ds][PT_SEL_BLOCK] (channels in the lanes, the
 * lanes past nd zero: their decay is 1 and their state stays 0), then every e^{dt A} of the chunk in one pass, then
 * the recurrence, each channel's y summed over the states in order. work: PT_SCAN_SEL_WORK(ds) floats (internal.h) */
static void sel_chunk_g(float *S, const float *A, const float *Dp, const float *dt, const float *u, int64_t ld,
                        const float *z, int64_t ldz, const float *B, const float *C, int64_t ldbc, int64_t n,
                        int64_t nd, int64_t ds, float *y, int64_t ldy, float *work) {
    enum { W = PT_SEL_BLOCK };
    float *At = work, *St = At + ds * W, *dtu = St + ds * W, *dA = dtu + PT_SEL_CHUNK * W;
    for (int64_t i = 0; i < ds; i++)
        for (int d = 0; d < W; d++) {
            At[i * W + d] = d < nd ? A[d * ds + i] : 0.0f;
            St[i * W + d] = d < nd ? S[d * ds + i] : 0.0f;
        }
    for (int64_t t = 0; t < n; t++) {                   /* the chunk's decays and dt u, all at once */
        float dtv[W], *du = dtu + t * W;
        for (int d = 0; d < W; d++) {
            dtv[d] = d < nd ? dt[t * ld + d] : 0.0f;
            du[d] = d < nd ? dtv[d] * u[t * ld + d] : 0.0f;
        }
        for (int64_t i = 0; i < ds; i++) {
            float *e = dA + (t * ds + i) * W;
            const float *a = At + i * W;
#pragma omp simd
            for (int d = 0; d < W; d++) e[d] = exp_g(dtv[d] * a[d]);
        }
    }
    for (int64_t t = 0; t < n; t++) {                   /* the recurrence, the block's channels side by side */
        const float *b = B + t * ldbc, *c = C + t * ldbc, *du = dtu + t * W;
        float acc[W], out[W];
        for (int d = 0; d < W; d++) acc[d] = 0.0f;
        for (int64_t i = 0; i < ds; i++) {
            const float bi = b[i], ci = c[i], *e = dA + (t * ds + i) * W;
            float *s = St + i * W;
#pragma omp simd
            for (int d = 0; d < W; d++) {
                s[d] = e[d] * s[d] + du[d] * bi;
                acc[d] += s[d] * ci;
            }
        }
        for (int64_t d = 0; d < nd; d++) out[d] = acc[d] + Dp[d] * u[t * ld + d];
        if (z) {
#pragma omp simd
            for (int64_t d = 0; d < nd; d++) out[d] *= silu_g(z[t * ldz + d]);
        }
        for (int64_t d = 0; d < nd; d++) y[t * ldy + d] = out[d];
    }
    for (int64_t i = 0; i < ds; i++)
        for (int64_t d = 0; d < nd; d++) S[d * ds + i] = St[i * W + d];
}
