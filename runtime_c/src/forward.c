/*
 * forward.c — the transformer step for llama and qwen2, prefill and decode.
 *
 * One function, er_forward, reads top to bottom like the model: embed, then per
 * layer attention and feed-forward with pre-RMSNorm and residuals, then the
 * final norm and the vocabulary projection. m tokens are processed together
 * (m = 1 is decode, m > 1 a prefill chunk): every weight matrix is streamed
 * once per chunk, not once per token. All buffers come from the arena.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "model.h"

double er_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- parallel matrix products -------------------------------------------- */

/* Parallel operations claim their work in chunks, so they run under either
 * kind of dispatch (threadpool.h). Normally the dynamic one: a worker the OS
 * has not scheduled yet misses the operation instead of stalling it. While
 * the trace records, every thread takes part (a barrier), so the trace
 * shows how work spreads over all threads rather than whichever happened to
 * be scheduled: on a loaded machine, or for a model this small, the caller
 * alone would often finish before any worker woke up. */
static void dispatch(er_model *md, er_task_fn fn, void *ctx) {
    if (atomic_load_explicit(&md->trace.on, memory_order_relaxed))
        er_pool_run(&md->pool, fn, ctx);
    else
        er_pool_run_dynamic(&md->pool, fn, ctx);
}

/* Most contiguous chunk ranges a product is cut into (mm_task): one per
 * thread up to this; beyond it threads share ranges. */
#define MM_RANGES 8

/* Up to three products that run in one pool dispatch (Q/K/V, gate/up). */
typedef struct mm_item {
    const er_weight *w;
    const void *x;          /* prepared activations for w's act kind */
    size_t x_stride;
    float *y;
    size_t y_stride;
} mm_item;

typedef struct mm_task {
    const er_kernels *k;
    mm_item it[3];
    int chunk_rows[3];      /* weight rows per claimed chunk, per item */
    int first_chunk[4];     /* item i owns chunks [first_chunk[i], first_chunk[i+1]) */
    int n_items, m;
    int m_one;              /* er_matmul_args.m_one (a batched step), else 0 */
    /* The chunks [0, total) cut into n_ranges contiguous ranges, range r
     * owned by thread r: each thread claims from its own range first and
     * only then from the others', so normally every thread streams one
     * contiguous stretch of weights (110M decode at 2 threads: +15-24%
     * against threads taking interleaved 64 KiB chunks, each a fresh start
     * for the prefetchers), while a worker that starts late or never still
     * has its range done by the others. */
    int n_ranges;
    int range_end[MM_RANGES];
    /* next chunk to claim in each range, a cache line each: side by side,
     * each claim (~1,000 per 110M decode step) would take the line from the
     * threads claiming beside it. No change measured on this 2-vCPU VM
     * (2 threads, 541 against 543 tok/s); more cores share more claims. */
    struct {
        _Alignas(64) atomic_int v;
    } next[MM_RANGES];
    er_trace *tr;
    int op, layer;          /* for the workers' trace events */
} mm_task;

/* Weight rows per chunk: ~64 KiB of weights, so a chunk stays in L2 while
 * every activation tile of a prefill passes over it, in multiples of 4 rows
 * (the SIMD tiles' height) or of a repacked layout's row group; but at
 * least 3 chunks per thread and item, so a thread that starts late or is
 * preempted leaves work for the others. Up to 4 activation rows (decode,
 * a batched decode step) are one tile in most kernels, and where a kernel
 * takes them in pairs (SMMLA), 256 KiB still fits the L2 of every core we
 * target; chunks are 256 KiB then, because each kernel call prepares its
 * activation blocks again (sums, scales) for its own chunk. Measured on
 * the 110M ffn_down (2048 wide: 64-row chunks), 4 rows from L3 (avx512vnni
 * Q4_0): the product took 10-15% longer in 64 KiB chunks. */
static int chunk_rows_for(const er_kernels *k, const er_weight *w, int nth, int m) {
    const int budget = m <= 4 ? 262144 : 65536;
    int by_bytes = (int)(budget / (w->row_bytes ? w->row_bytes : 1));
    int by_share = (w->n_out + 3 * nth - 1) / (3 * nth);
    int r = by_bytes < by_share ? by_bytes : by_share;
    /* a repacked matrix is cut only between its interleaved row groups */
    const int unit = w->packed && k->repack_rows[w->wtype] > 4 ? k->repack_rows[w->wtype] : 4;
    r = (r + unit - 1) / unit * unit;
    return r < unit ? unit : r;
}

/* Output columns [r0, r1) of item it's product, for m activation rows. */
static void product_rows(const er_kernels *k, const mm_item *it, int m, int m_one, int r0, int r1) {
    const er_weight *w = it->w;
    er_matmul_args a = {
        .w = w->packed ? w->packed : w->data, .w_row_bytes = w->row_bytes, .x = it->x, .x_stride = it->x_stride,
        .y = it->y, .y_stride = it->y_stride, .n = w->n_in, .m = m, .r0 = r0, .r1 = r1, .m_one = m_one,
    };
    (w->packed ? k->matmul_repacked : k->matmul)[w->wtype](&a);
}

/* Whoever joins claims chunks, its own range's first, until none are left
 * (threadpool.h). Workers (ith >= 1) trace their share; thread 0's share is
 * inside the event the caller records for the whole operation, so each
 * thread's events never overlap and stay in time order. */
static void mm_worker(void *ctx, int ith, int nth) {
    (void)nth;
    mm_task *t = ctx;
    uint64_t t0 = ith ? er_trace_begin(t->tr) : 0;
    int rows = 0;
    for (int k = 0; k < t->n_ranges; k++) {
        const int r = (ith + k) % t->n_ranges;
        for (int c, i = 0; (c = er_pool_claim(&t->next[r].v)) < t->range_end[r];) {
            while (c >= t->first_chunk[i + 1]) i++;
            const mm_item *it = &t->it[i];
            const int r0 = (c - t->first_chunk[i]) * t->chunk_rows[i];
            const int r1 = r0 + t->chunk_rows[i] < it->w->n_out ? r0 + t->chunk_rows[i] : it->w->n_out;
            product_rows(t->k, it, t->m, t->m_one, r0, r1);
            rows += r1 - r0;
        }
    }
    er_trace_end(t->tr, t0, t->op, t->layer, ith, t->m, rows, t->it[0].w->n_in);
}

/* ---- row-wise operations ------------------------------------------------- */

