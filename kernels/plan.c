/* The forward plan: a whole forward step (decode or prefill, any number of tokens T) in one call.
 *
 * Python (petit/models/blocks/plan.py) describes the model once, at load, as a flat array of op records (pt_plan_op,
 * api.h): each names its kind, its weights, norms and biases, and the scratch buffers it reads and writes, with
 * widths per token, so one plan serves every T. A step (pt_step) carries what changes from call to call: one or more
 * independent sequences (pt_seq), each with its tokens, first position, RoPE tables, KV cache and how many logits it
 * wants, and where the logits go. The sequences' tokens are stacked (rows = the sum of their T): matmuls, norms and
 * activations run over all rows at once, so decoding n sequences reads each weight once; the ops that read positions
 * or a cache run per sequence over its own rows. One sequence is just a batch of one. pt_plan_run takes the
 * kernels' lock once and runs the ops in order, each through the same driver the per-op calls use (so a step gives
 * bit for bit the logits of the per-op path, petit/models/blocks/decoder.py's oracle), with no Python in between. A driver
 * may still hand its op to the thread pool (a matmul's rows, attention's heads); with the workers spinning between
 * ops that hand-off costs about 0.1-0.2 us, as much as a barrier in one parallel region (ggml's design) would.
 *
 * The ops. T is the step's tokens (all its sequences'), "rows" is rows per token: an op runs over T * rows rows of
 * `width` values (a per-head q/k norm has rows = heads, width = head_dim). Ops marked * run once per sequence, over
 * its rows, its positions and its cache. Unused fields are zero / NULL.
 *
 *   kind         reads                                   writes           fields
 *   EMBED        step ids, W[0] (embedding), b (learned  y[0] [T][width]  scale (x embedding scale, 1: none),
 *                positions [w_rows][width] or NULL: *)                    w_rows; error -1: a bad id, nothing else
 *   NORM         x, w, b (NULL: ones / zeros)            y[0] (may be x)  mode (0 RMS, 1 Layer), eps, rows, width,
 *                                                                         w_rows (w / b rows, r uses r % w_rows)
 *   MATMUL       x [T][W[0]->cols], W[0..2] (W[1], W[2]  y[0..2]          mode 1: add into y[0] (one matrix only)
 *                NULL: fewer), one quantization of x
 *   BIAS_ACT     y[0], b (NULL: none)                    y[0]             mode (activation, api.h), rows, width
 *   GLU          x (gate), x2 (up)                       y[0]             mode (activation), rows, width
 *   AXPY         y[0], x                                 y[0] += alpha x  alpha, width
 *   PARAM_ACT    y[0]                                    y[0]             mode (kind, pt_param_act), p, rows, width
 *   ROPE *       y[0] q, y[1] k, seq rope[slot]          both rotated     as ROPE_STORE, slot >= 0 (no store)
 *   ROPE_STORE * y[0] q, y[1] k, y[2] v, seq rope[slot]  y[0] rotated,    layer (cache slot), slot (-1: NoPE),
 *                                                        cache rows       mode (interleaved), n_heads, n_kv,
 *                                                                         head_dim, rot_dim
 *   ATTENTION *  x (q), the sequence's cache of `layer`  y[0]             n_heads, n_kv, head_dim, scale, softcap,
 *                                                                         window, extra (sinks, chunk,
 *                                                                         temperature; zeros: none)
 *   LAST_NORM *  the last n_logits rows of each          y[0] [n][width], as NORM (rows 1; mode -1: copied, no
 *                                                                         norm); n: the sequences'
 *                sequence's rows of x                    packed in order  n_logits together; skipped when n is 0
 *   LOGITS       x [n][W[0]->cols], W[0], b (NULL: no    step->logits     scale (1: none), softcap (0: none);
 *                bias)                                                    skipped when n is 0
 *   MOE          x [T][hidden], moe (router, experts,    y[0] [T][hidden] mode 1: add into y[0]; kernels/moe.c
 *                shared expert, scratch)
 *   HEADS        x [T][n_heads][x_stride], Wh[n_heads]  y[0] [T][n_heads]   x_off, y_stride, y_off; scratch x2, y[1]
 *                                                        [y_stride]         (kernels/mla.c)
 *   COPY         x [T * rows][x_stride]                  y[0] [T * rows]     width, x_off, y_stride, y_off
 *                                                        [y_stride]
 *   MAMBA *      x [T][hidden], mamba; the sequence's    y[0] [T][hidden]   mode 1: add into y[0] (kernels/ssm.c)
 *                state in cache slot `cache_slot`
 *   ALTUP_PREDICT x the streams (altup's layout)          y[0] the           altup (kernels/altup.c, Gemma 3n)
 *                                                        predictions, y[1]
 *                                                        [T][hidden] the
 *                                                        active one
 *   ALTUP_CORRECT x the predictions, x2 [T][hidden] the  y[0] the streams,  altup
 *                layer's output                          y[1] [T][hidden]
 *                                                        the scaled active
 *   PLE          step ids, W[0] the per-layer table,     y[0] + l y_stride   rows (layers), width (per layer), w,
 *                x [T][rows * width] the projection,     [T][width] per     eps, scale (projection), alpha (table),
 *                x2 [rows * width] scratch               layer              p[0] (the sum's)
 *   GEMMA_ROWS   y[0] [T][width], x                      y[0]               mode (pt_gemma_rows), scale, streams,
 *                                                                         x_stride
 *   DSA_INDEX *  x (indexer q [T][n_heads][head_dim]),   sel [T][window],   x_stride (cache row), x_off (the key
 *                x2 (head weights [T][n_heads]), the     n_sel [T]          in it), scale, alpha (the weights'
 *                cache of `layer`                                           scale), window (top_k); kernels/dsa.c
 *   DSA_ATTENTION * x (q [T][n_heads][x_stride]), the    y[0] [T][n_heads]  head_dim (attended width), scale,
 *                cache of `layer`, sel, n_sel, w sinks   [x_stride]         window (top_k)
 *                (NULL; HY-V4's, issue 36 fam36m)
 *   MOA_GATE     x (router logits [T][n_heads]),         y[0]               n_heads (experts), mode (top k), n_kv,
 *                y[0] (att [T][n_kv][n_heads][head_dim])                    head_dim; kernels/moa.c (jetmoe group)
 *   DeepSeek-V4 (the dsv4 group, kernels/dsv4_plan.c; a layer's cache slot read as regions of off * n_ctx floats):
 *   HC_PRE       x streams [T][streams][width], w fn, b  y[0] [T][width],   streams, width, window (Sinkhorn
 *                base, x2 scale [3]                      y[1] post, y[2]     iterations), eps, alpha (norm eps),
 *                                                        comb               mode 1: the hyper head (y[0] only);
 *                                                                           mode 2: HY-V4's (fam36m), scale
 *                                                                           the post magnitude
 *   HC_POST      x streams, x2 the block's output        y[0] new streams   streams, width; y[1] post, y[2] comb
 *   DSV4_POOL *  x raw kv, x2 raw gate [T][Wc], b ape,   raw rows, closed   window (m), head_dim (d), mode
 *                w the entry norm, seq rope[slot]        windows' entries   (overlap), rot_dim, eps, x_off / y_off
 *                                                                           (raw / entry regions)
 *   DSV4_ATTN *  x q [T][n_heads][hd], x2 kv [T][hd], w  y[0] [T][n_heads]  head_dim, rot_dim, window, scale, mode
 *                sinks, sel / n_sel (CSA) or NULL         [hd], keys stored (m, 0: window only), n_kv (top_k), y_off
 *   DSV4_INDEX * x iq [T][n_heads][d], x2 weights        sel, n_sel         head_dim, rot_dim, window (m), scale,
 *                [T][n_heads], the entries at y_off                         alpha (weights' scale), n_kv (top_k)
 *   HASH_ROUTE   step ids, sel the table [w_rows][width] n_sel [T][width]   w_rows, width (top_k)
 *   Qwen4-Exp (issue 36, the q4exp group; kernels/hc.c):
 *   Q4X_MIX      x normed streams hn [T][streams][width], y[0] [T][width]    streams, width
 *                x2 gates g (same), y[1] the injection  mean sigmoid(g) hn,
 *                logits [T][streams] or NULL            y[1] = 2 sigmoid(y[1])
 *   PLE_NGRAM *  step ids, ngram (the table's shards)    y[0] [T][(n - 1)   cache_slot (the k region: the last
 *                                                        heads dim]         ids)
 *   PLE_MIX *    x normed keys [T][n][D], x2 values      y[0] += gated      cache_slot (the v region: the conv
 *                [T][D], y[1] normed streams, ple        values + silu conv state)
 *   QSA_INDEX *  x iq [T][n_heads][head_dim] (normed,    the index slot's   cache_slot (the index slot), n_heads,
 *                roped), x2 raw keys [T][head_dim], w     rows, sel [T]      head_dim, x_stride (block), window
 *                the key norm, seq rope[slot]           [window + 1],      (top_k blocks), rot_dim, eps
 *                                                       n_sel [T]
 *   SmallDoge (issue 36, fam36d; kernels/doge.c):
 *   DOGE_DT      x dt_proj's z [T][n_kv], w A [n_kv]      y[1] k's slot x_off n_heads, n_kv, head_dim, x_off (the
 *                                                        exp(A softplus z),   slot), alpha (q's value)
 *                                                        y[0] q's slot alpha
 *   SCALE_COLS   y[0] [T][width], w [width]              y[0] *= w          width
 *   MiniMax-M3 (issue 36, fam36i; kernels/mm3.c):
 *   MM3_INDEX *  x iq [T][n_heads][head_dim], x2 ik      the index slot's   cache_slot (the index slot), n_heads
 *                [T][head_dim]                           rows, sel [T]      (indexer heads), head_dim, x_stride
 *                                                        [n_heads][window], (block), x_off (local blocks), window
 *                                                        n_sel [T][n_heads] (top_k)
 *   MM3_ATTENTION * x q [T][n_heads][head_dim], the      y[0] [T][n_heads]  n_heads, n_kv, head_dim, scale, mode
 *                cache of `layer`, sel, n_sel            [head_dim]         (indexer heads), x_stride (block),
 *                                                                           window (top_k)
 *   Laguna, ZAYA (issue 36, fam36g; kernels/fam36g.c):
 *   HEAD_GATE    x gates [T][n_heads], y[0] [T][n_heads]  y[0] *= act(x)     mode (0 sigmoid, 1 softplus), n_heads,
 *                [width]                                                    width (values a gate)
 *   CCA *        y[0] q, y[1] k, y[2] v (raw), cca, the   the three in place cca (n_heads, n_kv, head_dim),
 *                sequence's state in cache slot                             cache_slot
 *                `cache_slot` (k: q | k rows, v: values)
 *   Inkling (issue 36, fam36l; kernels/fam36l.c):
 *   REL_ATTN *   x q [T][n_heads][hd], x2 relative states    y[0] [T][n_heads]  rel (the heads, window, scale, the
 *                [T][n_heads][d_rel] (NULL: none), w sinks   [hd]               bias bank, the log scaling)
 *                [T][n_heads] (NULL: none), the cache of
 *                `layer`
 *   SCONV *      y[0] [T][channels], x2 per-token taps       y[0] in place      sconv (its taps, out_scale, heads,
 *                [T][heads][kernel] or NULL, the state in                       where its state is), cache_slot
 *                cache slot `cache_slot`
 *   BLOCK_RES    x sources (streams of them, x_stride        y[0] + i y_stride  streams, x_stride, n_heads (queries),
 *                apart) [T][width], x2 [T][width], w         [T][width]         width, eps, y_stride
 *                queries [n_heads][width]
 *
 * A new block kind (routed experts, a state-space scan, linear attention) is a new PT_OP_ value in api.h, a case
 * below that calls its driver (written lock-free, as pt_matmul_n_locked), a row in this table, and the lines in
 * plan.py that emit it; state it carries across steps travels in pt_seq beside the KV cache. */
