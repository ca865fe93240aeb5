/* Public C API of the Petit kernels. It is fed to ffibuilder.cdef and included by internal.h, so it holds only
 * declarations both cffi and a C compiler accept: no macros, no includes, no include guard (internal.h has one).
 * All matrices are row-major. A weight matrix W has `rows` output features and `cols` input features;
 * y[t][r] = sum_k W[r][k] * x[t][k]. Every call releases the GIL (cffi API mode). Calls are serialised internally,
 * so two Python threads may call concurrently; each call runs on the shared thread pool. */

typedef struct {
    const void *data;   /* first byte of the tensor (f32, f16, bf16, q8_0 or q4_0 rows, see docs/petit-format.md;
                         * or q8_0 / q4_0 interleaved in groups of 8 rows, see pt_interleave) */
    int32_t dtype;      /* PT_F32 0, PT_F16 1, PT_BF16 2, PT_Q8_0 3, PT_Q4_0 4, PT_Q8_0_X8 5, PT_Q4_0_X8 6, PT_TQ2 7
                         * (ternary rows, internal.h) */
    int64_t rows;       /* output features */
    int64_t cols;       /* input features (a multiple of 32 for q8_0 / q4_0) */
} pt_tensor;

/* ---- lifecycle and CPU dispatch ---- */
/* isa: -1 best available, 0 scalar, 1 avx2, 2 avx512vnni, 3 neon (ARM64). 0 ok, -1 isa unsupported, -2 bad threads */
int  pt_init(int n_threads, int isa);
int  pt_isa(void);                         /* the active path */
int  pt_isa_supported(int isa);            /* 1 if this CPU (and OS) can run that path */
int  pt_n_threads(void);
int  pt_default_threads(void);             /* performance cores this process may run on (one thread per core) */
int  pt_cpu_features(char *buf, int n);    /* comma-separated feature list into buf; returns its length */
/* why the last pt_init did not use the path it was asked for or would have chosen (that path disagreed with the
 * scalar one in the start-up check and the next one down is used), or "": the message into buf, its length */
int  pt_path_warning(char *buf, int n);
int  pt_amx_status(char *buf, int n);       /* 1: AMX tiles run the avx512 path's prefill; else 0, why into buf */
/* the thread pool's choice since it started (benchmarks): jobs pooled, jobs run by the caller alone, seconds of each,
 * probes of the other way, probes cut short; fills up to n of those 6 values, returns how many */
int  pt_pool_stats(double *out, int n);

/* ---- quantization (row-wise; q8_0 / q4_0 need cols % 32 == 0, else -1) ---- */
/* pt_quantize to q8_0 / q4_0 returns -2 when x holds a NaN or an infinity (those rows are written as zeros) */
int64_t pt_row_bytes(int32_t dtype, int64_t cols);   /* -1 when cols is not valid for dtype */
int  pt_quantize(int32_t dtype, const float *x, int64_t rows, int64_t cols, void *out);
int  pt_dequantize(int32_t dtype, const void *x, int64_t rows, int64_t cols, float *out);
int  pt_get_rows(const pt_tensor *W, const int32_t *ids, int64_t n, float *out);   /* embedding lookup; -1 on a bad id */
/* kernels/file_rows.c: pt_get_rows reads matrix `data`'s rows from file descriptor fd (owned from then on; its bytes
 * start at `offset`) with pread instead of through the mapping, so a lookup maps no page cache folio into the
 * process. add: 0, or -1 (no pread on this system, the table full, data registered already: fd stays the caller's);
 * drop: closes the fd, -1 when data was not registered; count: the registered matrices */
int  pt_file_rows_add(const void *data, int64_t nbytes, int fd, int64_t offset);
int  pt_file_rows_drop(const void *data);
int64_t pt_file_rows_count(void);
/* weights quantized with a search for the least squared error (kernels/quant_search.c): dtype 4 (q4_0) or
 * 32 + GGUF's code of Q5_0 (6), Q4_K (12), Q5_K (13), Q6_K (14); -1 another dtype or cols not whole blocks, -2 a NaN
 * or an infinity in x (those rows written as zeros) */
int  pt_quantize_search(int32_t dtype, const float *x, int64_t rows, int64_t cols, void *out);
/* ---- GGUF's other block types, decoded to float (kernels/gguf_quants.c); type is GGUF's (ggml.h) code: Q4_1 3,
 * Q5_0 6, Q5_1 7, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ4_NL 20, IQ4_XS 23 ---- */
int64_t pt_gguf_row_bytes(int32_t type, int64_t cols);   /* -1 for another type, or cols not whole blocks */
int  pt_dequantize_gguf(int32_t type, const void *x, int64_t rows, int64_t cols, float *out);
/* Q5_0 (6) / IQ4_NL (20) rows rewritten as q8_0 rows holding exactly their values (the same d, the integers as quants);
 * -1 for another type or cols not whole blocks */
int  pt_gguf_to_q8_0(int32_t type, const void *x, int64_t rows, int64_t cols, void *out);
/* ---- interleaved matrices (kernels/interleave.c) ---- */
/* a q8_0 / q4_0 matrix (dtype 3 / 4) rewritten in the interleaved layout (dtype 5 / 6), or back: the same bytes
 * regrouped, the same size; dst may be src (in place). 0 ok, -1 bad dtype or cols */
int  pt_interleave(int32_t dtype, const void *src, void *dst, int64_t rows, int64_t cols);
int  pt_deinterleave(int32_t dtype, const void *src, void *dst, int64_t rows, int64_t cols);
int  pt_prefers_interleaved(void);   /* 1 when the active path's interleaved kernels are its fast ones */
uint32_t pt_gguf_fast(void);         /* bit t set: the active path runs GGUF type t fastest as stored (SIMD kernels) */
uint32_t pt_gguf_simd(void);         /* bit t set: the active path has SIMD kernels for GGUF type t */
/* ---- length-prefixed strings (GGUF's string arrays) ---- */
/* n strings from byte pos of buf (size bytes), each a u64 little-endian length then its bytes: starts[i] = where
 * string i's bytes begin; returns the position after the last, or -1 - i when string i does not fit */
int64_t pt_prefixed_starts(const void *buf, int64_t size, int64_t pos, int64_t n, int64_t *starts);
/* ---- checksums ---- */
/* the "pt64" checksum of n bytes (docs/petit-format.md), split across the pool: the same value for any thread
 * count and any path */
uint64_t pt_checksum(const void *data, int64_t n);
uint64_t pt_checksum_ref(const void *data, int64_t n);   /* the same, one word at a time on the calling thread */
/* activations as the integer kernels see them: q8 with fp32 scale per 32 values and the block sums Σq */
void pt_quantize_act(const float *x, int64_t T, int64_t K, int8_t *q, float *d, int32_t *s);
/* one token's activations as the Q4_K / Q5_K / Q6_K kernels see them (llama.cpp's Q8_K rule, kernels/matmul.c): K a
 * multiple of 256; q [K], d [K/32] its super-block's scale for each block of 32, s [K/32] the blocks' sums, h [K/16]
 * the sums of 16 */
void pt_quant_act_k(const float *x, int64_t K, int8_t *q, float *d, int32_t *s, int16_t *h);

/* ---- matrix products ---- */
/* y[t][r] = W·x[t] (+ y[t][r] when accumulate) for t < T; x is [T][cols], y is [T][rows] */
int  pt_matmul(const pt_tensor *W, const float *x, int64_t T, float *y, int accumulate);
/* up to three matrices sharing one input (q|k|v, gate|up): the input is quantized once, one parallel region.
 * W2/y2 may be NULL. */
int  pt_matmul3(const pt_tensor *W0, const pt_tensor *W1, const pt_tensor *W2, const float *x, int64_t T,
                float *y0, float *y1, float *y2);

/* issue 33 (kernels/lora.c): the transposed product, dx[t][c] = sum_r W[r][c] dy[t][r] (+ dx when accumulate) for
 * t < T; dy is [T][rows], dx is [T][cols]; W in any layout pt_get_rows reads (the backward of y = W x through a
 * frozen, quantized base). _ref: the scalar reference. 0 ok, -1 a bad argument, -3 out of memory */
