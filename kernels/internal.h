/* Internal declarations shared by the kernel sources: fp16/bf16 conversion, block layouts, the per-ISA
 * function table, the thread pool and the drivers' shared ground (parallel.c). */
#ifndef PETIT_INTERNAL_H
#define PETIT_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <math.h>

/* The x86-64 SIMD paths are compiled: gcc and clang switch targets per file (kern_avx2.c), MSVC needs no switch
 * for intrinsics. ARM64 gets the NEON path (kern_neon.c), anything else the scalar one. */
#if defined(__x86_64__) || defined(_M_X64)
#define PT_X86_64 1
#endif

/* attention splits each query's positions into blocks of this many, aligned to absolute positions (attention.c) */
#define PT_ATTN_BLOCK 64
/* the recurrent mixers' chunked scans take a prompt this many tokens at a time (kern_scan.h) */
#define PT_SCAN_CHUNK 64
/* floats of work one chunk of the gated delta rule needs (kern_scan.h's delta_chunk_g) */
#define PT_SCAN_DELTA_WORK(dk, dv) ((int64_t)PT_SCAN_CHUNK * (2 + 3 * (dk) + (dv) + 2 * PT_SCAN_CHUNK))
/* and one chunk of Mamba-2's SSD (kern_scan.h's ssd_chunk_g), heads of P channels and N states */
#define PT_SCAN_SSD_WORK(P, N) ((int64_t)PT_SCAN_CHUNK * (2 + 3 * (N) + 2 * (P) + PT_SCAN_CHUNK) + (int64_t)(N) * (P))
/* Mamba-1's selective scan runs in blocks of this many channels (the lanes of its chunked form) and takes a prompt
 * this many tokens at a time (kern_scan.h's sel_chunk_g), which needs this many floats of work for ds states */
#define PT_SEL_BLOCK 16
#define PT_SEL_CHUNK 32
#define PT_SCAN_SEL_WORK(ds) ((int64_t)PT_SEL_BLOCK * (2 * (ds) + PT_SEL_CHUNK + (int64_t)PT_SEL_CHUNK * (ds)))

enum { PT_F32 = 0, PT_F16 = 1, PT_BF16 = 2, PT_Q8_0 = 3, PT_Q4_0 = 4, PT_Q8_0_X8 = 5, PT_Q4_0_X8 = 6, PT_TQ2 = 7 };
/* PT_TQ2, ternary weights (BitNet b1.58): a row is a float32 scale, then blocks of 32 values in 8 bytes, the value
 * t in {-1, 0, 1} at block position j + 8 k stored as t + 1 in bits 2k..2k+1 of byte j; w = t * scale. Its products
 * take activations quantized per token (BitNet's rule: pt_act.d[t] = 127 / max|x[t]|, .s[t] the sum of the
 * quants), not per block */
#define TQ2_HEADER 4
/* GGUF's other block types as a pt_tensor dtype: PT_GGUF + GGUF's type code (Q4_K: 32 + 12), see gguf_quants.c */
#define PT_GGUF 32
enum { PT_ISA_SCALAR = 0, PT_ISA_AVX2 = 1, PT_ISA_AVX512 = 2, PT_ISA_NEON = 3, PT_ISA_AVXVNNI = 4, PT_ISA_COUNT = 5 };

#define QK 32            /* values per quantization block */
#define Q8_BYTES 34      /* fp16 d + 32 int8 */
#define Q4_BYTES 18      /* fp16 d + 16 bytes of nibbles */
/* an interleaved matrix (PT_Q8_0_X8 / PT_Q4_0_X8, layout in interleave.c) holds 8 rows' block b in one piece */
#define Q8X8_BYTES (8 * Q8_BYTES)
#define Q4X8_BYTES (8 * Q4_BYTES)

#include "api.h"   /* pt_tensor and the public prototypes */