#include "internal.h"

void pt_softcap(float *y, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) {
        const float t = tanhf(y[i] / cap);
        y[i] = t * cap;
    }
}

/* a step as the ops see it: the step, and its row totals */
typedef struct {
    pt_step *s;
    int64_t T;           /* the sequences' tokens together: the rows of every op that runs over all of them */
    int64_t n_logits;    /* the logit rows of all of them */
} run_ctx;

static int embed(const pt_plan_op *op, const run_ctx *c) {
    if (pt_get_rows(op->W[0], c->s->ids, c->T, op->y[0]) != 0) return -1;
    const int64_t n = c->T * op->width;
    if (op->scale != 1.0f)
        for (int64_t i = 0; i < n; i++) op->y[0][i] *= op->scale;
    if (!op->b) return 0;
    float *y = op->y[0];
    for (int64_t i = 0; i < c->s->n_seqs; i++) {
        const pt_seq *q = &c->s->seqs[i];
        if (q->pos0 + q->T > op->w_rows) {
            c->s->failed_seq = i;
            return -2;
        }
        const float *pos = op->b + q->pos0 * op->width;
        for (int64_t j = 0; j < q->T * op->width; j++) y[j] += pos[j];
        y += q->T * op->width;
    }
    return 0;
}

/* the rows a sequence owns of a buffer with `width` values per token */
static float *rows_of(float *buf, int64_t off, int64_t width) { return buf + off * width; }