int  pt_matmul_t(const pt_tensor *W, const float *dy, int64_t T, float *dx, int accumulate);
int  pt_matmul_t_ref(const pt_tensor *W, const float *dy, int64_t T, float *dx, int accumulate);

/* ---- per-layer ops ---- */
/* rotate the first rot_dim values of each head of q [T][n_heads][hd] in place and of k [T][n_kv][hd] (rot_dim ==
 * hd: all; rot_dim 0 or a NULL table: no rotation, for layers without RoPE), and store k, v into the cache at positions
 * pos0 .. pos0+T-1; caches are [n_kv][n_ctx][hd]; tables are [n_pos][rot_dim/2]. A v cache that is the k cache
 * (latent attention: the values are the keys' rows) is written once, with the keys.
 * interleaved: 0 rotate-half (i, i+rot_dim/2), 1 pairs (2i, 2i+1). */
int  pt_rope_store(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                   int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                   int64_t n_pos, int interleaved, float *k_cache, float *v_cache, int64_t n_ctx);
/* causal attention of T queries at positions pos0..pos0+T-1 over cache positions 0..pos0+t (grouped-query:
 * head h reads kv head h / (n_heads / n_kv)); q and out are [T][n_heads][hd]. Scores are q.k * scale, then
 * softcap * tanh(s / softcap) when softcap > 0; window > 0 lets a query see only itself and the window - 1
 * positions before it (sliding-window attention), 0 everything before it. extra: NULL, or what some families add
 * (pt_attn_extra). */
typedef struct {
    const float *sinks;       /* NULL, or [n_heads] logits that join each head's softmax and whose share is dropped
                               * (gpt-oss's attention sinks) */
    int64_t chunk;            /* > 0: a query sees only the keys of its own chunk of `chunk` positions (Llama 4) */
    float temp_floor;         /* > 0: the scores of a query at position p x (1 + temp_scale ln(1 + floor((p + 1) /
                               * temp_floor))) (Llama 4's temperature tuning of its NoPE layers) */
    float temp_scale;
    const float *alibi;       /* NULL, or [n_heads] ALiBi slopes: a query at position i adds slope * (j - i) to its
                               * scaled score of key j (BLOOM, MPT, Falcon) */
    int32_t temp_at_p;        /* wrap group (issue 30): 1: the temperature's floor is floor(p / temp_floor), not
                               * floor((p + 1) / temp_floor) (Ministral 3's llama_4_scaling_beta); issue 36,
                               * fam36i: 2: the scores x exp(temp_scale ln(1 + (p + 1) / temp_floor)), no floor
                               * (Beam's scalable softmax of its NoPE layers, (1 + (p + 1) / 2048) ** 0.1) */
    int32_t bidirectional;    /* issue 35: 1: every query sees every position of the call, 0..pos0+T-1 (an encoder's
                               * attention: BERT), and under a window w only those within w - 1 of it either side
                               * (ModernBERT's local layers); 0: causal */
} pt_attn_extra;
int  pt_attention(const float *q, const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T,
                  int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t pos0, float scale, float softcap,
                  int64_t window, const pt_attn_extra *extra, float *out);
/* RoPE alone, q [T][n_heads][hd] and k [T][n_kv][hd] rotated in place (a family that norms q and k after RoPE,
 * Hunyuan, then stores them with pt_rope_store and no table); -1 on a bad argument */
int  pt_rope(float *q, float *k, int64_t T, int64_t n_heads, int64_t n_kv, int64_t head_dim, int64_t rot_dim,
             int64_t pos0, const float *cos_tab, const float *sin_tab, int64_t n_pos, int interleaved);
/* the same two calls over an int8 KV cache: each cached row (one position of one kv head) is int8 with an fp32
 * scale (amax / 127), caches [n_kv][n_ctx][hd] int8 and scales [n_kv][n_ctx]; head_dim at most 1024 */
int  pt_rope_store_q8(float *q, const float *k, const float *v, int64_t T, int64_t n_heads, int64_t n_kv,
                      int64_t head_dim, int64_t rot_dim, int64_t pos0, const float *cos_tab, const float *sin_tab,
                      int64_t n_pos, int interleaved, int8_t *k_cache, float *k_scale, int8_t *v_cache,
                      float *v_scale, int64_t n_ctx);
int  pt_attention_q8(const float *q, const int8_t *k_cache, const float *k_scale, const int8_t *v_cache,
                     const float *v_scale, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                     int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window,
                     const pt_attn_extra *extra, float *out);
/* y[r] = norm(x[r]) * w[r % w_rows] + b[r % w_rows] over rows of D values (w_rows > 1: per-head weights); w, b may
 * be NULL; in place allowed. kind 0 RMSNorm, 1 LayerNorm; kind 2 (issue 36, fam36g: ZAYA's residual scales) no
 * norm, y[r] = (x[r] + b[r % w_rows]) * w[r % w_rows], eps unused; kind 3 (issue 36, fam36l: Inkling 2's L2 clips)
 * y[r] = x[r] * w[r % w_rows] times min(1, eps / (its L2 norm + 1e-6)), b unused. -1 on a bad argument */
int  pt_norm(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
             int64_t w_rows, float *y);
/* activations: 0 none, 1 silu, 2 gelu (tanh approximation), 3 gelu (erf), 4 relu, 6 relu2 (squared relu) */
int  pt_bias_act(float *y, const float *b, int64_t T, int64_t N, int act);      /* y[t] = act(y[t] + b), b may be NULL */
/* out = act(gate) * up; act 5: gpt-oss's clamped SwiGLU, (clamp(up, -7, 7) + 1) * g sigmoid(1.702 g), g = min(gate, 7);
 * act 7: sigmoid(gate) * up (Qwen3-Next's attention output gate). out may be up */
int  pt_glu(int act, const float *gate, const float *up, int64_t n, float *out);
/* y = act(y) in place for activations with parameters p[4]: kind 0 clamp to [p0, p1]; kind 1 xIELU with alpha_p p0,
 * alpha_n p1 (both after softplus), beta p2, eps p3: x > 0 ? alpha_p x^2 + beta x : (expm1(min(x, eps)) - x) alpha_n
 * + beta x; kind 2 tanh (issue 36, fam36l), p unused. -1 on an unknown kind */
int  pt_param_act(int kind, float *y, int64_t n, const float *p);
void pt_axpy(float *y, float a, const float *x, int64_t n);                       /* y += a * x */

/* ---- the forward plan (plan.c): one call runs a whole forward step ---- */
/* the op kinds; what each reads and writes is the table at the top of kernels/plan.c */
enum {
    PT_OP_EMBED = 0, PT_OP_NORM = 1, PT_OP_MATMUL = 2, PT_OP_BIAS_ACT = 3, PT_OP_GLU = 4, PT_OP_AXPY = 5,
    PT_OP_ROPE_STORE = 6, PT_OP_ATTENTION = 7, PT_OP_LAST_NORM = 8, PT_OP_LOGITS = 9, PT_OP_MOE = 10,
    PT_OP_HEADS = 11, PT_OP_COPY = 12, PT_OP_MAMBA = 13, PT_OP_PARAM_ACT = 14, PT_OP_ROPE = 15,
    /* issue 30, the gemma group (Gemma 3n, kernels/altup.c) */
    PT_OP_ALTUP_PREDICT = 16, PT_OP_ALTUP_CORRECT = 17, PT_OP_PLE = 18, PT_OP_GEMMA_ROWS = 19,
    /* issue 30, the mla group (ids 20-21): DeepSeek Sparse Attention (kernels/dsa.c) */
    PT_OP_DSA_INDEX = 20, PT_OP_DSA_ATTENTION = 21,
    /* issue 36, the fam36g group (ids 22-25): Laguna's attention output gate, ZAYA's CCA (kernels/fam36g.c) */
    PT_OP_HEAD_GATE = 22, PT_OP_CCA = 23,
    /* issue 36, the fam36l group (ids 24-26): Inkling's attention, short convolutions and depth attention
     * (kernels/fam36l.c) */
    PT_OP_REL_ATTN = 24, PT_OP_SCONV = 25, PT_OP_BLOCK_RES = 26,
    /* issue 30, the jetmoe group (ids 44-47): JetMoE's mixture of attention heads (kernels/moa.c) */
    PT_OP_MOA_GATE = 44,
    /* issue 30, the dsv4 group (ids 34-39): DeepSeek-V4 (kernels/hc.c, dsv4_plan.c) */
    PT_OP_HC_PRE = 34, PT_OP_HC_POST = 35, PT_OP_DSV4_POOL = 36, PT_OP_DSV4_ATTN = 37, PT_OP_DSV4_INDEX = 38,
    PT_OP_HASH_ROUTE = 39,
    /* issue 36, the fam36d group (ids 45-47): SmallDoge's dynamic mask and residual scales (kernels/doge.c) */
    PT_OP_DOGE_DT = 45, PT_OP_SCALE_COLS = 46,
    /* issue 36, the fam36i group (ids 30-33): MiniMax-M3's block-sparse attention (kernels/mm3.c) */
    PT_OP_MM3_INDEX = 30, PT_OP_MM3_ATTENTION = 31,
    /* issue 36, the q4exp group (ids 33, 42, 43, 47): Qwen4-Exp's gated residual (kernels/hc.c),
     * its QSA indexer (kernels/qsa.c), its n-gram PLE (kernels/q4x_ple.c) */
    PT_OP_Q4X_MIX = 33, PT_OP_QSA_INDEX = 42, PT_OP_PLE_NGRAM = 43, PT_OP_PLE_MIX = 47,
    PT_OP_COUNT = 48
};
/* Gemma 3n's AltUp (kernels/altup.c): n streams of `hidden` values a token, stream-major, `stride` floats apart
 * (stream j of token t at x + j * stride + t * hidden); the router and its norm, the coefficient matrices (float32:
 * routers stay unquantized) and correct_output_scale (NULL: none) */