/*
 * The work between the products goes row by row: norms, RoPE, K/V stores,
 * SiLU, residual adds and the products' activation quantization. A prefill
 * chunk's rows are taken by every thread that joins, a row per claim: on
 * the caller alone the workers waited through all of it (2-thread prefill
 * of 256 tokens: ~7% of the time). A decode step's one row, and anything
 * under ER_ROWS_SPLIT_MIN rows, runs on the caller: a dispatch would cost
 * more than it shares (from 8 rows, a 12-token prompt's prefill at 2
 * threads ran 1,690 -> 1,628 tok/s; a residual add of 768 floats is ~50 ns
 * a row against a dispatch's ~1-2 us).
 */
#define ER_ROWS_SPLIT_MIN 32

typedef struct rows_task {
    void (*row)(const struct rows_task *t, int b);
    er_model *md;
    er_session *s;
    er_session *const *ss;  /* a batched step's sessions (er_forward_batch), row b's at md->act.rows[b] */
    const er_layer *L;
    int op, layer;          /* the operation the workers trace their rows as (0: none, the residual adds) */
    int m, n;               /* rows, elements per row */
    const float *src, *w;   /* a row op's input (row b at src + b * n) and weights */
    float *dst;             /* its output, or the row it updates in place */
    void (*quantize)(const float *, void *, int);
    uint8_t *q;             /* quantized rows, stride bytes apart */
    size_t stride;
    atomic_int next;
} rows_task;

/* Workers trace their share (rows done); thread 0's is inside the caller's
 * event for the operation, as for the products. */
static void rows_worker(void *ctx, int ith, int nth) {
    (void)nth;
    rows_task *t = ctx;
    er_trace *tr = &t->md->trace;
    const uint64_t t0 = ith && t->op ? er_trace_begin(tr) : 0;
    int rows = 0;
    for (int b; (b = er_pool_claim(&t->next)) < t->m; rows++) t->row(t, b);
    er_trace_end(tr, t0, t->op, t->layer, ith, t->m, rows, t->n);
}

static void each_row(er_model *md, rows_task *t) {
    if (t->m >= ER_ROWS_SPLIT_MIN && md->pool.n_threads > 1) {
        atomic_init(&t->next, 0);
        dispatch(md, rows_worker, t);
    } else {
        for (int b = 0; b < t->m; b++) t->row(t, b);
    }
}

static void quantize_row(const rows_task *t, int b) {
    t->quantize(t->src + (size_t)b * t->n, t->q + (size_t)b * t->stride, t->n);
}

static void rmsnorm_row(const rows_task *t, int b) {
    t->md->k->rmsnorm(t->dst + (size_t)b * t->n, t->src + (size_t)b * t->n, t->w, t->n, t->md->hp.rms_eps);
}

/* dst += src (the residual stream) */
static void add_row(const rows_task *t, int b) {
    t->md->k->add(t->dst + (size_t)b * t->n, t->src + (size_t)b * t->n, t->n);
}

/* dst = silu(dst) * src */
static void silu_mul_row(const rows_task *t, int b) {
    t->md->k->silu_mul(t->dst + (size_t)b * t->n, t->src + (size_t)b * t->n, t->n);
}

/* dst = gelu_tanh(dst) * src (GeGLU) */
static void gelu_mul_row(const rows_task *t, int b) {
    er_kernels_family(t->md->k).gelu_mul(t->dst + (size_t)b * t->n, t->src + (size_t)b * t->n, t->n);
}

/* n_heads heads of Q or K at x, of the step's row b: the per-head RMSNorm
 * where the family has one (norm: head_dim weights), then RoPE with the
 * layer's angles, over the first n_rot dimensions of each head (all of them
 * but in Phi-3), or none in a NoPE layer. */
static void rope_heads(const er_model *md, const er_layer *L, float *x, int n_heads, const float *norm, int b) {
    const er_dims *d = &md->d;
    const int hd = d->head_dim;
    if (norm)
        for (int h = 0; h < n_heads; h++) md->k->rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, norm, hd, md->hp.rms_eps);
    if (!L->rope) return;
    const float *cs = (L->rope == 2 ? md->act.rope_cs_swa : md->act.rope_cs) + (size_t)b * hd;
    if (d->n_rot == hd) {
        md->k->rope_cs(x, n_heads, hd, cs, md->rope_neox);
    } else {
        for (int h = 0; h < n_heads; h++) md->k->rope_cs(x + (size_t)h * hd, 1, d->n_rot, cs, md->rope_neox);
    }
}

/* Q/K/V biases where the model has them, then (per-head norms and) RoPE on Q and K */
static void rope_row(const rows_task *t, int b) {
    const er_model *md = t->md;
    const er_dims *d = &md->d;
    const er_layer *L = t->L;
    const int qd = d->n_head * d->head_dim, kvd = (int)d->kv_row;
    float *q = md->act.q + (size_t)b * qd, *k = md->act.k + (size_t)b * kvd;
    if (L->bq) {
        md->k->add(q, L->bq, qd);
        md->k->add(k, L->bk, kvd);
        md->k->add(md->act.v + (size_t)b * kvd, L->bv, kvd);
    }
    rope_heads(md, L, q, d->n_head, L->q_norm, b);
    rope_heads(md, L, k, d->n_head_kv, L->k_norm, b);
}

/* First cached position query position p sees: 0, or the start of the
 * layer's sliding window (p and the window - 1 positions before it). */
static inline int att_lo(const er_layer *L, int p) { return L->window && p + 1 > L->window ? p + 1 - L->window : 0; }

/* K/V heads [h0, h1) of one position's K and V rows (k, v: the whole rows)
 * into the cache of `layer` at position pos, a piece per cache block. */
static void store_kv(const er_model *md, const er_session *s, int layer, int pos, const float *k, const float *v,
                     int h0, int h1) {
    const er_dims *d = &md->d;
    const er_layer *L = &md->layers[layer];
    /* a sliding-window ring's positions go to two rows (model.h, er_kv_layer_rows) */
    for (int copy = 0; copy < (L->ring ? 2 : 1); copy++) {
        const int row = er_kv_slot(L->ring, pos) + copy * L->ring;
        for (int h = h0, next; h < h1; h = next) {
            size_t stride;
            const size_t at = er_kv_col_rows(d, L->kv_rows, h, row, &stride);
            next = (h / d->kv_blk + 1) * d->kv_blk;
            if (next > h1) next = h1;
            const size_t c = (size_t)h * d->head_dim;
            const int n = (next - h) * d->head_dim;
            if (d->kv_type == ER_KV_F16) {
                md->k->f32_to_f16(k + c, (er_f16 *)(void *)er_kv_base(s, L, 0, 2) + at, n);
                md->k->f32_to_f16(v + c, (er_f16 *)(void *)er_kv_base(s, L, 1, 2) + at, n);
            } else {
                memcpy((float *)(void *)er_kv_base(s, L, 0, 4) + at, k + c, (size_t)n * sizeof(float));
                memcpy((float *)(void *)er_kv_base(s, L, 1, 4) + at, v + c, (size_t)n * sizeof(float));
            }
        }
    }
}