static int rope_store(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const float *cos = 0, *sin = 0;
    int64_t n_pos = 0, rot = 0;
    if (op->slot >= 0) {
        const pt_rope_table *t = &q->rope[op->slot];
        cos = t->cos; sin = t->sin; n_pos = t->n_pos; rot = op->rot_dim;
    }
    const int L = op->layer;
    const int64_t wq = op->n_heads * op->head_dim, wkv = op->n_kv * op->head_dim;
    float *qs = rows_of(op->y[0], off, wq), *k = rows_of(op->y[1], off, wkv), *v = rows_of(op->y[2], off, wkv);
    if (q->kv_int8)
        return pt_rope_store_q8(qs, k, v, q->T, op->n_heads, op->n_kv, op->head_dim, rot, q->pos0, cos, sin, n_pos,
                                op->mode, (int8_t *)q->k[L], q->k_scale[L], (int8_t *)q->v[L], q->v_scale[L],
                                q->n_ctx);
    return pt_rope_store(qs, k, v, q->T, op->n_heads, op->n_kv, op->head_dim, rot, q->pos0, cos, sin, n_pos,
                         op->mode, (float *)q->k[L], (float *)q->v[L], q->n_ctx);
}

/* RoPE alone over one sequence's rows of q (y[0]) and k (y[1]), in place */
static int rope_only(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const pt_rope_table *t = &q->rope[op->slot];
    return pt_rope(rows_of(op->y[0], off, op->n_heads * op->head_dim), rows_of(op->y[1], off, op->n_kv * op->head_dim),
                   q->T, op->n_heads, op->n_kv, op->head_dim, op->rot_dim, q->pos0, t->cos, t->sin, t->n_pos, op->mode);
}