#define PT_ALTUP_MAX 16
typedef struct {
    int64_t n, hidden, stride, active;
    float eps;                    /* the router norm's */
    const float *router_norm;     /* [hidden] */
    const float *router;          /* [n][hidden]: modalities = tanh(router (rms(x) router_norm / hidden)) */
    const float *pred;            /* [n * n][n]: a token's prediction coefficients from its modalities */
    const float *corr;            /* [n][n]: its correction coefficients (+ 1) */
    const float *out_scale;       /* [hidden] correct_output_scale, or NULL */
} pt_altup;
/* predict: out_j = x_j + sum_i c[j][i] x_i with c = pred m, m the modalities of x_active; active = out_active
 * (NULL: not copied). correct: x_j = (act - pred_active) (corr m + 1)_j + pred_j with m the modalities of act;
 * scaled = x_active * out_scale (NULL: not written). The _ref forms are the plain scalar references. -1 on a bad
 * argument */
int  pt_altup_predict(const pt_altup *a, const float *x, int64_t T, float *out, float *active);
int  pt_altup_predict_ref(const pt_altup *a, const float *x, int64_t T, float *out, float *active);
int  pt_altup_correct(const pt_altup *a, const float *pred, const float *act, int64_t T, float *x, float *scaled);
int  pt_altup_correct_ref(const pt_altup *a, const float *pred, const float *act, int64_t T, float *x, float *scaled);
/* Gemma 3n's per-layer inputs, split per layer: y[l][t] (layer l's slice at y + l * y_stride) = (rms(proj[t][l] *
 * proj_scale) w + table[id][l] * emb_scale) * out_scale, each slice P wide; ids outside the table read row 0; row
 * [L * P] scratch. -1 on a bad argument */
int  pt_ple(const pt_tensor *table, const int32_t *ids, int64_t T, const float *proj, int64_t L, int64_t P,
            const float *w, float eps, float proj_scale, float emb_scale, float out_scale, float *row, float *y,
            int64_t y_stride);
int  pt_ple_ref(const pt_tensor *table, const int32_t *ids, int64_t T, const float *proj, int64_t L, int64_t P,
                const float *w, float eps, float proj_scale, float emb_scale, float out_scale, float *row, float *y,
                int64_t y_stride);
/* Gemma 3n's row-wise steps over `rows` rows of `width`: mode 0 the gaussian top-k of activation sparsity, y =
 * relu(y - (mean + scale std)) in place; 1 y = y rms(x) / sqrt(max(mean(y^2), 1e-5)); 2 y = (y + x) / scale; 3 y =
 * the mean of `streams` rows of x, x_stride floats apart; 4 y = y * scale (Gemma 4's layer_scalar). -1 on a bad
 * argument */
int  pt_gemma_rows(int mode, float *y, const float *x, int64_t rows, int64_t width, float scale, int64_t streams,
                   int64_t x_stride);
int  pt_gemma_rows_ref(int mode, float *y, const float *x, int64_t rows, int64_t width, float scale, int64_t streams,
                       int64_t x_stride);
/* routed experts (kernels/moe.c): the matrices, the routing and the scratch of one MoE block. Python fills it once
 * per scratch size; every buffer holds `cap` tokens */
typedef struct {
    int64_t n_experts, top_k, hidden;
    int32_t norm_topk;        /* renormalise the top_k weights to sum 1 */
    int32_t scoring;          /* 0: softmax over the experts' logits, 1: the sigmoid of each (Llama 4, DeepSeek-V3),
                               * 2: PhiMoE's sparsemixer (jitter_eps, at the end), 3: sqrt(softplus) (dsv4) */
    int32_t scale_input;      /* 1: a chosen expert's weight scales its input, not its output (Llama 4) */
    const float *sel_bias;    /* [n_experts] added to the scores for the choice only (DeepSeek-V3), or NULL */
    int64_t n_group, topk_group;   /* n_group > 1: only experts of the topk_group best of n_group equal groups */
    int32_t group_score;      /* a group's score: 0 its best expert's, 1 the sum of its best two (DeepSeek-V3) */
    float routed_scale;       /* the chosen weights times this, after any renormalisation (0: 1) */
    int32_t act;              /* the experts' gated activation (as pt_glu) */
    const pt_tensor *router;  /* [n_experts][hidden], a float type */
    const float *router_b;    /* [n_experts] router bias (gpt-oss), or NULL */
    const pt_tensor **gate, **up, **down;    /* n_experts each: [inter][hidden], [inter][hidden], [hidden][inter] */
    const float **gate_b, **up_b, **down_b;  /* n_experts biases each ([inter], [inter], [hidden]), or NULL */
    const pt_tensor *sh_gate, *sh_up, *sh_down;   /* a shared expert over every token (NULL: none) */
    const pt_tensor *sh_router;  /* [1][hidden]: the shared expert's sigmoid gate (NULL: weight 1) */
    int64_t cap;
    float *logits;            /* [cap][n_experts] */
    int32_t *sel;             /* [cap][top_k] */
    float *wt;                /* [cap][top_k] */
    int32_t *rows;            /* [cap] */
    float *rw;                /* [cap] */
    float *xg, *yo, *out;     /* [cap][hidden] each */
    float *g, *u;             /* [cap][the largest expert width] */
    int64_t matrices_used;    /* expert matrices multiplied, counted over calls (tests) */
    const float *sh_gate_b, *sh_up_b, *sh_down_b;   /* the shared expert's biases (ERNIE 4.5), or NULL */
    /* issue 30, the moe_b group: with norm_topk, the chosen weights over (their sum + norm_eps) (LFM2-MoE: 1e-6) */
    float norm_eps;
    /* issue 30, the moe_a group: scoring 2 is PhiMoE's sparsemixer (eval): for each of the top_k choices in turn,
     * the best expert e not yet chosen, m = its logit, weighed by the softmax of the logits of the experts not yet
     * chosen with (m - l_j) / max(|l_j|, m) <= 2 jitter_eps, taken at e; not renormalised */
    float jitter_eps;
    /* issue 30, the moe_b group: plain experts (Nemotron-H): act(up x) -> down, no gate (gate / sh_gate unused,
     * may be NULL); act is then a pt_bias_act kind */
    int32_t plain;
    /* issue 30, the longcat group: the last n_zero of the n_experts router rows are zero-computation experts
     * (LongCat-Flash): one chosen adds its token's input times its weight, after the real experts' sum (gate / up /
     * down hold n_experts - n_zero matrices) */
    int64_t n_zero;
    /* issue 30, the dsv4 group (DeepSeek-V4): scoring 3 is sqrt(softplus(logit)); forced [cap][top_k] the experts of
     * each token given by the caller (hash routing: tid2eid[token]; weights still the scores, renormalised as
     * norm_topk says), or NULL; swiglu_limit > 0: every expert's gate clamped to <= it and up to [-it, it] */
    const int32_t *forced;
    float swiglu_limit;
    /* issue 36, the fam36e group (Kolibri 1): 1 makes the choice on the raw logits plus sel_bias, not on the scores
     * plus sel_bias; the weights are still the chosen experts' scores */
    int32_t bias_logits;
    /* issue 36, the fam36h group (Ergo): each chosen expert's output RMS-normed (eps post_norm_eps) with its row of
     * post_norm [n_experts][hidden] before its weight scales it, the shared expert's with sh_post_norm [hidden]
     * before it is added; NULL: not normed */
    const float *post_norm, *sh_post_norm;
    float post_norm_eps;
    /* issue 36, the fam36g group. logit_softcap > 0: the logits soft-capped, cap tanh(l / cap), before the scores
     * (Laguna); ext_logits 1: the logits [T][n_experts] are the caller's, written into `logits` before the call (the
     * router is not run: ZAYA's router MLP); zero_skip 1: a zero-computation expert adds nothing (ZAYA's skip
     * expert) instead of its token's input times its weight */
    float logit_softcap;
    int32_t ext_logits, zero_skip;
    /* issue 36, the fam36l group. gate_softcap > 0: each expert's activation is gate_softcap tanh(g / gate_softcap)
     * sigmoid(g) times up_softcap tanh(u / up_softcap) (up as it is when up_softcap is 0) in place of act (Inkling 2's
     * soft-capped SwiGLU), the shared expert's too */
    float gate_softcap, up_softcap;
    /* issue 36, the fam36m group. group_fill_zero 1: with n_group > 1, the experts outside the chosen groups score
     * 0 for the choice instead of being left out (A.X-K2's router fills them with 0, DeepSeek-V3's with -inf);
     * limit_after_act 1: swiglu_limit clamps act(gate) (<= it) and up ([-it, it]) after the activation (Ling 3's
     * Step3p7 experts), 0: the gate before it (DeepSeek-V4); sh_limit_own 1: the shared expert clamps with
     * sh_swiglu_limit instead (0: not at all; HY-V4, Ling 3), 0: with swiglu_limit as the routed experts */
    int32_t group_fill_zero, limit_after_act, sh_limit_own;
    float sh_swiglu_limit;
} pt_moe;
/* y = the MoE block of x [T][hidden] (y += it with accumulate); -1 on a bad argument (T above cap) */
int  pt_moe_run(pt_moe *m, const float *x, int64_t T, float *y, int accumulate);
/* a Mamba mixer (kernels/ssm.c): its matrices, its float parameters and the scratch of steps of up to `cap` tokens;
 * the recurrent state is the sequence's (conv [d_inner][d_conv - 1], ssm [d_inner][d_state]) */