/* ---- fp16 / bf16 <-> fp32, portable (round to nearest even) ---- */
static inline uint32_t pt_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float pt_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float pt_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return pt_bits_f32(sign);
        return (sign ? -1.0f : 1.0f) * (float)mant * 5.9604644775390625e-08f;   /* subnormal: mant * 2^-24 */
    }
    if (exp == 31) return pt_bits_f32(sign | 0x7f800000u | (mant << 13));  /* inf / nan */
    return pt_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t pt_f2h(float f) {
    uint32_t x = pt_f32_bits(f), mant = x & 0x7fffff;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    if (exp == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
    int32_t e = exp - 127 + 15;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= 0x800000;
        int shift = 14 - e;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return sign | (uint16_t)h;
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* a carry into the exponent is correct */
    return sign | (uint16_t)h;
}

static inline float pt_bf2f(uint16_t b) { return pt_bits_f32((uint32_t)b << 16); }

static inline uint16_t pt_f2bf(float f) {
    uint32_t x = pt_f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);   /* quiet nan */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static inline uint16_t pt_load_u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* ---- activations quantized for the integer kernels ---- */
typedef struct {
    const int8_t *q;     /* [T][K] */
    const float *d;      /* [T][K/32] scale per block */
    const int32_t *s;    /* [T][K/32] sum of the block's 32 quants */
    int64_t K;
    const int16_t *h;    /* [T][K/16] sum of each 16 quants: PT_KQ8's activations only (pt_quant_act_k), else NULL */
    const uint8_t *f6;   /* [T][K/256] or NULL (then all 0): 1 where pt_q6_flags found the super-block's quants small
                          * enough that a Q6_K half-block's products add up in 16 bits (the x86 prefill tile) */
} pt_act;

/* f[sb] = 1 when, in each half-block (16 quants) of super-block sb, the quants at positions 0,1,4,5,8,9,12,13 and
 * those at 2,3,6,7,10,11,14,15 each have positive and negative parts of at most 520 in absolute value: then any 8 of
 * Q6_K's values (0..63) times them sum to within int16 (63 x 520 = 32,760), the sums kern_x86_gguf.h's Q6_K tile
 * adds in 16-bit lanes; else 0 (that tile then adds half as many in 16 bits). matmul.c */
void pt_q6_flags(const int8_t *q, int64_t K, uint8_t *f);

/* GGUF's Q4_K, Q5_K and Q6_K take their activations as llama.cpp's Q8_K does: one scale per super-block of 256
 * values (pt_quant_act_k: d[] then holds the super-block's scale for each of its 8 blocks, and h[] the quants' sums
 * of 16), so a super-block's sub-scales multiply its integer sums as integers and the row's sum takes one or two
 * float steps per 256 values (kern_gguf.h, rows_kq8_g) */
#define PT_KQ8(type) ((type) == 12 || (type) == 13 || (type) == 14)     /* pt_quant_act_k: api.h */

/* ---- per-ISA kernels ---- */
typedef struct {
    const char *name;
    /* one activation row: x[K] -> q[K], d[K/32], s[K/32] (round half to even) */
    void (*quant_act)(const float *x, int64_t K, int8_t *q, float *d, int32_t *s);
    /* y[j] = dot(weight row r0+i, activation row t) for rows r0..r1, all T tokens; y is [T][ldy] */
    void (*rows_q8)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                    float *y, int64_t ldy, int accumulate);
    void (*rows_q4)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T,
                    float *y, int64_t ldy, int accumulate);
    void (*rows_float)(const void *w, int32_t dtype, int64_t K, int64_t r0, int64_t r1, const float *x,
                       int64_t T, float *y, int64_t ldy, int accumulate);
    /* the same products over an interleaved matrix's whole groups: rows r0..r1, both multiples of 8 (the rows after
     * the last group are plain rows: rows_q8 / rows_q4 take them). The same bits as the plain kernels give. */
    void (*rows_q8x8)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y, int64_t ldy,
                      int accumulate);
    /* ternary rows (PT_TQ2) against activations quantized per token: a->d[t] the token's scale, a->s[t] its sum */
    void (*rows_tq2)(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y,
                     int64_t ldy, int accumulate);
    void (*rows_q4x8)(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T, float *y, int64_t ldy,
                      int accumulate);
    int interleave;     /* 1: the interleaved kernels are this path's fast ones (the loader interleaves matrices) */
    /* rows of a GGUF block type (GGUF's type code; kern_gguf.h's arithmetic, the same bits on every path) */
    void (*rows_gguf)(int32_t type, const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t r1, const pt_act *a,
                      int64_t T, float *y, int64_t ldy, int accumulate);
    uint32_t gguf_fast;  /* bit t: this path multiplies GGUF type t fastest as stored (the loader keeps it so) */
    uint32_t gguf_simd;  /* bit t: this path has SIMD kernels for GGUF type t (kept as stored when a load asks) */
    /* per-layer ops, their arguments checked by the entry points in layer_ops.c (see api.h) */
    void (*norm)(int kind, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t D,
                 int64_t w_rows, float *y);
    void (*bias_act)(float *y, const float *b, int64_t T, int64_t N, int act);
    void (*glu)(int act, const float *gate, const float *up, int64_t n, float *out);
    /* one query head over one block of at most PT_ATTN_BLOCK cached positions: its largest score ml[0], the sum
     * of exp(score - ml[0]) ml[1], and out = the sum of those weights times the value rows (kern_generic.h); an
     * int8 cache's block is dequantized once for all the queries that read it (attention.c) */
    void (*attn_block)(const float *q, const float *k, const float *v, int64_t n, int64_t hd, float scale,
                       float softcap, float slope, float rel0, float *scores, float *out, float *ml);
    /* one chunk of one head of the gated delta rule, chunked (kern_scan.h: delta_chunk_g's contract) */
    void (*delta_chunk)(float *S, const float *q, const float *k, int64_t ldqk, const float *v, int64_t ldv,
                        const float *g, const float *beta, int64_t n, int64_t dk, int64_t dv, float *o, int64_t ldo,
                        float *work);
    /* one chunk of one head of Mamba-2's SSD, chunked (kern_scan.h: ssd_chunk_g's contract) */
    void (*ssd_chunk)(float *S, const float *x, int64_t ldx, const float *B, const float *C, int64_t ldbc,
                      const float *dt, float A, int64_t n, int64_t P, int64_t N, float *y, int64_t ldy, float *work);
    /* the recurrent forms of the delta rule (one token of one head) and of the SSD scan (T tokens of one head) */
    void (*delta_step)(float *S, const float *q, const float *k, const float *v, float beta, float decay, float *o,
                       int64_t dk, int64_t dv, float *kv);
    void (*ssd_steps)(float *S, const float *x, int64_t ldx, const float *B, const float *C, int64_t ldbc,
                      const float *dt, int64_t lddt, float A, int64_t T, int64_t P, int64_t N, float *y, int64_t ldy);
    /* Mamba-1's selective scan over a block of channels (kern_scan.h): a token at a time (sel_steps_g, decode and
     * short prompts), or one chunk of at most PT_SEL_CHUNK tokens with its exps computed in one pass (sel_chunk_g) */
    void (*sel_steps)(float *S, const float *A, const float *Dp, const float *dt, const float *u, int64_t ld,
                      const float *z, int64_t ldz, const float *B, const float *C, int64_t ldbc, int64_t T,
                      int64_t nd, int64_t ds, float *y, int64_t ldy);
    void (*sel_chunk)(float *S, const float *A, const float *Dp, const float *dt, const float *u, int64_t ld,
                      const float *z, int64_t ldz, const float *B, const float *C, int64_t ldbc, int64_t n,
                      int64_t nd, int64_t ds, float *y, int64_t ldy, float *work);
    /* issue 33, LoRA's backward (lora.c): dx[t][c] += sum over the n rows p of a decoded panel [n][C] of
     * dy[t * R + p] * panel[p][c], rows t0..t1-1 of dx ([T][C]); each dx value's additions in p order */
    void (*mt_panel)(const float *panel, int64_t n, int64_t C, const float *dy, int64_t R, float *dx, int64_t t0,
                     int64_t t1);
} pt_kernels;