/* a Mamba mixer over one sequence's rows, its recurrent state in the cache slots of `layer` (k: conv, v: ssm) */
static int mamba(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const int L = op->cache_slot;
    const int64_t D = op->mamba->hidden;
    return pt_mamba_locked(op->mamba, rows_of(op->x, off, D), q->T, (float *)q->k[L], (float *)q->v[L],
                           rows_of(op->y[0], off, D), op->mode != 0);
}

/* DeepSeek Sparse Attention's two ops (kernels/dsa.c) over one sequence's rows and its cache of `layer` */
static int dsa(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const int L = op->layer;
    const float *scales = q->kv_int8 ? q->k_scale[L] : 0;
    int32_t *sel = op->sel + off * op->window, *n_sel = op->n_sel + off;
    if (op->kind == PT_OP_DSA_INDEX)
        return pt_dsa_index_locked(rows_of(op->x, off, op->n_heads * op->head_dim), rows_of(op->x2, off, op->n_heads),
                                   q->k[L], scales, q->kv_int8, op->x_stride, op->x_off, q->n_ctx, q->T, q->pos0,
                                   op->n_heads, op->head_dim, op->scale, op->alpha, op->window, sel, n_sel);
    return pt_dsa_attention_locked(rows_of(op->x, off, op->n_heads * op->x_stride), q->k[L], scales, q->kv_int8,
                                   op->x_stride, q->n_ctx, q->T, q->pos0, op->n_heads, op->head_dim, op->scale, sel,
                                   n_sel, op->window, op->w, rows_of(op->y[0], off, op->n_heads * op->x_stride));
}

/* MiniMax-M3's two ops (kernels/mm3.c) over one sequence's rows: its indexer's keys in cache slot `cache_slot`, its
 * attention over the cache of `layer` (issue 36, fam36i) */
