/* The forward plan: a whole forward step (decode or prefill, any number of tokens T) in one call.
 *
 * Python (petit/models/plan.py) describes the model once, at load, as a flat array of op records (pt_plan_op,
 * api.h): each names its kind, its weights, norms and biases, and the scratch buffers it reads and writes, with
 * widths per token, so one plan serves every T. A step (pt_step) carries what changes from call to call: T, the
 * first position, the token ids, the RoPE tables, the KV cache and where the logits go. pt_plan_run takes the
 * kernels' lock once and runs the ops in order, each through the same driver the per-op calls use (so a step gives
 * bit for bit the logits of the per-op path, petit/models/decoder.py's oracle), with no Python in between. A driver
 * may still hand its op to the thread pool (a matmul's rows, attention's heads); with the workers spinning between
 * ops that hand-off costs about 0.1-0.2 us, as much as a barrier in one parallel region (ggml's design) would.
 *
 * The ops. "rows" is rows per token: an op runs over T * rows rows of `width` values (a per-head q/k norm has
 * rows = heads, width = head_dim). Unused fields are zero / NULL.
 *
 *   kind         reads                                   writes           fields
 *   EMBED        step ids, W[0] (embedding), b (learned  y[0] [T][width]  scale (x embedding scale, 1: none),
 *                positions [w_rows][width] or NULL)                       w_rows; error -1: a bad id, nothing else
 *   NORM         x, w, b (NULL: ones / zeros)            y[0] (may be x)  mode (0 RMS, 1 Layer), eps, rows, width,
 *                                                                         w_rows (w / b rows, r uses r % w_rows)
 *   MATMUL       x [T][W[0]->cols], W[0..2] (W[1], W[2]  y[0..2]          mode 1: add into y[0] (one matrix only)
 *                NULL: fewer), one quantization of x
 *   BIAS_ACT     y[0], b (NULL: none)                    y[0]             mode (activation, api.h), rows, width
 *   GLU          x (gate), x2 (up)                       y[0]             mode (activation), rows, width
 *   AXPY         y[0], x                                 y[0] += alpha x  alpha, width
 *   ROPE_STORE   y[0] q, y[1] k, y[2] v, step rope[slot] y[0] rotated,    layer (cache slot), slot (-1: NoPE),
 *                                                        cache rows       mode (interleaved), n_heads, n_kv,
 *                                                                         head_dim, rot_dim
 *   ATTENTION    x (q), the step's cache of `layer`      y[0]             n_heads, n_kv, head_dim, scale, softcap,
 *                                                                         window
 *   LAST_NORM    the last step->n_logits rows of x       y[0] [n][width]  as NORM (rows 1); skipped when n_logits 0
 *   LOGITS       x [n_logits][W[0]->cols], W[0], b       step->logits     scale (1: none), softcap (0: none);
 *                (NULL: no bias)                                          skipped when n_logits 0
 *
 * A new block kind (routed experts, a state-space scan, linear attention) is a new PT_OP_ value in api.h, a case
 * below that calls its driver (written lock-free, as pt_matmul_n_locked), a row in this table, and the lines in
 * plan.py that emit it; state it carries across steps travels in pt_step beside the KV cache. */
#include "internal.h"

void pt_softcap(float *y, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) {
        const float t = tanhf(y[i] / cap);
        y[i] = t * cap;
    }
}

static int embed(const pt_plan_op *op, const pt_step *s) {
    if (pt_get_rows(op->W[0], s->ids, s->T, op->y[0]) != 0) return -1;
    const int64_t n = s->T * op->width;
    if (op->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) op->y[0][i] *= op->scale;
    if (op->b) {
        if (s->pos0 + s->T > op->w_rows) return -2;
        const float *pos = op->b + s->pos0 * op->width;
        for (int64_t i = 0; i < n; i++) op->y[0][i] += pos[i];
    }
    return 0;
}