extern const pt_kernels pt_kernels_scalar;
extern const pt_kernels pt_kernels_avx2;
extern const pt_kernels pt_kernels_avxvnni;
extern const pt_kernels pt_kernels_avx512;
extern const pt_kernels pt_kernels_neon;   /* name 0 where not compiled (not ARM64) */
/* the active table, read atomically (pt_init may switch it from another thread): read it once per call and use that
 * copy throughout, so one call never mixes two paths */
const pt_kernels *pt_active(void);

int64_t pt_row_bytes(int32_t dtype, int64_t cols);   /* quant.c, also public */
/* gguf_quants.c: one row of a GGUF block type (GGUF's code) as float */
void pt_gguf_dequantize_row(int32_t type, const uint8_t *x, int64_t cols, float *out);
/* interleave.c: row r of an interleaved matrix (dtype PT_Q8_0_X8 / PT_Q4_0_X8) of `rows` rows as float */
/* row r of W decoded to float, any layout (quant.c); rb = pt_row_bytes(W->dtype, W->cols) (issue 33, lora) */
void pt_tensor_row(const pt_tensor *W, int64_t rb, int64_t r, float *out);
int pt_file_rows_find(const void *data, int *fd, int64_t *offset, int64_t *nbytes);   /* file_rows.c */
int pt_file_rows_read(int fd, int64_t offset, int64_t at, int64_t n, void *buf);
void pt_x8_dequantize_row(int32_t dtype, const uint8_t *w, int64_t rows, int64_t cols, int64_t r, float *out);
/* 8 plain q8_0 / q4_0 rows (row bytes rb, nb blocks) as one interleaved group in x (interleave.c's layout) */
void pt_x8_group(const uint8_t *rows, int64_t rb, int64_t nb, uint8_t *x, int q4);
/* pathcheck.c: 0 when every kernel of table k agrees with the scalar table on small odd-sized inputs, else -1 and
 * a message naming the kernel into msg */