/* row b's K and V into the cache at position pos + b */
static void store_kv_row(const rows_task *t, int b) {
    const er_model *md = t->md;
    const size_t kvd = md->d.kv_row;
    store_kv(md, t->s, t->layer, t->s->pos + b, md->act.k + b * kvd, md->act.v + b * kvd, 0, md->d.n_head_kv);
}

/* a batched step's row b: K and V into its own session's cache at its own position */
static void store_kv_batch_row(const rows_task *t, int b) {
    const er_model *md = t->md;
    const size_t kvd = md->d.kv_row;
    const er_batch_row r = md->act.rows[b];
    store_kv(md, t->ss[r.sess], t->layer, r.pos, md->act.k + b * kvd, md->act.v + b * kvd, 0, md->d.n_head_kv);
}

/*
 * Returns activations x (m rows of n floats) in the format weight w needs:
 * the floats themselves, or rows quantized into the xq scratch. Each
 * quantized act kind has its own region of xq (Q8_0 rows, then Q8_K rows,
 * each region 64-byte aligned; plan.c sizes act_row_max for all of them), so
 * weights of different kinds sharing one x — a Q4_K_M file's Q4_K wq next to
 * its Q6_K wv — each get their format. `cached` has bit k set once kind k's
 * region holds this x, so Q, K and V (or gate and up) quantize once per kind.
 */
static const void *prepare(er_model *md, int op, int layer, const er_weight *w, const float *x, int m, int n,
                           size_t *stride, unsigned *cached) {
    const int kind = md->k->act_kind[w->wtype];
    if (kind == ER_ACT_F32) {
        *stride = (size_t)n * sizeof(float);
        return x;
    }
    size_t off = 0;
    for (int k = ER_ACT_F32 + 1; k < kind; k++) off += ((size_t)m * er_act_row_bytes(k, n) + 63) / 64 * 64;
    uint8_t *dst = (uint8_t *)md->act.xq + off;
    *stride = er_act_row_bytes(kind, n);
    if (!(*cached & (1u << kind))) {
        void (*quantize)(const float *, void *, int) =
            kind == ER_ACT_Q8_K ? md->k->quantize_row_q8_k : md->k->quantize_row_q8_0;
        each_row(md, &(rows_task){.row = quantize_row, .md = md, .op = op, .layer = layer, .m = m, .n = n, .src = x,
                                  .quantize = quantize, .q = dst, .stride = *stride});
        *cached |= 1u << kind;
    }
    return dst;
}

/* y[m][w->n_out] = x[m][w->n_in] . W^T for up to three weights sharing x;
 * traced as operation `op` of `layer`. */
static void matmul_shared(er_model *md, int op, int layer, const float *x, int m, const er_weight *const *w,
                          float *const *y, int n) {
    uint64_t t0 = er_trace_begin(&md->trace);
    mm_task t = {.k = md->k, .n_items = n, .m = m, .m_one = md->act.m_one, .tr = &md->trace, .op = op,
                 .layer = layer};
    int n_out = 0;
    unsigned cached = 0;
    for (int i = 0; i < n; i++) {
        t.it[i].w = w[i];
        t.it[i].x = prepare(md, op, layer, w[i], x, m, w[i]->n_in, &t.it[i].x_stride, &cached);
        t.it[i].y = y[i];
        t.it[i].y_stride = (size_t)w[i]->n_out;
        t.chunk_rows[i] = chunk_rows_for(md->k, w[i], md->pool.n_threads, m);
        t.first_chunk[i + 1] = t.first_chunk[i] + (w[i]->n_out + t.chunk_rows[i] - 1) / t.chunk_rows[i];
        n_out += w[i]->n_out;
    }
    const int total = t.first_chunk[n];
    t.n_ranges = md->pool.n_threads < MM_RANGES ? md->pool.n_threads : MM_RANGES;
    for (int r = 0; r < t.n_ranges; r++) {
        atomic_init(&t.next[r].v, (int)((int64_t)total * r / t.n_ranges));
        t.range_end[r] = (int)((int64_t)total * (r + 1) / t.n_ranges);
    }
    dispatch(md, mm_worker, &t);
    er_trace_end(&md->trace, t0, op, layer, 0, m, n_out, w[0]->n_in);
}

static void matmul1(er_model *md, int op, int layer, const float *x, int m, const er_weight *w, float *y) {
    matmul_shared(md, op, layer, x, m, (const er_weight *const[]){w}, (float *const[]){y}, 1);
}

/* ---- attention ------------------------------------------------------------ */

typedef struct att_task {
    er_model *md;
    er_session *s;
    int layer, m, pos0;
    int r0;                 /* the step's row of the session's first query (a batched step), else 0 */
    int tokens;             /* tokens per work item (er_att_tokens), or 0: one query per item */
    int heads;              /* or, for a decode step, K/V heads per item (er_att_heads) */
    int rows;               /* or, for a decode step split in two (er_att_split), K rows per item */
    atomic_int next;        /* next item to claim: (token block, K/V head), (token, head) or a K/V head range */
} att_task;

/* Item i of a decode step's K/V head ranges (heads per range): session s's
 * query at position pos0, row r0 of act.q, into the same row of act.att.
 * A range is one cache block (heads == d->kv_blk). Returns the queries done. */
static int heads_item(er_model *md, er_session *s, const er_layer *L, int pos0, int r0, int heads, int i,
                      float *scratch) {
    const er_dims *d = &md->d;
    const int hd = d->head_dim, group = d->n_head / d->n_head_kv;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    const int k0 = i * heads, nk = d->n_head_kv - k0 < heads ? d->n_head_kv - k0 : heads;
    const int lo = att_lo(L, pos0);
    size_t stride;
    const size_t off = er_kv_col_rows(d, L->kv_rows, k0, er_kv_slot(L->ring, lo), &stride) * elem;
    const size_t at = (size_t)r0 * d->n_head * hd + (size_t)k0 * group * hd;
    md->k->attention_heads(md->act.att + at, md->act.q + at, pos0 + 1 - lo, er_kv_base(s, L, 0, elem) + off,
                           er_kv_base(s, L, 1, elem) + off, d->kv_type, stride, nk, group, hd, d->attn_scale,
                           scratch);
    return nk * group;
}