typedef struct {
    int64_t hidden, d_inner, d_state, d_conv, dt_rank, cap;
    int32_t inner_norm;       /* Falcon-Mamba: dt, B and C RMS-normed (no weight) with eps; Jamba: with these weights */
    const float *dt_norm_w, *b_norm_w, *c_norm_w;        /* NULL: no weight */
    float eps;
    const pt_tensor *in_proj, *x_proj, *dt_proj, *out_proj;
    const float *conv_w, *conv_b, *dt_bias, *A, *Dp;     /* [di][d_conv], [di], [di], [di][ds] (-exp(A_log)), [di] */
    float *xz, *u, *dbc, *dt, *y, *g;                   /* scratch [cap][2 di], [di], [R + 2 ds], [di], [di], [R] */
    /* Mamba-2 (version 2): in_proj gives z [di], xBC [di + 2 G ds], dt [H]; the conv runs over xBC (conv_w
     * [di + 2 G ds][d_conv]); A, D, dt_bias are one per head; the state is [H][head_dim][ds]; dt is clamped to
     * [dt_min, dt_max]; the output is RMS-normed over all di channels with norm_w after the gate (transformers'
     * MambaRMSNormGated), eps. LFM2's short conv (version 3): in_proj gives B, C and x [3][D = d_inner]; v = B x is
     * convolved (no bias, no activation), times C, then out_proj; no ssm state. Qwen3-Next's Gated DeltaNet (version
     * 4): in_proj gives q, k [n_groups][d_state], v, z [n_heads][head_dim], b, a [n_heads]; conv over q | k | v; the
     * state [n_heads][d_state][head_dim], per head S = exp(A softplus(a + dt_bias)) S + k (sigmoid(b) (v - S^T k))^T,
     * o = S^T q (q, k l2-normed, q x d_state^-1/2), RMS-normed with norm_w, times silu(z) */
    int32_t version;
    int64_t n_heads, head_dim, n_groups;
    float dt_min, dt_max;
    const float *norm_w;
    /* Mamba-2's gated norm, Falcon-H1's variants: over norm_groups equal groups of channels (0 or 1: all of them);
     * norm_mode 0 gate then norm, 1 norm then gate (norm_before_gate), 2 the gate alone (no norm, norm_w NULL),
     * 3 norm then a sigmoid gate (issue 30, the hybrid group: MiniMax's lightning attention, dt clamped to 1) */
    int64_t norm_groups;
    int32_t norm_mode;
    /* the scan's form for a prompt: 0 chosen by T (kernels/deltanet.c), 1 recurrent (a token at a time), 2 chunked */
    int32_t scan;
    /* issue 30, the recur group: Griffin's recurrent block (RecurrentGemma, version 5, kernels/rglru.c): in_proj
     * gives the x and y branches [2][W = d_inner] (+ in_b); conv_w / conv_b the x branch's conv; the RG-LRU's
     * block-diagonal gates lru_wx, lru_wa [n_heads][head_dim][head_dim] (in x out) and biases lru_bx, lru_ba [W],
     * lru_c its recurrent_param [W]; out_proj (+ out_b [hidden]); the ssm state [W + 1] (h, a started flag) */
    const float *in_b, *out_b, *lru_wx, *lru_bx, *lru_wa, *lru_ba, *lru_c;
    /* issue 30, the hybrid group: Gated DeltaNet's beta = beta_scale sigmoid(b) (OLMo Hybrid's allow_neg_eigval: 2,
     * eigenvalues of the transition in [-1, 1]); 0 or 1: sigmoid(b) */
    float beta_scale;
    /* issue 30, the recur group: an RWKV-6 block (version 6, kernels/rwkv.c; hidden D, n_heads x head_dim = D):
     * rwkv_w the time mix's receptance, key, value, gate, output and the channel mix's key [F][D], value [D][F],
     * receptance; LayerNorms ln1, ln2 (eps) and the heads' group norm lnx (gn_eps); the token-shift lerps maa_x [D],
     * maa [5][D] (w, k, v, r, g), cm_k, cm_r [D]; the LoRAs maa_w1 [5 E][D], maa_w2 [5][D][E], dec_w1 [DE][D],
     * dec_w2 [D][DE]; decay [D], bonus (time_first) [D]; rwkv_halve: the stream halved after the block; ws the
     * scratch; the conv state [2][D] (the shifts), the ssm state [H][N][N] */
    const pt_tensor *rwkv_w[8];
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *lnx_w, *lnx_b, *maa_x, *maa, *cm_k, *cm_r;
    const float *maa_w1, *maa_w2, *dec_w1, *dec_w2, *decay, *bonus;
    float gn_eps;
    int64_t rwkv_e, rwkv_de, rwkv_f;
    int32_t rwkv_halve;
    float rwkv_scale;         /* both sublayers' outputs times this (a Hugging Face checkpoint's rescaling) */
    float *ws;
    /* an RWKV-7 block (version 7, kernels/rwkv.c): rwkv_w r, k, v, o, channel key, value; maa [6][D] (r, w, k, v, a,
     * g), cm_k; the LoRAs w1 [Rw][D], w2 [D][Rw], w0 [D], a1/a2/a0, v1/v2/v0 (not layer 0), g1 [Rg][D], g2 [D][Rg];
     * r7_kk (k_k), r7_ka (k_a), r7_rk (r_k) [D]; r7_rank {Rw, Ra, Rv, Rg}; rwkv_first: layer 0 (it keeps v_first);
     * vfirst: 16 floats of header, then [cap][D] shared by the layers */
    const float *r7_w1, *r7_w2, *r7_w0, *r7_a1, *r7_a2, *r7_a0, *r7_v1, *r7_v2, *r7_v0, *r7_g1, *r7_g2;
    const float *r7_kk, *r7_ka, *r7_rk;
    int64_t r7_rank[4];
    int32_t rwkv_first;
    float *vfirst;
    /* issue 30, the hybrid group: Kimi Delta Attention (version 4 with kda 1): in_proj's last rows are the forget gate
     * f [n_heads][d_state] (in place of a [n_heads]); the state decays per key channel, S[i][:] *= exp(A[h]
     * softplus(f[h][i] + dt_bias[h][i])) (dt_bias [n_heads][d_state]); the output gate is sigmoid(z), not silu(z);
     * the recurrent form at every length (kernels/deltanet.c kda_head, plain scalar C) */
    int32_t kda;
    /* issue 30, the ggufx group: llama.cpp's rwkv6qwen2 (QRWKV6), RWKV-6's time mixing on Qwen2's blocks.
     * rwkv_mix_only: the block is the time mixing alone, of an x the layer already RMS-normed (no ln1, no channel
     * mixing: the decoder runs the layer's SwiGLU MLP), out = W_o(...) (out += it with accumulate); the shift state's
     * row 0 only (version 6 with rwkv_gla only). rwkv_gla (QRWKV): gated linear attention (pt_gla_heads) without the
     * bonus, k (1 - w), the gate sigmoid, no group norm, k / v of rwkv_kv_heads heads (head h reads kv head h /
     * (n_heads / rwkv_kv_heads)), optional biases rwkv_rb / kb / vb (NULL: none). */
    int32_t rwkv_mix_only, rwkv_gla;
    int64_t rwkv_kv_heads;
    const float *rwkv_rb, *rwkv_kb, *rwkv_vb;
    /* issue 36, the fam36m group: Kimi Delta Attention's bounded forget gate (Ling 3's kda_safe_gate): < 0, the state
     * decays per key channel by exp(kda_lower_bound sigmoid(-A[h] (f[h][i] + dt_bias[h][i]))) (A = -exp(A_log)), not
     * by exp(A[h] softplus(...)); 0: Kimi's */
    float kda_lower_bound;
    /* issue 36, the fam36n group: xLSTM's mLSTM layer (version 9, kernels/mlstm.c): in_proj gives q, k [n_heads]
     * [d_state], v, o [n_heads][head_dim], i, f [n_heads], plus in_b; the gates soft-capped at dt_max (0: none);
     * the per-head LayerNorm's weight norm_w (eps), the mLSTM's eps gn_eps; ssm state [H][dk dv + dk + 1] */
} pt_mamba;
/* out = the mixer of x [T][hidden] (out += it with accumulate), the state updated; -1 on a bad argument */
int  pt_mamba_run(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state, float *out,
                  int accumulate);