int pt_path_check(const pt_kernels *k, char *msg, int n);
/* AMX (kern_amx.c): the interleaved groups' pairs in rows r0..r1 against tokens 0..T16-1 (a multiple of 16) on the
 * tiles; pt_amx_on says whether cpu.c turned it on; pt_amx_check compares it with the scalar path (0: the same
 * bits; else a message in msg) */
void pt_amx_rows(const uint8_t *w, int64_t r0, int64_t r1, const pt_act *a, int64_t T16, float *y, int64_t ldy,
                 int accumulate, int q4);
int pt_amx_on(void);
int pt_amx_check(char *msg, int n);
/* GGUF's block types in a prefill (kern_x86_gguf.h): groups of 8 rows unpacked into GT_BLOCK bytes per 32-value
 * block (8 vectors of 32 bytes, lane i of vector k = values 4k..4k+3 of row i, then each of the 8 rows' float
 * factors as two vectors of 8), GT_BLOCK4 with 4 vectors after the values (Q2_K's factors; the PT_KQ8 types'
 * sub-scales and super-block factors, gguf_unpack8_) */
#define GT_BLOCK 320
#define GT_BLOCK4 384

/* deltanet.c: the delta rule of a Gated DeltaNet mixer's value heads (kernels/ssm.c ran in_proj and the conv into
 * m->xz, rows of `row`, and m->u, rows of cw); the lock held. 0, or -3 out of memory */
int pt_delta_heads(const pt_mamba *m, int64_t T, int64_t cw, int64_t row, float *ssm_state);
/* ssd.c: whether a Mamba-2 scan of T tokens takes the chunked form (mode: pt_mamba.scan), and that form over a
 * version-2 mixer's heads (m->u: the conv's output, rows of cw; m->dt; into m->y with D x); the lock held. 0, or
 * -3 out of memory */
