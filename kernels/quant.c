/* Weight quantization and dequantization, one portable implementation (it runs once, at export or load time, so
 * there is no hand-written SIMD variant to drift from it: plain loops the compiler vectorises, rows split across
 * the thread pool). Block layouts are GGML's block_q8_0 and block_q4_0. */
#include "internal.h"
#include <stdatomic.h>
#include <stdlib.h>

int64_t pt_row_bytes(int32_t dtype, int64_t cols) {
    if (dtype >= PT_GGUF) return pt_gguf_row_bytes(dtype - PT_GGUF, cols);
    if (cols <= 0) return -1;
    switch (dtype) {
    case PT_F32: return cols * 4;
    case PT_F16: case PT_BF16: return cols * 2;
    case PT_Q8_0: case PT_Q8_0_X8: return cols % QK ? -1 : cols / QK * Q8_BYTES;
    case PT_Q4_0: case PT_Q4_0_X8: return cols % QK ? -1 : cols / QK * Q4_BYTES;
    case PT_TQ2: return cols % QK ? -1 : TQ2_HEADER + cols / 4;
    default: return -1;
    }
}

/* roundf (half away from zero) for |v| < 2^23 in integer operations the compiler vectorises (roundf is a libcall
 * without SSE4.1): truncate, then step away from zero when the dropped fraction is at least one half. Exact: v - i
 * has no rounding error in that range. */
static inline int32_t round_away(float v) {
    int32_t i = (int32_t)v;
    float f = v - (float)i;
    return i + (f >= 0.5f) - (f <= -0.5f);
}

/* the largest |x| of a block, NaN ignored as in GGML's `if (amax < fabsf(v))`. Compared as bit patterns: for
 * non-negative floats the unsigned order is the float order, and an integer max vectorises on every compiler. */
static inline float block_amax(const float *x) {
    uint32_t bits[QK], m = 0;
    memcpy(bits, x, sizeof bits);
#pragma omp simd reduction(max:m)
    for (int j = 0; j < QK; j++) {
        uint32_t a = bits[j] & 0x7fffffffu;
        a = a > 0x7f800000u ? 0 : a;   /* NaN */
        m = a > m ? a : m;
    }
    return pt_bits_f32(m);
}

/* q8_0: d = amax / 127 stored as fp16, q = round(x / d) computed with the unrounded d (as GGML does) */
static void quantize_q8_row(const float *x, int64_t cols, uint8_t *out) {
    for (int64_t b = 0; b < cols / QK; b++, x += QK, out += Q8_BYTES) {
        float amax = block_amax(x);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = pt_f2h(d);
        memcpy(out, &h, 2);
        int8_t q[QK];
        for (int j = 0; j < QK; j++) q[j] = (int8_t)round_away(x[j] * id);
        memcpy(out + 2, q, QK);
    }
}

/* q4_0: the value of largest magnitude maps to -8, d = max / -8, nibble = clamp(round(x / d) + 8, 0, 15) */
static void quantize_q4_row(const float *x, int64_t cols, uint8_t *out) {
    for (int64_t b = 0; b < cols / QK; b++, x += QK, out += Q4_BYTES) {
        /* GGML's loop keeps the first value of largest magnitude (0 when every value is zero): the same, found
         * with a vectorised amax and then a scan for it */
        float amax = block_amax(x), max = 0.0f;
        if (amax > 0.0f)
            for (int j = 0; j < QK; j++)
                if (fabsf(x[j]) == amax) { max = x[j]; break; }
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = pt_f2h(d);
        memcpy(out, &h, 2);
        uint8_t n[QK];
        for (int j = 0; j < QK; j++) {       /* two simple loops: each one vectorises */
            int v = (int)(x[j] * id + 8.5f);
            n[j] = (uint8_t)(v < 0 ? 0 : (v > 15 ? 15 : v));
        }
        for (int j = 0; j < QK / 2; j++) out[2 + j] = (uint8_t)(n[j] | (n[j + QK / 2] << 4));
    }
}