static int rope_store(const pt_plan_op *op, const pt_step *s) {
    const float *cos = 0, *sin = 0;
    int64_t n_pos = 0, rot = 0;
    if (op->slot >= 0) {
        const pt_rope_table *t = &s->rope[op->slot];
        cos = t->cos; sin = t->sin; n_pos = t->n_pos; rot = op->rot_dim;
    }
    const int L = op->layer;
    if (s->kv_int8)
        return pt_rope_store_q8(op->y[0], op->y[1], op->y[2], s->T, op->n_heads, op->n_kv, op->head_dim, rot,
                                s->pos0, cos, sin, n_pos, op->mode, (int8_t *)s->k[L], s->k_scale[L],
                                (int8_t *)s->v[L], s->v_scale[L], s->n_ctx);
    return pt_rope_store(op->y[0], op->y[1], op->y[2], s->T, op->n_heads, op->n_kv, op->head_dim, rot, s->pos0, cos,
                         sin, n_pos, op->mode, (float *)s->k[L], (float *)s->v[L], s->n_ctx);
}

static int attention(const pt_plan_op *op, const pt_step *s) {
    const int L = op->layer;
    return pt_attention_locked(op->x, s->k[L], s->kv_int8 ? s->k_scale[L] : 0, s->v[L],
                               s->kv_int8 ? s->v_scale[L] : 0, s->kv_int8, s->n_ctx, s->T, op->n_heads, op->n_kv,
                               op->head_dim, s->pos0, op->scale, op->softcap, op->window, op->y[0]);
}

static int logits(const pt_plan_op *op, const pt_step *s) {
    const int64_t n = s->n_logits, V = op->W[0]->rows;
    const pt_tensor *W[1] = {op->W[0]};
    float *y[1] = {s->logits};
    int rc = pt_matmul_n_locked(W, y, 1, op->x, n, 0);
    if (rc) return rc;
    if (op->b)
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < V; i++) s->logits[t * V + i] += op->b[i];
    if (op->scale != 1.0f)
        for (int64_t i = 0; i < n * V; i++) s->logits[i] *= op->scale;
    if (op->softcap > 0.0f) pt_softcap(s->logits, n * V, op->softcap);
    return 0;
}

static int run_op(const pt_plan_op *op, const pt_step *s) {
    const int64_t T = s->T;
    switch (op->kind) {
    case PT_OP_EMBED:
        return embed(op, s);
    case PT_OP_NORM:
        return pt_norm(op->mode, op->x, op->w, op->b, op->eps, T * op->rows, op->width, op->w_rows, op->y[0]);
    case PT_OP_MATMUL: {
        const pt_tensor *W[3] = {op->W[0], op->W[1], op->W[2]};
        float *y[3] = {op->y[0], op->y[1], op->y[2]};
        const int n = op->W[2] ? 3 : op->W[1] ? 2 : 1;
        return pt_matmul_n_locked(W, y, n, op->x, T, op->mode != 0);
    }
    case PT_OP_BIAS_ACT:
        return pt_bias_act(op->y[0], op->b, T * op->rows, op->width, op->mode);
    case PT_OP_GLU:
        return pt_glu(op->mode, op->x, op->x2, T * op->rows * op->width, op->y[0]);
    case PT_OP_AXPY:
        pt_axpy(op->y[0], op->alpha, op->x, T * op->width);
        return 0;
    case PT_OP_ROPE_STORE:
        return rope_store(op, s);
    case PT_OP_ATTENTION:
        return attention(op, s);
    case PT_OP_LAST_NORM:
        if (s->n_logits == 0) return 0;
        return pt_norm(op->mode, op->x + (T - s->n_logits) * op->width, op->w, op->b, op->eps, s->n_logits,
                       op->width, op->w_rows, op->y[0]);
    case PT_OP_LOGITS:
        return s->n_logits ? logits(op, s) : 0;
    default:
        return -1;
    }
}

int pt_plan_run(const pt_plan_op *ops, int64_t n_ops, pt_step *step) {
    step->failed_op = -1;
    if (!ops || n_ops < 0 || step->T < 0 || step->n_logits < 0 || step->n_logits > step->T ||
        (step->n_logits && !step->logits))
        return -1;
    int rc = 0;
    pt_lock();
    for (int64_t i = 0; i < n_ops && rc == 0; i++) {
        rc = run_op(&ops[i], step);
        if (rc) step->failed_op = i;
    }
    pt_unlock();
    return rc;
}