/* An item is one K/V head against a block of tokens: every query head of the
 * head's group, for each token (causal: token b sees every cached position
 * up to and including its own). Items go in token-block order, K/V heads in
 * order within, so the one-query kernel's prefetch of the next head's
 * columns (decode without grouping) still reads what comes next. When that
 * makes fewer items than threads (a decode step of a model with 2 K/V
 * heads on 4 cores), an item is one query: (token, head), heads in order.
 * A decode step on one thread, or with ER_ATT_HEADS_MIN K/V heads or more
 * per thread, takes ranges of K/V heads instead, one per thread, each read
 * row by row across its heads.
 * Every way, every query's result is the same (kernels.h). */
static void att_worker(void *ctx, int ith, int nth) {
    att_task *t = ctx;
    er_model *md = t->md;
    uint64_t t_op = ith ? er_trace_begin(&md->trace) : 0;
    const er_dims *d = &md->d;
    const int hd = d->head_dim, group = d->n_head / d->n_head_kv;
    const int n_items = t->heads    ? (d->n_head_kv + t->heads - 1) / t->heads
                        : t->tokens ? (t->m + t->tokens - 1) / t->tokens * d->n_head_kv
                                    : t->m * d->n_head;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    const er_layer *L = &md->layers[t->layer];
    const uint8_t *k_base = er_kv_base(t->s, L, 0, elem), *v_base = er_kv_base(t->s, L, 1, elem);
    /* per-thread scratch, indexed by ith: each thread's own */
    float *scratch = md->act.scores + (size_t)ith * er_att_scratch(d);
    const float scale = d->attn_scale;
    /* the session's rows of a batched step */
    float *const aq = md->act.q + (size_t)t->r0 * d->n_head * hd;
    float *const aa = md->act.att + (size_t)t->r0 * d->n_head * hd;
    (void)nth;
    float *out[ER_ATT_MAX_QUERIES];
    const float *q[ER_ATT_MAX_QUERIES];
    int n_kv[ER_ATT_MAX_QUERIES];
    int done = 0;
    for (int i; (i = er_pool_claim(&t->next)) < n_items;) {
        if (t->heads) {
            done += heads_item(md, t->s, L, t->pos0, t->r0, t->heads, i, scratch);
            continue;
        }
        int b0, b1, h0, h1; /* tokens [b0, b1) x query heads [h0, h1), all of one K/V head */
        if (t->tokens) {
            b0 = i / d->n_head_kv * t->tokens;
            b1 = b0 + t->tokens < t->m ? b0 + t->tokens : t->m;
            h0 = i % d->n_head_kv * group;
            h1 = h0 + group;
        } else {
            b0 = i / d->n_head, b1 = b0 + 1;
            h0 = i % d->n_head, h1 = h0 + 1;
        }
        size_t stride;
        const size_t head_off = er_kv_col_rows(d, L->kv_rows, h0 / group, 0, &stride) * elem;
        const uint8_t *kc = k_base + head_off, *vc = v_base + head_off;
        int nq = 0;
        for (int b = b0; b < b1; b++) {
            /* a sliding window starts each token's positions at its own
             * first one: its queries go out in a call of their own */
            const int lo = att_lo(L, t->pos0 + b);
            if (L->window) {
                const size_t row = (size_t)er_kv_slot(L->ring, lo);
                kc = k_base + head_off + row * stride * elem;
                vc = v_base + head_off + row * stride * elem;
            }
            for (int h = h0; h < h1; h++) {
                const size_t at = (size_t)b * d->n_head * hd + (size_t)h * hd;
                q[nq] = aq + at;
                out[nq] = aa + at;
                n_kv[nq] = t->pos0 + b + 1 - lo;
                /* flushed when full, and after the last (of the token, in a window) */
                if (++nq == ER_ATT_MAX_QUERIES || (h == h1 - 1 && (b == b1 - 1 || L->window))) {
                    md->k->attention_multi(out, q, n_kv, nq, kc, vc, d->kv_type, stride, hd, scale, scratch);
                    done += nq;
                    nq = 0;
                }
            }
        }
    }
    er_trace_end(&md->trace, t_op, ER_OP_ATTENTION, t->layer, ith, t->m, done, t->pos0 + t->m);
}

/* A decode step split over the threads (er_att_split), as two dispatches.
 * With rows set, items are ranges of K rows, each scored for every query
 * head into the threads' scratch taken as one buffer. Then (rows 0) a range
 * of K/V heads per thread: their queries' softmax and V sums. Ranges read
 * more of each row at a time than single heads taken as they come: 2
 * threads decoded 348-436 tok/s against 319-408 (4 K/V heads, 1,536
 * positions, alternating runs). Scores are the same floats whichever
 * thread computes which rows, and each output's sum runs in one thread in
 * position order, so every result is what attention_heads gives on one
 * thread (kernels.h). Taken only where er_att_heads is 0, so the cache is
 * one block (model.h, er_kv_col): plain rows of kv_row. */
static void att_split_worker(void *ctx, int ith, int nth) {
    att_task *t = ctx;
    er_model *md = t->md;
    uint64_t t_op = ith ? er_trace_begin(&md->trace) : 0;
    const er_dims *d = &md->d;
    const er_layer *L = &md->layers[t->layer];
    const int lo = att_lo(L, t->pos0);
    const int hd = d->head_dim, group = d->n_head / d->n_head_kv, n_kv = t->pos0 + 1 - lo;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    const size_t layer_off = (size_t)er_kv_slot(L->ring, lo) * d->kv_row * elem;
    float *sc = md->act.scores;
    const size_t q_at = (size_t)t->r0 * d->n_head * hd;
    (void)nth;
    int done = 0;
    if (t->rows) {
        const uint8_t *kc = er_kv_base(t->s, L, 0, elem) + layer_off;
        const float scale = d->attn_scale;
        for (int i; (i = er_pool_claim(&t->next)) < (n_kv + t->rows - 1) / t->rows;) {
            const int t0 = i * t->rows, t1 = n_kv - t0 < t->rows ? n_kv : t0 + t->rows;
            md->k->attention_scores(sc, md->act.q + q_at, n_kv, t0, t1, kc, d->kv_type, d->kv_row, d->n_head_kv, group, hd,
                                    scale);
        }
    } else {
        /* Items are ranges of K/V heads, one per thread. With fewer K/V heads
         * than threads (Gemma 3's one) a head's query heads go in pieces
         * instead, each a call of its own over the whole of V: whole heads
         * left every thread past the heads' count idle (Gemma-3-270M Q8_0 at
         * 2,048 positions, 2 threads, 1.10-1.31 ms of attention a step, as
         * much as 1 thread; in pieces 0.79-0.83). A query's sums are the same
         * whichever queries share its call (kernels.h). */
        const uint8_t *vc = er_kv_base(t->s, L, 1, elem) + layer_off;
        const int nth = md->pool.n_threads, per = (d->n_head_kv + nth - 1) / nth;
        const int want = (nth + d->n_head_kv - 1) / d->n_head_kv; /* pieces per head; 1 where per > 1 */
        const int qper = (group + want - 1) / want, pieces = (group + qper - 1) / qper;
        for (int i; (i = er_pool_claim(&t->next)) < (d->n_head_kv + per - 1) / per * pieces;) {
            const int h = i / pieces * per, nk = d->n_head_kv - h < per ? d->n_head_kv - h : per;
            const int j = i % pieces * qper, nq = group - j < qper ? group - j : qper;
            const size_t qh = (size_t)h * group + (size_t)j;
            md->k->attention_sums(md->act.att + q_at + qh * hd, sc + qh * n_kv, n_kv, vc + (size_t)h * hd * elem,
                                  d->kv_type, d->kv_row, nk, nq, hd);
            done += nk * nq;
        }
    }
    er_trace_end(&md->trace, t_op, ER_OP_ATTENTION, t->layer, ith, t->m, done, n_kv);
}