static void dequantize_row(int32_t dtype, const uint8_t *x, int64_t cols, float *out) {
    switch (dtype) {
    case PT_F32: memcpy(out, x, (size_t)cols * 4); break;
    case PT_F16: for (int64_t i = 0; i < cols; i++) out[i] = pt_h2f(pt_load_u16(x + 2 * i)); break;
    case PT_BF16: for (int64_t i = 0; i < cols; i++) out[i] = pt_bf2f(pt_load_u16(x + 2 * i)); break;
    case PT_Q8_0:
        for (int64_t b = 0; b < cols / QK; b++, x += Q8_BYTES, out += QK) {
            float d = pt_h2f(pt_load_u16(x));
            for (int j = 0; j < QK; j++) out[j] = d * (float)(int8_t)x[2 + j];
        }
        break;
    case PT_TQ2: {
        float scale;
        memcpy(&scale, x, 4);
        for (int64_t i = 0; i < cols; i++)
            out[i] = scale * (float)((int)((x[TQ2_HEADER + i / QK * 8 + i % 8] >> (2 * (i % QK / 8))) & 3) - 1);
        break;
    }
    case PT_Q4_0:
        for (int64_t b = 0; b < cols / QK; b++, x += Q4_BYTES, out += QK) {
            float d = pt_h2f(pt_load_u16(x));
            for (int j = 0; j < QK / 2; j++) {
                out[j] = d * (float)((int)(x[2 + j] & 0x0F) - 8);
                out[j + QK / 2] = d * (float)((int)(x[2 + j] >> 4) - 8);
            }
        }
        break;
    }
}

typedef struct { int32_t dtype; const void *src; void *dst; int64_t cols, rb; atomic_int nonfinite; } rows_job;

static void quantize_rows(void *ctx, int64_t r0, int64_t r1) {
    const rows_job *j = (const rows_job *)ctx;
    const float *x = (const float *)j->src + r0 * j->cols;
    uint8_t *o = (uint8_t *)j->dst + r0 * j->rb;
    for (int64_t r = r0; r < r1; r++, x += j->cols, o += j->rb) {
        switch (j->dtype) {
        case PT_F32: memcpy(o, x, (size_t)j->rb); break;
        case PT_F16: for (int64_t i = 0; i < j->cols; i++) { uint16_t h = pt_f2h(x[i]); memcpy(o + 2 * i, &h, 2); } break;
        case PT_BF16: for (int64_t i = 0; i < j->cols; i++) { uint16_t h = pt_f2bf(x[i]); memcpy(o + 2 * i, &h, 2); } break;
        case PT_Q8_0: case PT_Q4_0:
            /* NaN or infinity has no place in a block (the float-to-int casts would be undefined behaviour, the
             * block a silent zero or minimum): the row is zeroed and the call fails */
            if (!pt_row_finite(x, j->cols)) {
                memset(o, 0, (size_t)j->rb);
                atomic_store(&((rows_job *)ctx)->nonfinite, 1);
            } else if (j->dtype == PT_Q8_0) {
                quantize_q8_row(x, j->cols, o);
            } else {
                quantize_q4_row(x, j->cols, o);
            }
            break;
        }
    }
}

typedef struct { int32_t dtype; const void *src; float *dst; int64_t rows, cols, rb; } dequant_job;

/* row r of a matrix of `rows` rows, plain or interleaved */
static void get_row(int32_t dtype, const void *src, int64_t rows, int64_t cols, int64_t rb, int64_t r, float *out) {
    if (dtype == PT_Q8_0_X8 || dtype == PT_Q4_0_X8) pt_x8_dequantize_row(dtype, (const uint8_t *)src, rows, cols, r, out);
    else if (dtype >= PT_GGUF) pt_gguf_dequantize_row(dtype - PT_GGUF, (const uint8_t *)src + r * rb, cols, out);
    else dequantize_row(dtype, (const uint8_t *)src + r * rb, cols, out);
}

/* row r of W decoded to float (any layout get_row reads); rb = pt_row_bytes(W->dtype, W->cols) */
void pt_tensor_row(const pt_tensor *W, int64_t rb, int64_t r, float *out) {
    get_row(W->dtype, W->data, W->rows, W->cols, rb, r, out);
}

