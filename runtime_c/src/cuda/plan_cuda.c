/*
 * plan_cuda.c — the device side of the plan: what the one device
 * allocation and the one pinned staging buffer hold, block by block.
 *
 * One walk serves both uses, so the plan and the open cannot disagree: the
 * plan walks it with no er_cuda and only adds up sizes (pure arithmetic on
 * the file's shapes and the kernels' size functions, so er_plan with isa
 * "cuda" works on a machine without a GPU); the open walks it again with
 * the allocations made and assigns every pointer.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "error.h"

static const char *const k_names[ER_DSEC_COUNT] = {
    "gpu_weights", "gpu_kv_cache", "gpu_activations", "gpu_scratch", "pinned_staging",
};

const char *er_cuda_section_name(int dsec) { return dsec >= 0 && dsec < ER_DSEC_COUNT ? k_names[dsec] : ""; }

/* Uploads convert rows into pinned staging this many bytes at a time (at
 * least one row): big enough that the copy engine, not the per-copy
 * overhead, sets the pace; small next to the model. */
#define ER_CUDA_BULK (4u << 20)

typedef struct walk {
    const gguf_file *f;
    er_cuda *c;                    /* NULL: sizes only */
    size_t off[ER_DSEC_COUNT];     /* bytes taken so far per section */
    uint8_t *base[ER_DSEC_COUNT];  /* section starts (with c) */
    size_t max_row, mm_scratch;
    int bad;                       /* an overflow or an unsupported type: status already set */
    int status;
} walk;

/* Takes n elements of `elem` bytes from section s; NULL when only sizing. */
static void *take(walk *w, int s, size_t n, size_t elem) {
    if (w->bad) return NULL;
    if (elem && n > (SIZE_MAX / 4) / elem) {
        w->bad = 1;
        w->status = er_fail(ER_ECORRUPT, "device plan overflows: the file's dimensions are absurd");
        return NULL;
    }
    size_t bytes = (n * elem + ER_CUDA_ALIGN - 1) / ER_CUDA_ALIGN * ER_CUDA_ALIGN;
    if (bytes > SIZE_MAX / 4 - w->off[s]) {
        w->bad = 1;
        w->status = er_fail(ER_ECORRUPT, "device plan overflows: the file's dimensions are absurd");
        return NULL;
    }
    void *p = w->c ? w->base[s] + w->off[s] : NULL;
    w->off[s] += bytes;
    return p;
}

/* A weight matrix named `name`, if the file has it (open fails on a missing
 * one later, with the CPU path's message). */
static void mat(walk *w, const char *name, int batch, dev_mat *out) {
    gguf_tensor t;
    if (w->bad || !gguf_find_tensor(w->f, name, &t) || t.n_dims != 2) return;
    int wt = er_wtype_from_ggml(t.type);
    size_t rb = wt < 0 ? 0 : erk_row_bytes(wt, (int)t.ne[0]);
    if (rb == 0) {
        w->bad = 1;
        w->status = er_fail(ER_EUNSUPPORTED, "tensor '%s' (type %s, rows of %llu) has no CUDA kernel layout; "
                            "use the CPU or re-convert the model", name, ggml_type_name(t.type),
                            (unsigned long long)t.ne[0]);
        return;
    }
    if (rb > w->max_row) w->max_row = rb;
    size_t sc = erk_matmul_scratch_bytes(wt, batch, (int)t.ne[0]);
    if (sc > w->mm_scratch) w->mm_scratch = sc;
    void *p = take(w, ER_DSEC_WEIGHTS, (size_t)t.ne[1], rb);
    if (out) *out = (dev_mat){.w = p, .wtype = wt, .n_in = (int)t.ne[0], .n_out = (int)t.ne[1], .row_bytes = rb};
}

/* A 1-D vector of n floats, if the file has it. */
static float *vec(walk *w, const char *name, int n) {
    gguf_tensor t;
    if (w->bad || !gguf_find_tensor(w->f, name, &t)) return NULL;
    float *p = take(w, ER_DSEC_WEIGHTS, (size_t)n, sizeof(float));
    /* the plan has no pointers: a non-NULL marker keeps "present" visible */
    return w->c ? p : NULL;
}