static int mm3(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const int64_t n_idx = op->kind == PT_OP_MM3_INDEX ? op->n_heads : op->mode;
    int32_t *sel = op->sel + off * n_idx * op->window, *n_sel = op->n_sel + off * n_idx;
    if (op->kind == PT_OP_MM3_INDEX) {
        const int S = op->cache_slot;
        return pt_mm3_index_locked(rows_of(op->x, off, n_idx * op->head_dim), rows_of(op->x2, off, op->head_dim),
                                   q->k[S], q->kv_int8 ? q->k_scale[S] : 0, q->kv_int8, q->n_ctx, q->T, q->pos0,
                                   n_idx, op->head_dim, op->x_stride, op->window, op->x_off, sel, n_sel);
    }
    const int L = op->layer;
    const int64_t wq = op->n_heads * op->head_dim;
    return pt_mm3_attention_locked(rows_of(op->x, off, wq), q->k[L], q->kv_int8 ? q->k_scale[L] : 0, q->v[L],
                                   q->kv_int8 ? q->v_scale[L] : 0, q->kv_int8, q->n_ctx, q->T, q->pos0, op->n_heads,
                                   op->n_kv, op->head_dim, op->scale, n_idx, op->x_stride, op->window, sel, n_sel,
                                   rows_of(op->y[0], off, wq));
}

/* DeepSeek-V4's ops over one sequence's rows and its cache slot of `layer`, read as regions (dsv4_plan.c) */
static int dsv4(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    if (q->kv_int8) return -1;
    float *base = (float *)q->k[op->layer];
    const pt_rope_table *t = &q->rope[op->slot];
    const int64_t n = q->n_ctx;
    if (op->kind == PT_OP_DSV4_POOL) {
        const int64_t W = op->mode ? 2 * op->head_dim : op->head_dim;
        return pt_dsv4_pool_step(rows_of(op->x, off, W), rows_of(op->x2, off, W), op->b, op->w, op->eps, q->T,
                                 q->pos0, op->window, op->head_dim, op->mode, op->rot_dim, t, base + op->x_off * n,
                                 base + (op->x_off + W) * n, base + op->y_off * n, n);
    }
    if (op->kind == PT_OP_DSV4_INDEX)
        return pt_dsv4_index_step(rows_of(op->x, off, op->n_heads * op->head_dim), rows_of(op->x2, off, op->n_heads),
                                  q->T, q->pos0, op->n_heads, op->head_dim, op->rot_dim, op->window, op->scale,
                                  op->alpha, op->n_kv, t, base + op->y_off * n, n, op->sel + off * op->n_kv,
                                  op->n_sel + off);
    return pt_dsv4_attend_step(rows_of(op->x, off, op->n_heads * op->head_dim), rows_of(op->x2, off, op->head_dim),
                               op->w, q->T, q->pos0, op->n_heads, op->head_dim, op->rot_dim, op->window, op->scale,
                               op->mode, op->sel ? op->sel + off * op->n_kv : 0, op->sel ? op->n_sel + off : 0,
                               op->n_kv, t, base, op->mode ? base + op->y_off * n : 0, n,
                               rows_of(op->y[0], off, op->n_heads * op->head_dim));
}

static int attention(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    const int L = op->layer;
    const int64_t wq = op->n_heads * op->head_dim;
    return pt_attention_locked(rows_of(op->x, off, wq), q->k[L], q->kv_int8 ? q->k_scale[L] : 0, q->v[L],
                               q->kv_int8 ? q->v_scale[L] : 0, q->kv_int8, q->n_ctx, q->T, op->n_heads, op->n_kv,
                               op->head_dim, q->pos0, op->scale, op->softcap, op->window, &op->extra,
                               rows_of(op->y[0], off, wq));
}

/* the final norm of each sequence's last n_logits rows, packed one sequence after another into y[0] */
static int last_norm(const pt_plan_op *op, const pt_seq *q, int64_t off, int64_t out) {
    if (q->n_logits == 0) return 0;
    if (op->mode < 0) {         /* no final norm (OPT-350m's post-LN): the rows as they are */
        memcpy(rows_of(op->y[0], out, op->width), rows_of(op->x, off + q->T - q->n_logits, op->width),
               (size_t)(q->n_logits * op->width) * sizeof(float));
        return 0;
    }
    return pt_norm(op->mode, rows_of(op->x, off + q->T - q->n_logits, op->width), op->w, op->b, op->eps,
                   q->n_logits, op->width, op->w_rows, rows_of(op->y[0], out, op->width));
}