/* Attention of session s's m queries at positions [pos0, pos0 + m), rows
 * [r0, r0 + m) of act.q, over its cache (the step's K and V already
 * stored), into the same rows of act.att. A batched step calls it per run of
 * a session's rows; every way of cutting the queries into work items gives
 * each query the same bits (kernels.h). */
static void attend(er_model *md, er_session *s, const er_layer *L, int l, int m, int r0, int pos0) {
    const er_dims *d = &md->d;
    const uint64_t t0 = er_trace_begin(&md->trace);
    att_task at = {.md = md, .s = s, .layer = l, .m = m, .pos0 = pos0, .r0 = r0, .tokens = er_att_tokens(d)};
    if (m == 1) at.heads = er_att_heads(d, md->pool.n_threads);
    if (m == 1) at.rows = er_att_split(d, md->pool.n_threads, pos0 + 1 - att_lo(L, pos0));
    if (!at.heads && (m + at.tokens - 1) / at.tokens * d->n_head_kv < md->pool.n_threads) at.tokens = 0;
    atomic_init(&at.next, 0);
    if (at.rows) {
        dispatch(md, att_split_worker, &at);
        at.rows = 0;
        atomic_store(&at.next, 0);
        dispatch(md, att_split_worker, &at);
    } else {
        dispatch(md, att_worker, &at);
    }
    er_trace_end(&md->trace, t0, ER_OP_ATTENTION, l, 0, m, d->n_head, pos0 + m);
}

/*
 * A batched step's one-token sessions whose attention alone would take K/V
 * head ranges (attend with m = 1 and at.heads set): all their items
 * in one dispatch, session after session, where one attend each took a
 * dispatch apiece (4 sessions at 2 threads: 4 dispatches a layer, each a
 * wake-up and a wait). Each item is the call attend's worker makes for it
 * (heads_item), so every query's bits are those it gets alone.
 */
typedef struct heads_batch_task {
    er_model *md;
    er_session *const *ss;
    const er_batch_row *rows;
    const int *r;           /* the step's rows of the sessions taken */
    int n, per, heads, layer;
    atomic_int next;
} heads_batch_task;

static void heads_batch_worker(void *ctx, int ith, int nth) {
    heads_batch_task *t = ctx;
    er_model *md = t->md;
    const uint64_t t_op = ith ? er_trace_begin(&md->trace) : 0;
    const er_layer *L = &md->layers[t->layer];
    float *scratch = md->act.scores + (size_t)ith * er_att_scratch(&md->d);
    (void)nth;
    int done = 0;
    for (int i; (i = er_pool_claim(&t->next)) < t->n * t->per;) {
        const int b = t->r[i / t->per];
        done += heads_item(md, t->ss[t->rows[b].sess], L, t->rows[b].pos, b, t->heads, i % t->per, scratch);
    }
    er_trace_end(&md->trace, t_op, ER_OP_ATTENTION, t->layer, ith, t->n, done, 0);
}

/* the sessions one dispatch takes (the caller's stack holds their rows) */
#define HEADS_BATCH_MAX 32

static void attend_heads_batch(er_model *md, heads_batch_task *hb) {
    const uint64_t t0 = er_trace_begin(&md->trace);
    atomic_init(&hb->next, 0);
    dispatch(md, heads_batch_worker, hb);
    er_trace_end(&md->trace, t0, ER_OP_ATTENTION, hb->layer, 0, hb->n, md->d.n_head, 0);
}

/* Q/K/V products, RoPE, the K/V store and attention over the whole of
 * xb (m rows), one operation after another: prefill, and decode steps that
 * attention_block below does not take. */
static void attention(er_model *md, er_session *s, const er_layer *L, int l, int m) {
    const er_dims *d = &md->d;
    er_trace *tr = &md->trace;
    const int qd = d->n_head * d->head_dim, kvd = (int)d->kv_row;
    uint64_t t0;
    matmul_shared(md, ER_OP_QKV, l, md->act.xb, m, (const er_weight *const[]){&L->wq, &L->wk, &L->wv},
                  (float *const[]){md->act.q, md->act.k, md->act.v}, 3);
    t0 = er_trace_begin(tr);
    each_row(md, &(rows_task){.row = rope_row, .md = md, .op = ER_OP_ROPE, .layer = l, .m = m, .n = qd + kvd,
                              .L = L});
    er_trace_end(tr, t0, ER_OP_ROPE, l, 0, m, qd + kvd, qd + kvd);
    t0 = er_trace_begin(tr);
    each_row(md, &(rows_task){.row = store_kv_row, .md = md, .op = ER_OP_KV_STORE, .layer = l, .m = m,
                              .n = 2 * kvd, .s = s});
    er_trace_end(tr, t0, ER_OP_KV_STORE, l, 0, m, 2 * kvd, 2 * kvd);
    attend(md, s, L, l, m, 0, s->pos);
}

/* ---- a decode step's attention block in one dispatch ---------------------- */

/*
 * Where a decode step takes K/V head ranges (er_att_heads), everything from
 * the Q/K/V products to attention stays inside a range: its heads come from
 * their own rows of wq, wk and wv, RoPE and the cache store work head by
 * head, and attention reads only the cache columns of the range. So each
 * item runs all four for its heads, in one dispatch, where the step took
 * two (products, attention) with RoPE and the store on the caller between
 * them while the workers waited. Each range's cache columns are also
 * written by the thread that reads them (at 2 threads the ranges keep
 * their threads from step to step: the caller claims first). Results are
 * the separate operations' bit for bit: the same kernels on the same rows.
 * Traced per thread and item: qkv, rope, kv_store and attention events of
 * the item's share, the caller's among them (there is no whole-op event).
 */