static void dequantize_rows(void *ctx, int64_t r0, int64_t r1) {
    const dequant_job *j = (const dequant_job *)ctx;
    for (int64_t r = r0; r < r1; r++) get_row(j->dtype, j->src, j->rows, j->cols, j->rb, r, j->dst + r * j->cols);
}

/* rows are independent: the pool splits them (loading a Hugging Face model quantizes every matrix here).
 * -2: q8_0 / q4_0 met a NaN or an infinity (its row is zeroed; the caller finds and names the value) */
/* BitNet b1.58's ternary rule over the whole matrix: s = 1 / max(mean |x|, 1e-5), t = clamp(round(x s), -1, 1) (half
 * to even, as torch.round), each row's scale 1 / s, so w = t / s as transformers' WeightQuant computes it */
static int quantize_tq2(const float *x, int64_t rows, int64_t cols, uint8_t *out) {
    double sum = 0.0;
    for (int64_t i = 0; i < rows * cols; i++) {
        if (!isfinite(x[i])) return -2;
        sum += fabs((double)x[i]);
    }
    const int64_t n = rows * cols;
    float mean = n > 0 ? (float)(sum / (double)n) : 0.0f;
    const float s = 1.0f / (mean > 1e-5f ? mean : 1e-5f), inv = 1.0f / s;
    const int64_t rb = TQ2_HEADER + cols / 4;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *o = out + r * rb;
        memcpy(o, &inv, 4);
        memset(o + TQ2_HEADER, 0, (size_t)(cols / 4));
        for (int64_t i = 0; i < cols; i++) {
            float v = rintf(x[r * cols + i] * s);
            int t = v > 1.0f ? 1 : (v < -1.0f ? -1 : (int)v);
            o[TQ2_HEADER + i / QK * 8 + i % 8] |= (uint8_t)((t + 1) << (2 * (i % QK / 8)));
        }
    }
    return 0;
}

int pt_quantize(int32_t dtype, const float *x, int64_t rows, int64_t cols, void *out) {
    rows_job j = {dtype, x, out, cols, pt_row_bytes(dtype, cols), 0};
    if (dtype == PT_TQ2) return j.rb < 0 || rows < 0 ? -1 : quantize_tq2(x, rows, cols, (uint8_t *)out);
    if (j.rb < 0 || rows < 0 || dtype > PT_Q4_0) return -1;     /* interleaving is pt_interleave's */
    pt_run_rows(quantize_rows, &j, rows, cols);
    return atomic_load(&j.nonfinite) ? -2 : 0;
}

int pt_dequantize(int32_t dtype, const void *x, int64_t rows, int64_t cols, float *out) {
    dequant_job j = {dtype, x, out, rows, cols, pt_row_bytes(dtype, cols)};
    if (j.rb < 0 || rows < 0) return -1;
    pt_run_rows(dequantize_rows, &j, rows, cols);
    return 0;
}

int pt_get_rows(const pt_tensor *W, const int32_t *ids, int64_t n, float *out) {
    int64_t rb = pt_row_bytes(W->dtype, W->cols);
    if (rb < 0) return -1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= W->rows) return -1;
    int fd = -1;
    int64_t offset = 0, nbytes = 0;
    uint8_t *row = NULL;
    if (W->dtype != PT_Q8_0_X8 && W->dtype != PT_Q4_0_X8 && pt_file_rows_find(W->data, &fd, &offset, &nbytes)
        && nbytes == rb * W->rows)
        row = (uint8_t *)malloc((size_t)rb);            /* the rows come by pread (file_rows.c) */
    for (int64_t i = 0; i < n; i++) {
        float *o = out + i * W->cols;
        if (row && pt_file_rows_read(fd, offset, ids[i] * rb, rb, row) == 0)
            get_row(W->dtype, row, 1, W->cols, rb, 0, o);
        else
            get_row(W->dtype, W->data, W->rows, W->cols, rb, ids[i], o);
    }
    free(row);
    return 0;
}