/* ZAYA's CCA projection over one sequence's rows, its state in the cache slot `cache_slot` (issue 36, fam36g) */
static int cca(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    if (q->kv_int8) return -1;          /* a hybrid's cache: float32 */
    const int L = op->cache_slot;
    const int64_t wq = op->cca->n_heads * op->cca->head_dim, wkv = op->cca->n_kv * op->cca->head_dim;
    return pt_cca_step(op->cca, rows_of(op->y[0], off, wq), rows_of(op->y[1], off, wkv), rows_of(op->y[2], off, wkv),
                       q->T, q->pos0, (float *)q->k[L], (float *)q->v[L]);
}

/* Inkling's attention and short convolutions over one sequence's rows (issue 36, fam36l) */
static int fam36l(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    if (q->kv_int8) return -1;          /* a hybrid's cache: float32 */
    if (op->kind == PT_OP_SCONV) {
        const pt_sconv *c = op->sconv;
        const int L = op->cache_slot;
        float *state = (float *)(c->in_v ? q->v[L] : q->k[L]) + c->off;
        return pt_sconv_step(c, rows_of(op->y[0], off, c->channels), op->x2 ? op->x2 + off * c->heads * c->kernel : 0,
                             q->T, q->pos0, state);
    }
    const pt_relattn *a = op->rel;
    const int L = op->layer;
    const int64_t wq = a->n_heads * a->head_dim;
    return pt_rel_attention_locked(a, rows_of(op->x, off, wq), op->x2 ? op->x2 + off * a->n_heads * a->d_rel : 0,
                                   op->w ? op->w + off * a->n_heads : 0, (const float *)q->k[L],
                                   (const float *)q->v[L], q->n_ctx, q->T, q->pos0, rows_of(op->y[0], off, wq));
}

/* Qwen4-Exp's QSA indexer over one sequence's rows (issue 36, the q4exp group): its keys in the index slot */
static int qsa(const pt_plan_op *op, const pt_seq *q, int64_t off) {
    if (q->kv_int8) return -1;          /* a hybrid's cache: float32 */
    const pt_rope_table *t = &q->rope[op->slot];
    const int64_t k = op->window + 1;
    return pt_qsa_index(rows_of(op->x, off, op->n_heads * op->head_dim), rows_of(op->x2, off, op->head_dim),
                        (float *)q->k[op->cache_slot], op->w, op->eps, q->n_ctx, q->T, q->pos0, op->n_heads,
                        op->head_dim, op->x_stride, op->window, op->rot_dim, t->cos, t->sin, t->n_pos,
                        op->sel + off * k, op->n_sel + off);
}

/* Qwen4-Exp's n-gram PLE over one sequence's rows (issue 36, the q4exp group): its last ids in the k region of
 * cache slot `cache_slot`, its conv state in the v region */
static int ple(const pt_plan_op *op, const run_ctx *c, const pt_seq *q, int64_t off) {
    if (q->kv_int8) return -1;          /* a hybrid's cache: float32 */
    const int S = op->cache_slot;
    if (op->kind == PT_OP_PLE_NGRAM) {
        const pt_ngram *g = op->ngram;
        return pt_ngram_embed(g, c->s->ids + off, q->T, (float *)q->k[S], q->pos0,
                              rows_of(op->y[0], off, (g->n - 1) * g->heads * g->dim));
    }
    const pt_plemix *p = op->ple;
    const int64_t W = p->n * p->D;
    return pt_ple_mix(p, rows_of(op->x, off, W), rows_of(op->x2, off, p->D), rows_of(op->y[1], off, W), q->T,
                      q->pos0, (float *)q->v[S], rows_of(op->y[0], off, W));
}