/* Context shift (kernels/kvshift.c, issue 32): one layer's cache rows [src, src + n) of every head moved down to
 * [dst, dst + n), the first rot_dim values of each moved key row turned by (cos_d, sin_d)[t] ([n][rot_dim / 2]; NULL:
 * move only), pairs (j, j + rot_dim / 2) or interleaved (2j, 2j + 1); v NULL: the values are the keys. The _q8
 * form requantizes a turned key row as the store does. -1 on a bad argument */
int  pt_kv_shift(float *k, float *v, int64_t n_heads, int64_t n_ctx, int64_t head_dim, int64_t src, int64_t dst,
                 int64_t n, int64_t rot_dim, const float *cos_d, const float *sin_d, int interleaved);
int  pt_kv_shift_q8(int8_t *k, float *k_scale, int8_t *v, float *v_scale, int64_t n_heads, int64_t n_ctx,
                    int64_t head_dim, int64_t src, int64_t dst, int64_t n, int64_t rot_dim, const float *cos_d,
                    const float *sin_d, int interleaved);
/* Griffin's RG-LRU alone (kernels/rglru.c), issue 30's recur group: u, y [T][H bw] (the conv's output, the
 * recurrence's), gates wx, wa [H][bw][bw] (in x out) with biases bx, ba [H bw], c the recurrent_param [H bw]; state
 * [H bw + 1] (h, then the started flag: 0 means position 0) carried. pt_rglru is the kernel the mixer runs,
 * pt_rglru_ref its plain scalar reference. -1 on a bad argument, -3 out of memory */
int  pt_rglru(const float *u, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx, const float *wa,
              const float *ba, const float *c, float *state, float *y);
int  pt_rglru_ref(const float *u, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx,
                  const float *wa, const float *ba, const float *c, float *state, float *y);
/* RWKV-6's WKV recurrence alone (kernels/rwkv.c), issue 30's recur group: r, k, v, w [T][H N] (w the decays in
 * (0, 1)), u [H N] the bonus; S [H][N][N] carried; y [T][H N]. pt_wkv6 is the kernel the block runs, pt_wkv6_ref
 * its plain scalar reference. -1 on a bad argument */
int  pt_wkv6(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t H,
             int64_t N, float *S, float *y);
int  pt_wkv6_ref(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T,
                 int64_t H, int64_t N, float *S, float *y);
/* Gated linear attention alone (kernels/rwkv.c), issue 30's ggufx group (QRWKV's time mixing, llama.cpp's
 * ggml_gated_linear_attn): r, k, v, w [T][H N]; per head S [N][N] (key x value) carried, S_ij = S_ij w_i + k_i v_j,
 * then y_j = scale sum_i r_i S_ij. pt_gla the kernel, pt_gla_ref its plain scalar reference; -1 on a bad argument */
int  pt_gla(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
            int64_t N, float *S, float *y);
int  pt_gla_ref(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
                int64_t N, float *S, float *y);
/* RWKV-7's WKV recurrence alone (kernels/rwkv.c): r, w, k, v, a, b [T][H N]; per head S [N][N] (value x key)
 * carried, S_ij = S_ij w_j + v_i k_j + (sum_l a_l S_il) b_j, y_i = sum_j S_ij r_j. pt_wkv7 the kernel, pt_wkv7_ref its
 * plain scalar reference; -1 on a bad argument */
int  pt_wkv7(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b, int64_t T,
             int64_t H, int64_t N, float *S, float *y);
int  pt_wkv7_ref(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b,
                 int64_t T, int64_t H, int64_t N, float *S, float *y);
/* RWKV-4's WKV recurrence alone (kernels/rwkv.c): k, v [T][D], w the time_decay (the decay is -exp(w)), u the
 * time_first [D]; S [3][D] (num, den, running max) carried; y [T][D]. pt_wkv4 the kernel, pt_wkv4_ref its plain
 * scalar reference; -1 on a bad argument */
int  pt_wkv4(const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t D, float *S, float *y);
int  pt_wkv4_ref(const float *k, const float *v, const float *w, const float *u, int64_t T, int64_t D, float *S,
                 float *y);
/* the gated delta rule alone (kernels/deltanet.c) over H heads and T tokens: q, k [T][H][dk] (l2-normed, q scaled),
 * v [T][H][dv], g [T][H] the log decays, beta [T][H]; S [H][dk][dv] carried in place; o [T][H][dv]. mode 0 chosen
 * by T, 1 recurrent, 2 chunked (kern_scan.h). -1 on a bad argument (dk, dv above 512), -3 out of memory */
int  pt_delta_rule(const float *q, const float *k, const float *v, const float *g, const float *beta, int64_t T,
                   int64_t H, int64_t dk, int64_t dv, float *S, float *o, int mode);
/* Mamba-2's SSD scan alone (kernels/ssd.c): x [T][H][P], B and C [T][G][N] (head h reads group h / (H / G)), dt [T][H]
 * (after softplus and its clamp), A [H] (<= 0); S [H][P][N] carried; y [T][H][P] = S C (without D x). mode as
 * pt_delta_rule's. -1 on a bad argument, -3 out of memory */