int pt_ssd_chunked(int32_t mode, int64_t T);
int pt_ssd_heads(const pt_mamba *m, int64_t T, int64_t cw, float *ssm_state);
/* selscan.c: Mamba-1's selective scan over a version-1 mixer's channels (m->u, m->dt, m->dbc, the gate in m->xz;
 * into m->y), recurrent or chunked by m->scan and T; the lock held. 0, or -3 out of memory */
int pt_sel_channels(const pt_mamba *m, int64_t T, float *ssm_state);
/* Griffin's recurrent block (kernels/rglru.c, issue 30's recur group): the mixer, and the RG-LRU over heads with
 * its scratch gx, ga [T][H bw] */
int pt_rglru_mixer_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state,
                          float *out, int accumulate);
int pt_rwkv6_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate);
/* issue 36, the fam36n group: xLSTM's mLSTM layer (pt_mamba version 9, kernels/mlstm.c) */
int pt_mlstm_locked(const pt_mamba *m, const float *x, int64_t T, float *ssm_state, float *out, int accumulate);
int pt_rwkv4_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate);
int pt_rwkv7_block_locked(const pt_mamba *m, const float *x, int64_t T, float *shift, float *S, float *out,
                          int accumulate);
int pt_wkv7_heads(const float *r, const float *w, const float *k, const float *v, const float *a, const float *b,
                  int64_t T, int64_t H, int64_t N, int64_t ld, float *S, float *y);
int pt_gla_heads(const float *r, const float *k, const float *v, const float *w, float scale, int64_t T, int64_t H,
                 int64_t N, int64_t ld, float *S, float *y);
int pt_wkv6_heads(const float *r, const float *k, const float *v, const float *w, const float *u, int64_t T,
                  int64_t H, int64_t N, int64_t ld, float *S, float *y);
int pt_rglru_heads(const float *u, int64_t ldu, int64_t T, int64_t H, int64_t bw, const float *wx, const float *bx,
                   const float *wa, const float *ba, const float *c, float *state, float *y, int64_t ldy, float *gx,
                   float *ga);

/* ---- thread pool (pool.c) ---- */
typedef void (*pt_task_fn)(void *ctx, int64_t chunk, int ith);
int  pt_pool_start(int n_threads);
void pt_pool_stop(void);
void pt_pool_after_fork_child(void);
int  pt_pool_threads(void);
int  pt_pool_alone(void);     /* jobs run on the calling thread alone now (pool.c's measured choice) */
/* blocks until every chunk is done; `work` (MACs, values: any unit proportional to the job's cost) lets the pool
 * measure whether it is faster than the caller alone */
void pt_pool_run(pt_task_fn fn, void *ctx, int64_t n_chunks, double work);
/* per-thread scratch of at least n floats (grows, never shrinks) */
float *pt_scratch(int ith, int64_t n);

/* ---- the drivers' shared ground (parallel.c) ---- */
/* the lock every caller of the pool or of the shared scratch holds for the whole call */
void pt_lock(void);
void pt_unlock(void);
void pt_fork_safe(void);   /* once per process: fork() neither inherits the lock held nor loses the pool */
/* below this much work (multiply-adds, or values) a job runs on the calling thread alone */
#define PT_SERIAL_WORK 262144.0
/* fn over chunks 0..n_chunks-1: on the pool, or on the calling thread when work < PT_SERIAL_WORK; the caller
 * holds the lock */
void pt_run_chunks(pt_task_fn fn, void *ctx, int64_t n_chunks, double work);
/* 1 when every value of the row is finite: the exponent bits all set means NaN or infinity. One pass over a row
 * still in the cache, an OR the compiler vectorises. */