/* the ops that read positions or a cache run once per sequence, over its rows; failed_seq names the one that failed */
static int per_sequence(const pt_plan_op *op, const run_ctx *c) {
    int64_t off = 0, out = 0;
    for (int64_t i = 0; i < c->s->n_seqs; i++) {
        const pt_seq *q = &c->s->seqs[i];
        int rc = op->kind == PT_OP_ROPE_STORE ? rope_store(op, q, off)
               : op->kind == PT_OP_ATTENTION  ? attention(op, q, off)
               : op->kind == PT_OP_MAMBA      ? mamba(op, q, off)
               : op->kind == PT_OP_ROPE       ? rope_only(op, q, off)
               : op->kind == PT_OP_CCA        ? cca(op, q, off)
               : op->kind == PT_OP_REL_ATTN || op->kind == PT_OP_SCONV ? fam36l(op, q, off)
               : op->kind == PT_OP_DSA_INDEX || op->kind == PT_OP_DSA_ATTENTION ? dsa(op, q, off)
               : op->kind == PT_OP_MM3_INDEX || op->kind == PT_OP_MM3_ATTENTION ? mm3(op, q, off)
               : op->kind == PT_OP_QSA_INDEX  ? qsa(op, q, off)
               : op->kind == PT_OP_PLE_NGRAM || op->kind == PT_OP_PLE_MIX ? ple(op, c, q, off)
               : op->kind == PT_OP_DSV4_POOL || op->kind == PT_OP_DSV4_ATTN || op->kind == PT_OP_DSV4_INDEX
                                              ? dsv4(op, q, off)
                                              : last_norm(op, q, off, out);
        if (rc) {
            c->s->failed_seq = i;
            return rc;
        }
        off += q->T;
        out += q->n_logits;
    }
    return 0;
}

/* the LM head over every sequence's normed last rows at once: the head's matrix is read once for the batch */
static int logits(const pt_plan_op *op, const run_ctx *c) {
    const int64_t n = c->n_logits, V = op->W[0]->rows;
    float *out = c->s->logits;
    const pt_tensor *W[1] = {op->W[0]};
    float *y[1] = {out};
    int rc = pt_matmul_n_locked(W, y, 1, op->x, n, 0);
    if (rc) return rc;
    if (op->b)
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < V; i++) out[t * V + i] += op->b[i];
    if (op->scale != 1.0f)
        for (int64_t i = 0; i < n * V; i++) out[i] *= op->scale;
    if (op->softcap > 0.0f) pt_softcap(out, n * V, op->softcap);
    return 0;
}