int  pt_ssd_scan(const float *x, const float *B, const float *C, const float *dt, const float *A, int64_t T,
                 int64_t H, int64_t G, int64_t P, int64_t N, float *S, float *y, int mode);
/* Mamba-1's selective scan alone (kernels/selscan.c): u, dt [T][di] (dt after softplus), A [di][ds] (<= 0), B and C
 * [T][ds], D [di], z [T][di] the gate (NULL: none); S [di][ds] carried; y [T][di] = (S C + D u) silu(z). mode as
 * pt_delta_rule's. -1 on a bad argument, -3 out of memory */
int  pt_selective_scan(const float *u, const float *dt, const float *A, const float *B, const float *C,
                       const float *D, const float *z, int64_t T, int64_t di, int64_t ds, float *S, float *y,
                       int mode);
/* multi-head latent attention's ops (kernels/mla.c): per head h, y[t][h] = W[h] x[t][h], each head's slice of a row
 * `x_stride` wide from x_off (y likewise), gathered through gin [T][cols] / gout [T][rows]; and a strided copy of
 * `width` values for each of `rows` rows. -1 on a bad argument */
int  pt_heads(const pt_tensor **W, int64_t H, const float *x, int64_t x_stride, int64_t x_off, float *y,
              int64_t y_stride, int64_t y_off, int64_t T, float *gin, float *gout);
int  pt_copy_rows(const float *x, int64_t x_stride, int64_t x_off, float *y, int64_t y_stride, int64_t y_off,
                  int64_t rows, int64_t width);
/* DeepSeek Sparse Attention (kernels/dsa.c) over latent attention's cache rows (`stride` values a position, float
 * or int8 with a scale a row; n_kv 1). The indexer: for the query at p = pos0 + t and each position s <= p,
 * I = sum_h w[t][h] w_scale relu(scale q[t][h] . row_s[k_off : k_off + dim]) (q [T][n_heads][dim], w [T][n_heads]);
 * sel[t] [top_k] = every position 0..p when p < top_k, else the top_k of largest I (ties: the earlier), increasing;
 * n_sel[t] their count. The attention: out[t][h][0:hd] = softmax_s(scale q[t][h][0:hd] . row_s[0:hd]) row_s[0:hd]
 * over s in sel[t] (q, out [T][n_heads][stride]). *_ref: the plain scalar reference. -1 on a bad argument, -3 out
 * of memory */
int  pt_dsa_index(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                  int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                  int64_t dim, float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel);
int  pt_dsa_index_ref(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                      int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                      int64_t dim, float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel);
/* sinks (issue 36, fam36m: HY-V4): [n_heads] attention-sink logits in each softmax, their share dropped; NULL: none */
int  pt_dsa_attention(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                      int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                      const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks, float *out);
int  pt_dsa_attention_ref(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                          int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                          const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks,
                          float *out);
/* issue 36, the fam36i group: MiniMax-M3's block-sparse attention (kernels/mm3.c). pt_mm3_index stores the step's
 * indexer keys ik [T][dim] into the index slot (rows [n_ctx][dim], float or int8 with iscale [n_ctx]), then for the
 * query at p = pos0 + t and indexer head h scores each visible block of `block` positions by its largest
 * iq[t][h] . ik_s (s <= p), the `local` blocks up to p / block +inf, and writes the top_k blocks (all when fewer),
 * increasing, to sel [T][n_idx][top_k] and their count to n_sel [T][n_idx]. pt_mm3_attention: q [T][n_heads][hd]
 * over the KV cache ([n_kv][n_ctx][hd], int8 with scales [n_kv][n_ctx]), query head h reading the positions s <= p
 * of its indexer head's (h / (n_heads / n_idx)) selected blocks; out [T][n_heads][hd]. *_ref: the plain scalar
 * reference. -1 on a bad argument, -3 out of memory */
int  pt_mm3_index(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                  int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k, int64_t local,
                  int32_t *sel, int32_t *n_sel);
int  pt_mm3_index_ref(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                      int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k,
                      int64_t local, int32_t *sel, int32_t *n_sel);
int  pt_mm3_attention(const float *q, const void *kc, const float *ks, const void *vc, const float *vs, int kv_int8,
                      int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv, int64_t hd, float scale,
                      int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel, const int32_t *n_sel,
                      float *out);
int  pt_mm3_attention_ref(const float *q, const void *kc, const float *ks, const void *vc, const float *vs,
                          int kv_int8, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv,
                          int64_t hd, float scale, int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel,
                          const int32_t *n_sel, float *out);
/* issue 30, the jetmoe group: JetMoE's mixture of attention heads (kernels/moa.c). att [T][n_kv][E][hd] in place:
 * expert e's heads times its weight, the softmax over each token's top k router logits [T][E] (0 when not chosen);
 * -1 on a bad argument. _ref: the plain scalar reference */
int  pt_moa_gate(const float *logits, int64_t T, int64_t E, int64_t k, int64_t n_kv, int64_t hd, float *att);
int  pt_moa_gate_ref(const float *logits, int64_t T, int64_t E, int64_t k, int64_t n_kv, int64_t hd, float *att);
/* issue 36, the fam36d group: SmallDoge (kernels/doge.c). pt_doge_dt: each key's slot `slot` of k [T][n_kv][hd] =
 * exp(A[j] softplus(z [T][n_kv])), each query's slot of q [T][n_heads][hd] = q_value; pt_scale_cols: y [rows][width]
 * *= w [width]. -1 on a bad argument */
int  pt_doge_dt(const float *z, const float *A, int64_t T, int64_t n_heads, int64_t n_kv, int64_t hd, int64_t slot,
                float q_value, float *q, float *k);
int  pt_scale_cols(float *y, const float *w, int64_t rows, int64_t width);
/* issue 36, the fam36g group (kernels/fam36g.c). pt_head_gate: y [T][n][width] *= act(g [T][n]), act 0 sigmoid,
 * 1 softplus (Laguna's attention output gate: per head, width head_dim; per value, width 1). pt_cca_step: ZAYA's CCA
 * projection of one sequence's raw q [T][n_heads][hd], k, v [T][n_kv][hd], in place: q and k through the causal
 * depthwise and grouped convs plus their residual paths, v's second half one position later; the state qk_state
 * [2][(n_heads + n_kv) hd] (the last two raw q | k rows), v_state [n_kv hd / 2] read (unless pos0 is 0) and
 * updated. -1 on a bad argument */
typedef struct {
    int64_t n_heads, n_kv, head_dim;
    const float *dw, *db;     /* depthwise conv over q | k's C channels: [C][2] (taps t - 1, t), [C] */
    const float *gw, *gb;     /* grouped conv, one group a head: [C][head_dim][2], [C] */
    const float *v0;          /* [n_kv hd / 2] the delayed values before a sequence's first token, or NULL: zeros */
    float *tmp;               /* scratch [5 C + n_kv hd / 2] */
} pt_cca;
int  pt_head_gate(int act, const float *g, float *y, int64_t T, int64_t n, int64_t width);
int  pt_cca_step(const pt_cca *c, float *q, float *k, float *v, int64_t T, int64_t pos0, float *qk_state,
                 float *v_state);
/* issue 36, the fam36l group (kernels/fam36l.c; the formulas at its top). pt_rel_attention: Inkling's causal attention
 * over the float cache [n_kv][n_ctx][head_dim] with a relative position bias from each query's states r
 * [T][n_heads][d_rel] times proj [d_rel][extent], the scores x tau(position) with log_floor > 0, per-token sinks
 * [T][n_heads] or NULL. pt_sconv_step: a short causal depthwise convolution with its residual, times out_scale, over
 * one sequence's rows x [T][channels] in place, its state [kernel - 1][channels] read (unless pos0 is 0) and updated;
 * dyn [T][heads][kernel] per-token taps added per head (heads > 0) or NULL. pt_block_res: per token, the softmax over
 * the RMS-normed n_src sources and the current vector of each of n_q queries' dot products / sqrt(D), and the weighted
 * sum of the normed vectors into out + i out_stride. -1 on a bad argument, -3 out of memory */