typedef struct block_task {
    att_task at;            /* md, s, layer, pos0, heads (K/V heads per item), next */
    const er_layer *L;
    mm_item it[3];          /* wq, wk, wv with their prepared input and outputs (act.q, act.k, act.v) */
} block_task;

/* wq, wk and wv can be cut at every head: a repacked matrix only between its row groups */
static int block_fits(const er_model *md, const er_layer *L) {
    const er_weight *w[3] = {&L->wq, &L->wk, &L->wv};
    for (int i = 0; i < 3; i++)
        if (w[i]->packed && md->d.head_dim % md->k->repack_rows[w[i]->wtype]) return 0;
    return 1;
}

static void block_worker(void *ctx, int ith, int nth) {
    block_task *t = ctx;
    er_model *md = t->at.md;
    const er_kernels *k = md->k;
    const er_layer *L = t->L;
    const er_dims *d = &md->d;
    er_trace *tr = &md->trace;
    const int hd = d->head_dim, group = d->n_head / d->n_head_kv, pos = t->at.pos0, l = t->at.layer;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    float *scratch = md->act.scores + (size_t)ith * er_att_scratch(d);
    (void)nth;
    for (int i; (i = er_pool_claim(&t->at.next)) * t->at.heads < d->n_head_kv;) {
        const int h0 = i * t->at.heads, nk = d->n_head_kv - h0 < t->at.heads ? d->n_head_kv - h0 : t->at.heads;
        const int q0 = h0 * group * hd, nq = nk * group * hd, c0 = h0 * hd, nc = nk * hd;
        float *q = md->act.q + q0, *kr = md->act.k + c0, *vr = md->act.v + c0;
        uint64_t t0 = er_trace_begin(tr);
        product_rows(k, &t->it[0], 1, 0, q0, q0 + nq);
        product_rows(k, &t->it[1], 1, 0, c0, c0 + nc);
        product_rows(k, &t->it[2], 1, 0, c0, c0 + nc);
        er_trace_end(tr, t0, ER_OP_QKV, l, ith, 1, nq + 2 * nc, d->n_embd);
        t0 = er_trace_begin(tr);
        if (L->bq) {
            k->add(q, L->bq + q0, nq);
            k->add(kr, L->bk + c0, nc);
            k->add(vr, L->bv + c0, nc);
        }
        rope_heads(md, L, q, nk * group, L->q_norm, 0);
        rope_heads(md, L, kr, nk, L->k_norm, 0);
        er_trace_end(tr, t0, ER_OP_ROPE, l, ith, 1, nq + nc, nq + nc);
        t0 = er_trace_begin(tr);
        store_kv(md, t->at.s, l, pos, md->act.k, md->act.v, h0, h0 + nk);
        er_trace_end(tr, t0, ER_OP_KV_STORE, l, ith, 1, 2 * nc, 2 * nc);
        t0 = er_trace_begin(tr);
        size_t stride;
        const int lo = att_lo(L, pos);
        const size_t off = er_kv_col_rows(d, L->kv_rows, h0, er_kv_slot(L->ring, lo), &stride) * elem;
        k->attention_heads(md->act.att + q0, q, pos + 1 - lo, er_kv_base(t->at.s, L, 0, elem) + off,
                           er_kv_base(t->at.s, L, 1, elem) + off, d->kv_type, stride, nk, group, hd,
                           d->attn_scale, scratch);
        er_trace_end(tr, t0, ER_OP_ATTENTION, l, ith, 1, nk * group, pos + 1);
    }
}

/* The Q/K/V input (xb) prepared for the three weights, then the block. The
 * quantization is traced with the norm before it: attn_norm's event, begun
 * at t0, ends here. */
static void attention_block(er_model *md, er_session *s, const er_layer *L, int layer, const float *xb, int heads,
                            uint64_t t0) {
    block_task t = {.at = {.md = md, .s = s, .layer = layer, .m = 1, .pos0 = s->pos, .heads = heads}, .L = L};
    const er_weight *w[3] = {&L->wq, &L->wk, &L->wv};
    float *y[3] = {md->act.q, md->act.k, md->act.v};
    unsigned cached = 0;
    for (int i = 0; i < 3; i++) {
        t.it[i].w = w[i];
        t.it[i].x = prepare(md, ER_OP_QKV, layer, w[i], xb, 1, w[i]->n_in, &t.it[i].x_stride, &cached);
        t.it[i].y = y[i];
        t.it[i].y_stride = (size_t)w[i]->n_out;
    }
    er_trace_end(&md->trace, t0, ER_OP_ATTN_NORM, layer, 0, 1, md->d.n_embd, md->d.n_embd);
    atomic_init(&t.at.next, 0);
    dispatch(md, block_worker, &t);
}

/* ---- the step ------------------------------------------------------------- */

/* Row b's RoPE angles for position pos; gemma3's local layers have a base
 * of their own, and its linear scaling is the global layers' only. */
static void rope_angles_row(er_model *md, int b, int pos) {
    const er_dims *d = &md->d;
    const er_hparams *hp = &md->hp;
    float *cs = md->act.rope_cs + (size_t)b * d->head_dim;
    if (d->n_rot == d->head_dim && hp->rope_scale == 1.0f && !md->rope_freqs)
        er_rope_angles(cs, d->head_dim, pos, hp->rope_freq_base);
    else
        er_rope_angles_scaled(cs, d->n_rot, pos, hp->rope_freq_base, hp->rope_scale, md->rope_freqs);
    /* LongRoPE's attention factor scales cos and sin (transformers: cos * attention_scaling) */
    if (hp->rope_attn_factor != 1.0f)
        for (int i = 0; i < d->n_rot; i++) cs[i] *= hp->rope_attn_factor;
    if (d->traits & ER_T_SWA6)
        er_rope_angles(md->act.rope_cs_swa + (size_t)b * d->head_dim, d->head_dim, pos, hp->rope_freq_base_swa);
}

/* Each operation is bracketed by er_trace_begin/end: when tracing is off
 * that is a relaxed load and a branch per operation, ~15 per layer. Shapes
 * recorded: [rows, outputs, inputs]; attention [rows, heads, positions]. */