static int run_op(const pt_plan_op *op, const run_ctx *c) {
    const int64_t T = c->T;
    switch (op->kind) {
    case PT_OP_EMBED:
        return embed(op, c);
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
    case PT_OP_PARAM_ACT:
        return pt_param_act(op->mode, op->y[0], T * op->rows * op->width, op->p);
    case PT_OP_AXPY:
        pt_axpy(op->y[0], op->alpha, op->x, T * op->width);
        return 0;
    case PT_OP_ROPE_STORE:
    case PT_OP_ROPE:
    case PT_OP_ATTENTION:
    case PT_OP_MAMBA:
    case PT_OP_DSA_INDEX:
    case PT_OP_DSA_ATTENTION:
    case PT_OP_DSV4_POOL:
    case PT_OP_DSV4_ATTN:
    case PT_OP_DSV4_INDEX:
    case PT_OP_MM3_INDEX:
    case PT_OP_MM3_ATTENTION:
    case PT_OP_QSA_INDEX:
    case PT_OP_PLE_NGRAM:
    case PT_OP_PLE_MIX:
    case PT_OP_CCA:
    case PT_OP_REL_ATTN:
    case PT_OP_SCONV:
        return per_sequence(op, c);
    case PT_OP_LAST_NORM:
        return c->n_logits ? per_sequence(op, c) : 0;
    case PT_OP_LOGITS:
        return c->n_logits ? logits(op, c) : 0;
    case PT_OP_MOE:
        return pt_moe_locked(op->moe, op->x, T, op->y[0], op->mode != 0);
    case PT_OP_HEADS:
        return pt_heads_locked(op->Wh, op->n_heads, op->x, op->x_stride, op->x_off, op->y[0], op->y_stride, op->y_off,
                               T, op->x2, op->y[1]);
    case PT_OP_COPY:
        return pt_copy_rows(op->x, op->x_stride, op->x_off, op->y[0], op->y_stride, op->y_off, T * op->rows,
                            op->width);
    /* issue 30, the gemma group: Gemma 3n (kernels/altup.c) */
    case PT_OP_ALTUP_PREDICT:
        return pt_altup_predict(op->altup, op->x, T, op->y[0], op->y[1]);
    case PT_OP_ALTUP_CORRECT:
        return pt_altup_correct(op->altup, op->x, op->x2, T, op->y[0], op->y[1]);
    case PT_OP_PLE:
        return pt_ple(op->W[0], c->s->ids, T, op->x, op->rows, op->width, op->w, op->eps, op->scale, op->alpha,
                      op->p[0], op->x2, op->y[0], op->y_stride);
    case PT_OP_GEMMA_ROWS:
        return pt_gemma_rows(op->mode, op->y[0], op->x, T, op->width, op->scale, op->streams, op->x_stride);
    /* issue 30, the jetmoe group: JetMoE's attention experts weighed (kernels/moa.c); top k in mode */
    case PT_OP_MOA_GATE:
        return pt_moa_gate(op->x, T, op->n_heads, op->mode, op->n_kv, op->head_dim, op->y[0]);
    /* issue 30, the dsv4 group: DeepSeek-V4's hyper-connections (kernels/hc.c) and hash routing */
    case PT_OP_HC_PRE:
        if (op->mode == 2)          /* issue 36, fam36m: HY-V4's, post x `scale` (hc_magnitude), no stream mix */
            return pt_hc_ind_pre(op->x, op->w, op->b, op->x2, T, op->streams, op->width, op->eps, op->alpha,
                                 op->scale, op->y[0], op->y[1], op->y[2]);
        return pt_hc_pre(op->x, op->w, op->b, op->x2, T, op->streams, op->width, op->window, op->eps, op->alpha,
                         op->mode, op->y[0], op->y[1], op->y[2]);
    case PT_OP_HC_POST:
        return pt_hc_post(op->x, op->x2, op->y[1], op->y[2], T, op->streams, op->width, op->y[0]);
    case PT_OP_Q4X_MIX:         /* issue 36, the q4exp group: Qwen4-Exp's gated residual */
        return pt_q4x_mix(op->x, op->x2, T, op->streams, op->width, op->y[0], op->y[1]);
    case PT_OP_HASH_ROUTE:
        return pt_hash_route(c->s->ids, T, op->sel, op->w_rows, op->width, op->n_sel);
    /* issue 36, the fam36d group: SmallDoge's key bias slot and residual scales (kernels/doge.c) */
    case PT_OP_DOGE_DT:
        return pt_doge_dt(op->x, op->w, T, op->n_heads, op->n_kv, op->head_dim, op->x_off, op->alpha, op->y[0],
                          op->y[1]);
    case PT_OP_SCALE_COLS:
        return pt_scale_cols(op->y[0], op->w, T, op->width);
    /* issue 36, the fam36g group: Laguna's attention output gate (kernels/fam36g.c) */
    case PT_OP_HEAD_GATE:
        return pt_head_gate(op->mode, op->x, op->y[0], T, op->n_heads, op->width);
    /* issue 36, the fam36l group: Inkling 2's attention residuals (kernels/fam36l.c) */
    case PT_OP_BLOCK_RES:
        return pt_block_res(op->x, op->streams, op->x_stride, op->x2, op->w, op->n_heads, T, op->width, op->eps,
                            op->y[0], op->y_stride);
    default:
        return -1;
    }
}

int pt_plan_run(const pt_plan_op *ops, int64_t n_ops, pt_step *step) {
    step->failed_op = -1;
    step->failed_seq = -1;
    if (!ops || n_ops < 0 || !step->seqs || step->n_seqs < 1) return -1;
    run_ctx c = {step, 0, 0};
    for (int64_t i = 0; i < step->n_seqs; i++) {
        const pt_seq *q = &step->seqs[i];
        if (q->T < 1 || q->n_logits < 0 || q->n_logits > q->T) {
            step->failed_seq = i;
            return -1;
        }
        c.T += q->T;
        c.n_logits += q->n_logits;
    }
    if (c.n_logits && !step->logits) return -1;
    int rc = 0;
    pt_lock();
    for (int64_t i = 0; i < n_ops && rc == 0; i++) {
        rc = run_op(&ops[i], &c);
        if (rc) step->failed_op = i;
    }
    pt_unlock();
    return rc;
}