typedef struct {
    int64_t n_heads, n_kv, head_dim;
    int64_t d_rel, extent;    /* the relative states' width a head, the distances the bias covers */
    int64_t window;           /* > 0: a query sees itself and the window - 1 positions before it */
    float scale;              /* q.k x scale */
    int64_t log_floor;        /* > 0: scores x (1 + log_alpha ln(max((p + 1) / log_floor, 1))) */
    float log_alpha;
    const float *proj;        /* [d_rel][extent] */
} pt_relattn;
typedef struct {
    int64_t channels, kernel;
    const float *w;           /* [channels][kernel] (torch's Conv1d weight: the last tap the current token) */
    float out_scale;          /* y = (x + conv(x)) x out_scale */
    int64_t heads;            /* > 0: per-token taps dyn [T][heads][kernel] (lag order) added, a set a head */
    int32_t in_v;             /* the state in the cache slot's v buffer (1) or k buffer (0), */
    int64_t off;              /* at this offset (floats) */
} pt_sconv;
int  pt_rel_attention(const pt_relattn *a, const float *q, const float *r, const float *sinks, const float *k_cache,
                      const float *v_cache, int64_t n_ctx, int64_t T, int64_t pos0, float *out);
int  pt_sconv_step(const pt_sconv *c, float *x, const float *dyn, int64_t T, int64_t pos0, float *state);
int  pt_block_res(const float *src, int64_t n_src, int64_t src_stride, const float *cur, const float *queries,
                  int64_t n_q, int64_t T, int64_t D, float eps, float *out, int64_t out_stride);
/* issue 30, the dsv4 group: DeepSeek-V4's hyper-connections (kernels/hc.c). pt_hc_pre: the streams X [T][n][D]
 * collapsed into x_out [T][D] by the pre weights, with post [T][n] and the Sinkhorn-projected comb [T][n][n]
 * (head 1: the hyper head, pre weights only, post / comb unused); pt_hc_post: X_out [T][n][D] = post y + comb^T X
 * (X_out not X). -1 on a bad argument. _ref: the plain scalar references */
int  pt_hc_pre(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
               int64_t D, int64_t iters, float eps, float norm_eps, int head, float *x_out, float *post, float *comb);
int  pt_hc_pre_ref(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                   int64_t D, int64_t iters, float eps, float norm_eps, int head, float *x_out, float *post,
                   float *comb);
/* issue 36, the fam36m group: HY-V4's hyper-connection (pt_hc_pre without the Sinkhorn mix): fn [2 n][n D], scale
 * [2]; post = magnitude sigmoid(..) + eps; comb [T][n][n] written as the identity */
int  pt_hc_ind_pre(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                   int64_t D, float eps, float norm_eps, float magnitude, float *x_out, float *post, float *comb);
int  pt_hc_ind_pre_ref(const float *X, const float *fn, const float *base, const float *scale, int64_t T, int64_t n,
                       int64_t D, float eps, float norm_eps, float magnitude, float *x_out, float *post, float *comb);
int  pt_hc_post(const float *X, const float *y, const float *post, const float *comb, int64_t T, int64_t n,
                int64_t D, float *X_out);
int  pt_hc_post_ref(const float *X, const float *y, const float *post, const float *comb, int64_t T, int64_t n,
                    int64_t D, float *X_out);
/* issue 36, the q4exp group: Qwen4-Exp's gated residual: x_out [T][D] = the mean over the n streams of sigmoid(g) hn
 * (hn, g [T][n][D]: the normed streams and their gates), post [T][n] = 2 sigmoid(post) in place (NULL: the last mix);
 * -1 on a bad argument. _ref: the plain scalar reference */
int  pt_q4x_mix(const float *hn, const float *g, int64_t T, int64_t n, int64_t D, float *x_out, float *post);
int  pt_q4x_mix_ref(const float *hn, const float *g, int64_t T, int64_t n, int64_t D, float *x_out, float *post);
/* issue 36, the q4exp group: Qwen4-Exp's QSA indexer (kernels/qsa.c): the step's raw index keys ik [T][dim] stored
 * at pos0 .. of icache [n_ctx][dim]; for each query its blocks of `block` positions (the top_k of the complete ones
 * by sum_h relu(iq[t][h] . k_b) / sqrt(dim), k_b the block's mean key RMS-normed x (1 + norm_w) and rotated half by
 * half on its first rot_dim values at the block's first position; every one when at most top_k; then the
 * incomplete last one) into sel [T][top_k + 1], increasing, and their count n_sel [T]. -1 on a bad argument, -3
 * without memory. _ref: the plain double reference */
int  pt_qsa_index(const float *iq, const float *ik, float *icache, const float *norm_w, float eps, int64_t n_ctx,
                  int64_t T, int64_t pos0, int64_t n_heads, int64_t dim, int64_t block, int64_t top_k,
                  int64_t rot_dim, const float *cos_tab, const float *sin_tab, int64_t n_pos, int32_t *sel,
                  int32_t *n_sel);
int  pt_qsa_index_ref(const float *iq, const float *ik, float *icache, const float *norm_w, float eps, int64_t n_ctx,
                      int64_t T, int64_t pos0, int64_t n_heads, int64_t dim, int64_t block, int64_t top_k,
                      int64_t rot_dim, const float *cos_tab, const float *sin_tab, int64_t n_pos, int32_t *sel,
                      int32_t *n_sel);
/* issue 36, the q4exp group: Qwen4-Exp's hashed n-gram Per-Layer Embeddings (kernels/q4x_ple.c). pt_ngram: the n-gram
 * orders 2..n (n <= PT_NGRAM_MAX), `heads` hashed heads an order of `dim` values, their multipliers mult [n], the
 * heads' vocab [(n - 1) heads] and first rows offset [(n - 1) heads] in the table, whose rows are cut in n_shards
 * shards (shard i: rows start[i] .. start[i + 1] - 1; start [n_shards + 1]). pt_ngram_ids: each token's rows
 * [T][(n - 1) heads]; pt_ngram_embed: those rows side by side, out [T][(n - 1) heads dim]; ctx [n - 1] the sequence's
 * last ids, read (pos0 > 0) and written. pt_ple_mix: the streams X [T][n][D] += each stream's gated value and the
 * silu of the dilated causal conv of its normed form, state [(K - 1) dil][n D] (zeros at pos0 0). -1 on a bad
 * argument, -2 a bad row, -3 without memory; _ref: the plain double reference */
#define PT_NGRAM_MAX 16
typedef struct {
    int64_t n, heads, dim;
    int64_t eos;
    const int64_t *mult, *vocab, *offset;
    const pt_tensor **shards;
    int64_t n_shards;
    const int64_t *start;
} pt_ngram;
typedef struct {
    int64_t n, D, K, dil;
    float eps;
    const float *norm_w;      /* [n][D]: 1 + norm_conv's weight */
    const float *conv_w;      /* [n D][K] */
} pt_plemix;
int  pt_ngram_ids(const pt_ngram *g, const int32_t *ids, int64_t T, float *ctx, int64_t pos0, int64_t *out);
int  pt_ngram_embed(const pt_ngram *g, const int32_t *ids, int64_t T, float *ctx, int64_t pos0, float *out);
int  pt_ple_mix(const pt_plemix *p, const float *kn, const float *v, const float *qn, int64_t T, int64_t pos0,
                float *state, float *X);
int  pt_ple_mix_ref(const pt_plemix *p, const float *kn, const float *v, const float *qn, int64_t T, int64_t pos0,
                    float *state, float *X);
/* issue 30, the dsv4 group: DeepSeek-V4's KV compressor pooling (kernels/compress.c): out [n_win][d], each window of
 * m tokens' softmax(gate + ape)-weighted sum of kv per channel; overlap 1 (CSA): kv / gate 2 d wide, 2 m slots (the
 * previous window's first d channels, prev_kv / prev_gate [m][d] for window 0 or NULL), -1 on a bad argument */
int  pt_dsv4_pool(const float *kv, const float *gate, const float *ape, int64_t n_win, int64_t m, int64_t d,
                  int overlap, const float *prev_kv, const float *prev_gate, float *out);
int  pt_dsv4_pool_ref(const float *kv, const float *gate, const float *ape, int64_t n_win, int64_t m, int64_t d,
                      int overlap, const float *prev_kv, const float *prev_gate, float *out);