int er_forward(er_session *s, const int32_t *ids, int m, float *logits_all) {
    er_model *md = s->model;
    if (md->cuda) return er_cuda_forward(s, ids, m, logits_all);
    const er_kernels *k = md->k;
    const er_dims *d = &md->d;
    er_trace *tr = &md->trace;
    const int E = d->n_embd, F = d->n_ff;
    float *x = md->act.x, *xb = md->act.xb, *xb2 = md->act.xb2;
    uint64_t t0;

    t0 = er_trace_begin(tr);
    for (int b = 0; b < m; b++)
        k->dequant_row[md->tok_embd.wtype]((const uint8_t *)md->tok_embd.data + (size_t)ids[b] * md->tok_embd.row_bytes,
                                           x + (size_t)b * E, E);
    /* Gemma scales the embeddings by sqrt(n_embd), rounded to a float as transformers does */
    if (d->traits & ER_T_EMBD_SCALE)
        for (size_t i = 0, n = (size_t)m * E; i < n; i++) x[i] *= sqrtf((float)E);
    /* each position's RoPE angles, once for all layers (timed with the embedding) */
    const er_hparams *hp = &md->hp;
    for (int b = 0; b < m; b++) rope_angles_row(md, b, s->pos + b);
    er_trace_end(tr, t0, ER_OP_EMBED, -1, 0, m, E, 0);

    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &md->layers[l];

        /* attention block (or LFM2's short convolution) */
        t0 = er_trace_begin(tr);
        each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .op = ER_OP_ATTN_NORM, .layer = l, .m = m, .n = E,
                                  .src = x, .w = L->attn_norm, .dst = xb});
        const int heads = m == 1 && !L->conv && block_fits(md, L) ? er_att_heads(d, md->pool.n_threads) : 0;
        if (L->conv) {
            er_trace_end(tr, t0, ER_OP_ATTN_NORM, l, 0, m, E, E);
            matmul1(md, ER_OP_CONV_IN, l, xb, m, &L->conv_in, md->act.conv);
            t0 = er_trace_begin(tr);
            const er_family_kernels fk = er_kernels_family(k);
            float *ring = s->conv_ring + (size_t)l * (size_t)d->conv_l * (size_t)E;
            for (int b = 0; b < m; b++) /* in order: the ring holds the last conv_l positions */
                fk.shortconv(xb + (size_t)b * E, md->act.conv + (size_t)b * 3 * E, ring, L->conv_w, E, d->conv_l,
                             s->pos + b);
            er_trace_end(tr, t0, ER_OP_SHORTCONV, l, 0, m, E, 3 * E);
            matmul1(md, ER_OP_CONV_OUT, l, xb, m, &L->conv_out, xb2);
        } else if (heads) {
            attention_block(md, s, L, l, xb, heads, t0);
        } else {
            er_trace_end(tr, t0, ER_OP_ATTN_NORM, l, 0, m, E, E);
            attention(md, s, L, l, m);
        }
        if (!L->conv) matmul1(md, ER_OP_ATTN_OUT, l, md->act.att, m, &L->wo, xb2);
        if (L->post_attn_norm)
            each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = xb2,
                                      .w = L->post_attn_norm, .dst = xb2});
        each_row(md, &(rows_task){.row = add_row, .md = md, .m = m, .n = E, .src = xb2, .dst = x});

        /* feed-forward block (SwiGLU, or GeGLU) */
        t0 = er_trace_begin(tr);
        each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .op = ER_OP_FFN_NORM, .layer = l, .m = m, .n = E,
                                  .src = x, .w = L->ffn_norm, .dst = xb});
        er_trace_end(tr, t0, ER_OP_FFN_NORM, l, 0, m, E, E);
        matmul_shared(md, ER_OP_FFN_GATE_UP, l, xb, m, (const er_weight *const[]){&L->w_gate, &L->w_up},
                      (float *const[]){md->act.hb, md->act.hb2}, 2);
        t0 = er_trace_begin(tr);
        const int gelu = (d->traits & ER_T_GELU) != 0, gate_op = gelu ? ER_OP_GELU_MUL : ER_OP_SILU_MUL;
        each_row(md, &(rows_task){.row = gelu ? gelu_mul_row : silu_mul_row, .md = md, .op = gate_op, .layer = l,
                                  .m = m, .n = F, .src = md->act.hb2, .dst = md->act.hb});
        er_trace_end(tr, t0, gate_op, l, 0, m, F, 2 * F);
        matmul1(md, ER_OP_FFN_DOWN, l, md->act.hb, m, &L->w_down, xb2);
        if (L->post_ffn_norm)
            each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = xb2,
                                      .w = L->post_ffn_norm, .dst = xb2});
        each_row(md, &(rows_task){.row = add_row, .md = md, .m = m, .n = E, .src = xb2, .dst = x});
    }

    /* Only the rows whose logits someone will read go through the (large)
     * vocabulary projection: all of them for er_decode_all, else the last. */
    int first = logits_all ? 0 : m - 1, rows = m - first;
    t0 = er_trace_begin(tr);
    each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .op = ER_OP_OUTPUT_NORM, .layer = -1, .m = rows, .n = E,
                              .src = x + (size_t)first * E, .w = md->output_norm, .dst = xb});
    er_trace_end(tr, t0, ER_OP_OUTPUT_NORM, -1, 0, rows, E, E);
    float *out = logits_all ? logits_all : s->logits;
    matmul1(md, ER_OP_LM_HEAD, -1, xb, rows, &md->output, out);
    /* final logit softcapping (Gemma): c * tanh(logit / c) */
    if (hp->final_logit_softcap > 0.0f) {
        const float c = hp->final_logit_softcap;
        for (size_t i = 0, n = (size_t)rows * d->n_vocab; i < n; i++) out[i] = tanhf(out[i] / c) * c;
    }
    if (logits_all) memcpy(s->logits, logits_all + (size_t)(m - 1) * d->n_vocab, (size_t)d->n_vocab * sizeof(float));
    return ER_OK;
}

/* ---- a batched step: several sessions' rows together ---------------------- */

/*
 * er_decode_batch's step: session i's n[i] tokens ids[i] at its own
 * positions, the sessions' rows one after another in the activations
 * (m = sum of n[i] <= n_batch; session.c checks). The products take all
 * rows at once, so each weight is streamed once for the whole step; each
 * row's arithmetic is what it would get in its session's own er_forward:
 * the products, norms, quantized activations and element-wise steps work
 * row by row (kernels.h: a row's result does not depend on the others),
 * RoPE takes each row's own position (act.rows), K and V go to each row's
 * own session, and attention runs per session over its own rows with the
 * work items it would take alone (attend). A lone decode step's fused
 * attention_block computes the same bits as attend with m = 1 (its comment),
 * so a one-token session gets those here too. Logits: the last row of each
 * session, through the vocabulary projection together, into act.logits_b,
 * then copied to each session's logits.
 */