static inline int pt_row_finite(const float *x, int64_t cols) {
    uint32_t bad = 0;
#pragma omp simd reduction(|:bad)
    for (int64_t i = 0; i < cols; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        bad |= (b & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* fn(ctx, r0, r1) over rows 0..rows-1 in parallel chunks of about 64K values (on the calling thread when small);
 * takes the lock */
void pt_run_rows(void (*fn)(void *ctx, int64_t r0, int64_t r1), void *ctx, int64_t rows, int64_t cols);

/* ---- the drivers without their lock, for a caller that holds it (plan.c: one lock per forward step) ---- */
int pt_matmul_n_locked(const pt_tensor **W, float **y, int n, const float *x, int64_t T, int accumulate);
int pt_moe_locked(pt_moe *m, const float *x, int64_t T, float *y, int accumulate);
/* kernels/dsa.c (the mla group, issue 30) */
int pt_dsa_index_locked(const float *q, const float *w, const void *cache, const float *scales, int kv_int8,
                        int64_t stride, int64_t k_off, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads,
                        int64_t dim, float scale, float w_scale, int64_t top_k, int32_t *sel, int32_t *n_sel);
int pt_dsa_attention_locked(const float *q, const void *cache, const float *scales, int kv_int8, int64_t stride,
                            int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t hd, float scale,
                            const int32_t *sel, const int32_t *n_sel, int64_t top_k, const float *sinks,
                            float *out);
/* the top_k of n scored items (score v, index s; n <= top_k: every item, in order) into sel, increasing by index:
 * the larger score first, equal scores the lower index (kernels/dsa.c's indexer; issue 36, fam36i: MiniMax-M3's
 * blocks); the array is reordered. Returns the count */
typedef struct { float v; int32_t s; } pt_scored;
int64_t pt_top_k_increasing(pt_scored *sc, int64_t n, int64_t top_k, int32_t *sel);
/* online softmax: a query's running (max, sum) ml and output o fold in a block's (bml, bo) */
static inline void pt_fold(float *ml, float *o, const float *bml, const float *bo, int64_t hd) {
    const float m = ml[0] > bml[0] ? ml[0] : bml[0];
    const float a = expf(ml[0] - m), c = expf(bml[0] - m);
    ml[0] = m;
    ml[1] = ml[1] * a + bml[1] * c;
    for (int64_t i = 0; i < hd; i++) o[i] = o[i] * a + bo[i] * c;
}
/* issue 36, the fam36i group: MiniMax-M3's block-sparse attention (kernels/mm3.c) */
int pt_mm3_index_locked(const float *iq, const float *ik, void *icache, float *iscale, int kv_int8, int64_t n_ctx,
                        int64_t T, int64_t pos0, int64_t n_idx, int64_t dim, int64_t block, int64_t top_k,
                        int64_t local, int32_t *sel, int32_t *n_sel);
int pt_mm3_attention_locked(const float *q, const void *kc, const float *ks, const void *vc, const float *vs,
                            int kv_int8, int64_t n_ctx, int64_t T, int64_t pos0, int64_t n_heads, int64_t n_kv,
                            int64_t hd, float scale, int64_t n_idx, int64_t block, int64_t top_k, const int32_t *sel,
                            const int32_t *n_sel, float *out);
int pt_mamba_locked(const pt_mamba *m, const float *x, int64_t T, float *conv_state, float *ssm_state, float *out,
                    int accumulate);
int pt_heads_locked(const pt_tensor **W, int64_t H, const float *x, int64_t x_stride, int64_t x_off, float *y,
                    int64_t y_stride, int64_t y_off, int64_t T, float *gin, float *gout);
int pt_attention_locked(const float *q, const void *k_cache, const float *k_scale, const void *v_cache,
                        const float *v_scale, int kv_int8, int64_t n_ctx, int64_t T, int64_t n_heads, int64_t n_kv,
                        int64_t head_dim, int64_t pos0, float scale, float softcap, int64_t window,
                        const pt_attn_extra *extra, float *out);
/* kernels/fam36l.c (issue 36, the fam36l group) */
int pt_rel_attention_locked(const pt_relattn *a, const float *q, const float *r, const float *sinks,
                            const float *k_cache, const float *v_cache, int64_t n_ctx, int64_t T, int64_t pos0,
                            float *out);

#endif