/* issue 30, the dsv4 group: DeepSeek-V4's attention core (kernels/dsv4_attn.c): one K = V head kv [n_ctx][hd] over
 * the last `window` positions plus compressed entries C [n_c][hd] (m > 0; sel NULL: every closed window, else
 * sel [T][cap] / n_sel [T]), a sink per head; q, out [T][n_heads][hd]. -1 on a bad argument */
int  pt_dsv4_attention(const float *q, const float *kv, int64_t n_ctx, const float *C, int64_t n_c, int64_t m,
                       const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t T, int64_t pos0,
                       int64_t n_heads, int64_t hd, int64_t window, float scale, const float *sinks, float *out);
int  pt_dsv4_attention_ref(const float *q, const float *kv, int64_t n_ctx, const float *C, int64_t n_c, int64_t m,
                           const int32_t *sel, const int32_t *n_sel, int64_t cap, int64_t T, int64_t pos0,
                           int64_t n_heads, int64_t hd, int64_t window, float scale, const float *sinks, float *out);
/* one op of a plan, built once at load; row counts scale with the step's T (see plan.c) */
typedef struct {
    int32_t kind;             /* PT_OP_* */
    int32_t layer;            /* the block the op belongs to (-1 before the first, the number of blocks after the
                               * last): its KV cache slot, and what an error names */
    int32_t mode;             /* by kind: norm kind, activation, accumulate, RoPE interleaved */
    int32_t slot;             /* RoPE table slot in the step, -1: no rotation (NoPE) */
    const pt_tensor *W[3];    /* matrices: up to three sharing one input */
    float *x, *x2;            /* inputs */
    float *y[3];              /* outputs (and in-place operands) */
    const float *w, *b;       /* norm weight and bias, a bias, the learned position table */
    int64_t width;            /* values per row */
    int64_t rows;             /* rows per token (a per-head norm: heads) */
    int64_t w_rows;           /* rows of w / b (per-head norm weights; positions of the position table) */
    int64_t n_heads, n_kv, head_dim, rot_dim, window;
    float eps, scale, softcap, alpha;
    pt_attn_extra extra;      /* ATTENTION: sinks, chunks, temperature (zeros: none) */
    pt_moe *moe;              /* MOE: the block (its matrices, routing and scratch) */
    const pt_tensor **Wh;     /* HEADS: one matrix per head (n_heads of them) */
    const pt_mamba *mamba;    /* MAMBA: the mixer */
    int64_t x_stride, x_off, y_stride, y_off;   /* HEADS, COPY: the per-head (per-row) strides and offsets */
    float p[4];               /* PARAM_ACT: the activation's parameters */
    int32_t cache_slot;       /* MAMBA: the cache slot of its state (Falcon-H1's layers hold a KV cache too) */
    /* issue 30, the gemma group: ALTUP_PREDICT / ALTUP_CORRECT's AltUp; GEMMA_ROWS' streams (mode 3) */
    const pt_altup *altup;
    int64_t streams;
    /* the mla group (issue 30): DSA_INDEX writes, DSA_ATTENTION reads each token's selected positions [T][top_k]
     * (top_k in `window`) and their count [T] */
    int32_t *sel, *n_sel;
    /* issue 36, the fam36g group: CCA's projection (ZAYA), its state in cache slot `cache_slot` */
    const pt_cca *cca;
    /* issue 36, the fam36l group: REL_ATTN's attention (its cache `layer`), SCONV's convolution (its state in cache
     * slot `cache_slot`) */
    const pt_relattn *rel;
    const pt_sconv *sconv;
    /* issue 36, the q4exp group: PLE_NGRAM's n-gram table, PLE_MIX's gate and conv (their state in cache slot
     * `cache_slot`) */
    const pt_ngram *ngram;
    const pt_plemix *ple;
} pt_plan_op;
/* a RoPE table the step reads: cos, sin [n_pos][rot_dim / 2] */
typedef struct {
    const float *cos, *sin;
    int64_t n_pos;
} pt_rope_table;
/* issue 30, the dsv4 group: DeepSeek-V4's plan ops over one sequence (kernels/dsv4_plan.c; lock-free, as the plan
 * calls them). pool_step: this step's raw compressor rows kv / gate [T][W] stored at pos0.. of raw_kv / raw_gate
 * [n_ctx][W] (W = 2 d with overlap), then every window closing in the step pooled (pt_dsv4_pool), RMS-normed by
 * norm_w and roped on its last rd values at its first position into entries [n_ctx / m][d]. attend_step: q [T][H][hd]
 * and kv [T][hd] roped (the last rd values, adjacent pairs), kv stored into keys [n_ctx][hd], pt_dsv4_attention over
 * the window and the entries (m 0: none; sel / n_sel: CSA's choice, top_k a row), the output's rope slice rotated
 * back. index_step: q [T][H][d] roped, then each query's top_k of the entries of its closed windows (pt_dsa_index).
 * hash_route: forced[t] = table[ids[t]] (k experts a row; -2 on an id outside its rows). */
int pt_dsv4_pool_step(const float *kv, const float *gate, const float *ape, const float *norm_w, float eps,
                      int64_t T, int64_t pos0, int64_t m, int64_t d, int overlap, int64_t rd,
                      const pt_rope_table *rope, float *raw_kv, float *raw_gate, float *entries, int64_t n_ctx);
int pt_dsv4_attend_step(float *q, float *kv, const float *sinks, int64_t T, int64_t pos0, int64_t n_heads,
                        int64_t hd, int64_t rd, int64_t window, float scale, int64_t m, const int32_t *sel,
                        const int32_t *n_sel, int64_t top_k, const pt_rope_table *rope, float *keys,
                        const float *entries, int64_t n_ctx, float *out);
int pt_dsv4_index_step(float *q, const float *w, int64_t T, int64_t pos0, int64_t n_heads, int64_t d, int64_t rd,
                       int64_t m, float scale, float w_scale, int64_t top_k, const pt_rope_table *rope,
                       const float *entries, int64_t n_ctx, int32_t *sel, int32_t *n_sel);
int pt_hash_route(const int32_t *ids, int64_t T, const int32_t *table, int64_t rows, int64_t k, int32_t *forced);
/* one sequence of a step: its own positions, RoPE tables, KV cache and logits. A step stacks its sequences' tokens:
 * sequence i owns rows off_i .. off_i + T - 1 of every buffer (off_i: the T of the sequences before it), and the
 * ops that read positions or the cache (EMBED's position table, ROPE_STORE, ATTENTION, LAST_NORM) run per sequence */
typedef struct {
    int64_t T, pos0;          /* tokens (>= 1), and the position of the first */
    const pt_rope_table *rope;   /* per slot, covering positions pos0 + T - 1 */
    int32_t kv_int8;          /* 0 float32 cache, 1 int8 cache with a scale per row */
    void **k, **v;            /* per layer: [n_kv][n_ctx][hd] */
    float **k_scale, **v_scale;  /* per layer, int8 cache only: [n_kv][n_ctx] */
    int64_t n_ctx;
    int64_t n_logits;         /* logits of its last n_logits positions (0: none), in step->logits after those of the
                               * sequences before it */
} pt_seq;
/* what changes from one step to the next: one or more independent sequences (one alone is a batch of one) */
typedef struct {
    const pt_seq *seqs;
    int64_t n_seqs;
    const int32_t *ids;       /* [sum of T] token ids, the sequences' one after another */
    float *logits;            /* [sum of n_logits][vocab]; NULL when no sequence asks for logits (the head is skipped) */
    int64_t failed_op;        /* out: the op that returned an error, -1 when none did */
    int64_t failed_seq;       /* out: the sequence it failed on, -1 when it ran over every sequence's rows at once */
} pt_step;
/* run ops[0..n_ops-1] over the step under the kernels' lock, taken once: 0, or the failing op's error (< 0) with
 * step->failed_op / failed_seq set (an embedding's bad token id: -1, nothing written). Matmuls, norms and
 * activations run over all the sequences' rows together (decode reads each weight once for the whole batch), and a
 * token gets the same bits in a batch as alone. */
int  pt_plan_run(const pt_plan_op *ops, int64_t n_ops, pt_step *step);
/* y = cap * tanh(y / cap), the logit soft-cap (Gemma 2) */
void pt_softcap(float *y, int64_t n, float cap);