int er_forward_batch(er_session *const *ss, const int32_t *const *ids, const size_t *n, int ns) {
    er_model *md = ss[0]->model;
    const er_kernels *k = md->k;
    const er_dims *d = &md->d;
    const er_hparams *hp = &md->hp;
    const int E = d->n_embd, F = d->n_ff;
    float *x = md->act.x, *xb = md->act.xb, *xb2 = md->act.xb2;
    er_batch_row *rows = md->act.rows;
    /* Rows: first each session's whole tiles of 4 (4 * floor(n / 4) rows,
     * in session order), then every session's remaining rows (one-token
     * sessions, a chunk's last n % 4): the products tile exactly the rows
     * they tile alone, and take the rest as one-row products (m_one). */
    int heads = 0;
    for (int i = 0; i < ns; i++) heads += (int)n[i] / 4 * 4;
    int m = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ns; i++) {
            const int h = (int)n[i] / 4 * 4, j0 = pass ? h : 0, j1 = pass ? (int)n[i] : h;
            for (int j = j0; j < j1; j++, m++) {
                rows[m] = (er_batch_row){.sess = i, .pos = ss[i]->pos + j};
                k->dequant_row[md->tok_embd.wtype]((const uint8_t *)md->tok_embd.data +
                                                       (size_t)ids[i][j] * md->tok_embd.row_bytes,
                                                   x + (size_t)m * E, E);
                rope_angles_row(md, m, rows[m].pos);
            }
        }
    md->act.m_one = m - heads;
    if (d->traits & ER_T_EMBD_SCALE)
        for (size_t i = 0, nx = (size_t)m * E; i < nx; i++) x[i] *= sqrtf((float)E);

    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &md->layers[l];
        each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = x, .w = L->attn_norm,
                                  .dst = xb});
        if (L->conv) {
            matmul1(md, ER_OP_CONV_IN, l, xb, m, &L->conv_in, md->act.conv);
            const er_family_kernels fk = er_kernels_family(k);
            for (int b = 0; b < m; b++) { /* each session's rows in order: its ring holds its last conv_l */
                float *ring = ss[rows[b].sess]->conv_ring + (size_t)l * (size_t)d->conv_l * (size_t)E;
                fk.shortconv(xb + (size_t)b * E, md->act.conv + (size_t)b * 3 * E, ring, L->conv_w, E, d->conv_l,
                             rows[b].pos);
            }
            matmul1(md, ER_OP_CONV_OUT, l, xb, m, &L->conv_out, xb2);
        } else {
            const int qd = d->n_head * d->head_dim, kvd = (int)d->kv_row;
            matmul_shared(md, ER_OP_QKV, l, xb, m, (const er_weight *const[]){&L->wq, &L->wk, &L->wv},
                          (float *const[]){md->act.q, md->act.k, md->act.v}, 3);
            each_row(md, &(rows_task){.row = rope_row, .md = md, .m = m, .n = qd + kvd, .L = L});
            each_row(md, &(rows_task){.row = store_kv_batch_row, .md = md, .layer = l, .m = m, .n = 2 * kvd,
                                      .ss = ss});
            /* per run of a session's rows: its tiles, then its rest; the
             * one-token runs that take head ranges together, after */
            const int nth = md->pool.n_threads, ah = er_att_heads(d, nth);
            int one[HEADS_BATCH_MAX];
            heads_batch_task hb = {.md = md, .ss = ss, .rows = rows, .r = one, .heads = ah,
                                   .per = ah ? (d->n_head_kv + ah - 1) / ah : 0, .layer = l};
            for (int b = 0; b < m;) {
                int e = b + 1;
                while (e < m && rows[e].sess == rows[b].sess && rows[e].pos == rows[e - 1].pos + 1 &&
                       (b >= heads) == (e >= heads))
                    e++;
                if (e - b == 1 && ah) /* attend's m = 1 path (er_att_split is 0 where er_att_heads is not) */
                    one[hb.n++] = b;
                else
                    attend(md, ss[rows[b].sess], L, l, e - b, b, rows[b].pos);
                if (hb.n == HEADS_BATCH_MAX || (e == m && hb.n)) {
                    attend_heads_batch(md, &hb);
                    hb.n = 0;
                }
                b = e;
            }
            matmul1(md, ER_OP_ATTN_OUT, l, md->act.att, m, &L->wo, xb2);
        }
        if (L->post_attn_norm)
            each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = xb2,
                                      .w = L->post_attn_norm, .dst = xb2});
        each_row(md, &(rows_task){.row = add_row, .md = md, .m = m, .n = E, .src = xb2, .dst = x});

        each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = x, .w = L->ffn_norm,
                                  .dst = xb});
        matmul_shared(md, ER_OP_FFN_GATE_UP, l, xb, m, (const er_weight *const[]){&L->w_gate, &L->w_up},
                      (float *const[]){md->act.hb, md->act.hb2}, 2);
        each_row(md, &(rows_task){.row = d->traits & ER_T_GELU ? gelu_mul_row : silu_mul_row, .md = md, .m = m,
                                  .n = F, .src = md->act.hb2, .dst = md->act.hb});
        matmul1(md, ER_OP_FFN_DOWN, l, md->act.hb, m, &L->w_down, xb2);
        if (L->post_ffn_norm)
            each_row(md, &(rows_task){.row = rmsnorm_row, .md = md, .m = m, .n = E, .src = xb2,
                                      .w = L->post_ffn_norm, .dst = xb2});
        each_row(md, &(rows_task){.row = add_row, .md = md, .m = m, .n = E, .src = xb2, .dst = x});
    }

    /* each session's last row (its highest position), gathered into xb's first ns rows */
    for (int b = 0; b < m; b++)
        if (rows[b].pos == ss[rows[b].sess]->pos + (int)n[rows[b].sess] - 1)
            k->rmsnorm(xb + (size_t)rows[b].sess * E, x + (size_t)b * E, md->output_norm, E, hp->rms_eps);
    float *out = ns == 1 ? ss[0]->logits : md->act.logits_b;
    md->act.m_one = ns; /* each as the one row of its session's own projection */
    matmul1(md, ER_OP_LM_HEAD, -1, xb, ns, &md->output, out);
    md->act.m_one = 0;
    if (hp->final_logit_softcap > 0.0f) {
        const float c = hp->final_logit_softcap;
        for (size_t i = 0, nv = (size_t)ns * d->n_vocab; i < nv; i++) out[i] = tanhf(out[i] / c) * c;
    }
    if (ns > 1)
        for (int i = 0; i < ns; i++)
            memcpy(ss[i]->logits, out + (size_t)i * d->n_vocab, (size_t)d->n_vocab * sizeof(float));
    return ER_OK;
}