size_t er_cuda_host_bytes(const er_dims *d) {
    size_t a = ER_ARENA_ALIGN;
    return (sizeof(er_cuda) + a) + (sizeof(dev_layer) * (size_t)d->n_layer + a) +
           (sizeof(dev_slot) * (size_t)d->n_sessions + a);
}

int er_cuda_layout(const gguf_file *f, const er_dims *d, int tied_output, er_cuda *c, size_t bytes[ER_DSEC_COUNT]) {
    /* Limits of the kernels' launch shapes, said here so that er_plan and
     * er_model_open refuse them: past them a launch would be skipped and the
     * step would return garbage. Rows of a step are grid.y of the matrix
     * products and grid.z of prefill attention (at most 65535); attention
     * keeps one head's query and output in shared memory (head_dim <= 256). */
    if (d->n_batch > 65535)
        return er_fail(ER_EUNSUPPORTED, "n_batch %d: the CUDA backend takes at most 65535 rows per step; "
                       "use a smaller n_batch", d->n_batch);
    if (d->head_dim > 256)
        return er_fail(ER_EUNSUPPORTED, "head dimension %d: the CUDA attention kernel takes at most 256; "
                       "run this model on the CPU", d->head_dim);
    walk w = {.f = f, .c = c};
    if (c) {
        uint8_t *p = c->dev_base;
        for (int s = 0; s < ER_DSEC_PINNED; s++) {
            w.base[s] = p;
            p += bytes[s];
        }
        w.base[ER_DSEC_PINNED] = c->pinned;
    }
    const int B = d->n_batch, L = d->n_layer;
    const size_t E = (size_t)d->n_embd, V = (size_t)d->n_vocab, F = (size_t)d->n_ff, C = (size_t)d->n_ctx;
    const size_t qd = (size_t)d->n_head * d->head_dim, kvd = d->kv_row;
    char nm[96];

    /* weights, in the order the forward pass reads them */
    dev_mat tok = {0}, out = {0};
    mat(&w, "token_embd.weight", B, &tok);
    float *onorm = vec(&w, "output_norm.weight", (int)E);
    if (!tied_output) mat(&w, "output.weight", B, &out);
    if (c) {
        c->tok_embd = tok;
        c->output = tied_output ? tok : out;
        c->output_norm = onorm;
    }
    for (int l = 0; l < L && !w.bad; l++) {
        dev_layer tmp, *ly = c ? &c->layers[l] : &tmp;
        memset(ly, 0, sizeof *ly);
#define NM(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
        ly->attn_norm = vec(&w, NM("attn_norm.weight"), (int)E);
        ly->ffn_norm = vec(&w, NM("ffn_norm.weight"), (int)E);
        mat(&w, NM("attn_q.weight"), B, &ly->wq);
        mat(&w, NM("attn_k.weight"), B, &ly->wk);
        mat(&w, NM("attn_v.weight"), B, &ly->wv);
        mat(&w, NM("attn_output.weight"), B, &ly->wo);
        mat(&w, NM("ffn_gate.weight"), B, &ly->gate);
        mat(&w, NM("ffn_up.weight"), B, &ly->up);
        mat(&w, NM("ffn_down.weight"), B, &ly->down);
        ly->bq = vec(&w, NM("attn_q.bias"), (int)qd);
        ly->bk = vec(&w, NM("attn_k.bias"), (int)kvd);
        ly->bv = vec(&w, NM("attn_v.bias"), (int)kvd);
#undef NM
    }

    /* KV caches: one block per slot and cache, layers [n_layer][n_ctx][kv_row] */
    size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4, layer_elems = C * kvd;
    if (layer_elems > SIZE_MAX / 8 / (size_t)L) {
        w.bad = 1;
        w.status = er_fail(ER_ECORRUPT, "device plan overflows: the file's dimensions are absurd");
    }
    for (int s = 0; s < d->n_sessions && !w.bad; s++) {
        void *k = take(&w, ER_DSEC_KV, layer_elems * (size_t)L, elem);
        void *v = take(&w, ER_DSEC_KV, layer_elems * (size_t)L, elem);
        if (c) {
            c->slots[s].k_cache = k;
            c->slots[s].v_cache = v;
        }
    }

    /* activations for n_batch rows; per-slot logits and step words */
    float *x = take(&w, ER_DSEC_ACT, (size_t)B * E, 4), *xb = take(&w, ER_DSEC_ACT, (size_t)B * E, 4);
    float *q = take(&w, ER_DSEC_ACT, (size_t)B * qd, 4), *k = take(&w, ER_DSEC_ACT, (size_t)B * kvd, 4);
    float *v = take(&w, ER_DSEC_ACT, (size_t)B * kvd, 4), *att = take(&w, ER_DSEC_ACT, (size_t)B * qd, 4);
    float *hb = take(&w, ER_DSEC_ACT, (size_t)B * F, 4), *hb2 = take(&w, ER_DSEC_ACT, (size_t)B * F, 4);
    float *la = take(&w, ER_DSEC_ACT, (size_t)B * V, 4);
    for (int s = 0; s < d->n_sessions && !w.bad; s++) {
        float *lg = take(&w, ER_DSEC_ACT, V, 4);
        int32_t *wd = take(&w, ER_DSEC_ACT, (size_t)B + 1, 4);
        if (c) {
            c->slots[s].logits = lg;
            c->slots[s].words = wd;
        }
    }

    /* scratch: the kernels say how much; sampling's ranked output */
    void *mm = take(&w, ER_DSEC_SCRATCH, w.mm_scratch ? w.mm_scratch : 1, 1);
    void *as = take(&w, ER_DSEC_SCRATCH, erk_attention_scratch_bytes(B, d->n_head, d->head_dim, d->n_ctx) + 1, 1);
    void *ss = take(&w, ER_DSEC_SCRATCH, erk_sample_scratch_bytes((int)V) + 1, 1);
    float *rv = take(&w, ER_DSEC_SCRATCH, V, 4);
    int32_t *ri = take(&w, ER_DSEC_SCRATCH, V, 4), *pen = take(&w, ER_DSEC_SCRATCH, C, 4);
    int32_t *am = take(&w, ER_DSEC_SCRATCH, 1, 4);

    /* pinned staging: step words, penalty ids, the sampled id, bulk rows */
    size_t bulk = w.max_row > ER_CUDA_BULK ? w.max_row : ER_CUDA_BULK;
    int32_t *hw = take(&w, ER_DSEC_PINNED, (size_t)B + 1, 4), *hp = take(&w, ER_DSEC_PINNED, C, 4);
    int32_t *ho = take(&w, ER_DSEC_PINNED, 1, 4);
    uint8_t *hbk = take(&w, ER_DSEC_PINNED, bulk, 1);
    if (w.bad) return w.status;

    if (c) {
        c->x = x, c->xb = xb, c->q = q, c->k = k, c->v = v, c->att = att, c->hb = hb, c->hb2 = hb2;
        c->logits_all = la;
        c->mm_scratch = mm, c->att_scratch = as, c->sample_scratch = ss;
        c->rank_vals = rv, c->rank_ids = ri, c->pen_ids = pen, c->argmax_out = am;
        c->h_words = hw, c->h_pen = hp, c->h_out = ho, c->h_bulk = hbk;
        c->bulk_bytes = bulk;
        c->max_row_bytes = w.max_row;
        c->kv_layer_bytes = layer_elems * elem;
    } else {
        for (int s = 0; s < ER_DSEC_COUNT; s++) bytes[s] = w.off[s];
    }
    return ER_OK;
}

int er_cuda_plan(const gguf_file *f, const er_dims *d, int tied_output, size_t bytes[ER_DSEC_COUNT],
                 size_t *host_bytes) {
    int rc = er_cuda_layout(f, d, tied_output, NULL, bytes);
    if (rc) return rc;
    *host_bytes = er_cuda_host_bytes(d);
    return ER_OK;
}
