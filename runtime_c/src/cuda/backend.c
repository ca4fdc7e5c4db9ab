/*
 * backend.c — opening and closing the CUDA backend of a model: the one
 * device allocation, the one pinned staging buffer, the weight upload, one
 * decode graph per session slot, and the copies snapshots make.
 *
 * Why the weights are uploaded (copied once into device memory) rather than
 * read in place from the mapped file, also on Jetson where GPU and CPU share
 * the same DRAM:
 *  - the kernels read their own row layout (erk_row_to_device: 16-byte
 *    aligned rows, the block scales where the kernels want them), which the
 *    GGUF layout is not, so a converted copy exists in any case;
 *  - on Tegra (Jetson) the iGPU does not cache pinned/mapped host memory in
 *    its L2 (NVIDIA's "CUDA for Tegra" note: device memory is cached on the
 *    iGPU, pinned host memory is not, and with I/O coherency the GPU snoops
 *    the CPU's caches on every access), while cudaMalloc'ed memory is cached;
 *    activations, KV rows and the small vectors are re-read many times per
 *    step and want the L2.
 * So the copy goes to device memory, and on an integrated GPU the file's
 * pages are dropped after the upload (madvise MADV_DONTNEED on the tensor
 * data), so DRAM holds the weights once, not twice. A later host read (none
 * on this path) would simply fault the pages back in from the file.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_internal.h"
#include "error.h"

/* ---- upload ------------------------------------------------------------- */

/* Converts w's rows into the pinned bulk buffer, as many as fit, and copies
 * each batch to dst. Synchronous per batch: this runs once, at open. */
static int upload_matrix(er_cuda *c, const er_weight *w, const dev_mat *dst, const char *what) {
    if (!dst->w) return er_fail(ER_ECORRUPT, "internal: no device block planned for %s", what);
    if (w->wtype != dst->wtype || w->n_in != dst->n_in || w->n_out != dst->n_out)
        return er_fail(ER_ECORRUPT, "internal: device plan of %s disagrees with its binding", what);
    size_t per = c->bulk_bytes / dst->row_bytes;
    for (int r0 = 0; r0 < w->n_out;) {
        int n = (size_t)(w->n_out - r0) < per ? w->n_out - r0 : (int)per;
        for (int r = 0; r < n; r++)
            erk_row_to_device(w->wtype, (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes,
                              c->h_bulk + (size_t)r * dst->row_bytes, w->n_in);
        CUDA_CHECK(cudaMemcpy((uint8_t *)dst->w + (size_t)r0 * dst->row_bytes, c->h_bulk, (size_t)n * dst->row_bytes,
                              cudaMemcpyHostToDevice), what);
        r0 += n;
    }
    return ER_OK;
}

static int upload_vector(float *dst, const float *src, int n, const char *what) {
    if (!src && !dst) return ER_OK;
    if (!src || !dst) return er_fail(ER_ECORRUPT, "internal: device plan of %s disagrees with its binding", what);
    CUDA_CHECK(cudaMemcpy(dst, src, (size_t)n * sizeof(float), cudaMemcpyHostToDevice), what);
    return ER_OK;
}

static int upload_weights(er_cuda *c, const er_model *m) {
    const er_dims *d = &m->d;
    const int qd = d->n_head * d->head_dim, kvd = (int)d->kv_row;
    int rc;
    if ((rc = upload_matrix(c, &m->tok_embd, &c->tok_embd, "token_embd.weight")) ||
        (rc = upload_vector(c->output_norm, m->output_norm, d->n_embd, "output_norm.weight")))
        return rc;
    if (!m->hp.tied_output && (rc = upload_matrix(c, &m->output, &c->output, "output.weight"))) return rc;
    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &m->layers[l];
        dev_layer *D = &c->layers[l];
        if ((rc = upload_vector(D->attn_norm, L->attn_norm, d->n_embd, "attn_norm")) ||
            (rc = upload_vector(D->ffn_norm, L->ffn_norm, d->n_embd, "ffn_norm")) ||
            (rc = upload_matrix(c, &L->wq, &D->wq, "attn_q")) || (rc = upload_matrix(c, &L->wk, &D->wk, "attn_k")) ||
            (rc = upload_matrix(c, &L->wv, &D->wv, "attn_v")) ||
            (rc = upload_matrix(c, &L->wo, &D->wo, "attn_output")) ||
            (rc = upload_matrix(c, &L->w_gate, &D->gate, "ffn_gate")) ||
            (rc = upload_matrix(c, &L->w_up, &D->up, "ffn_up")) ||
            (rc = upload_matrix(c, &L->w_down, &D->down, "ffn_down")) ||
            (rc = upload_vector(D->bq, L->bq, qd, "attn_q.bias")) ||
            (rc = upload_vector(D->bk, L->bk, kvd, "attn_k.bias")) ||
            (rc = upload_vector(D->bv, L->bv, kvd, "attn_v.bias")))
            return rc;
    }
    return ER_OK;
}

/* On an integrated GPU the device copy and the file's page cache share one
 * DRAM: drop the mapping's tensor pages (whole pages inside the data
 * section only; the header, tokenizer and names before it stay). */
static void drop_file_pages(const er_model *m) {
    const gguf_file *f = &m->file;
    long pg = sysconf(_SC_PAGESIZE);
    if (!f->mapped || pg <= 0) return;
    size_t start = (f->data_off + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    if (start >= f->size) return;
    /* advisory: a failure only means the pages stay cached */
    (void)madvise((void *)(uintptr_t)(f->base + start), f->size - start, MADV_DONTNEED);
}

/* ---- graphs and warm-up -------------------------------------------------- */

/* Records slot sl's decode step (m = 1) once. Capture mode "thread local":
 * other threads' CUDA calls (another model opening) are not disturbed. */
static int capture(er_cuda *c, const er_model *m, dev_slot *sl) {
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "starting the graph capture");
    er_cuda_launch_forward(c, m, sl, 1, 1, sl->logits);
    er_cuda_launch_greedy(c, m, sl);
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        return er_cuda_fail(ER_EIO, e, "capturing the decode graph");
    }
    e = cudaGraphInstantiate(&sl->graph, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        sl->graph = NULL;
        return er_cuda_fail(ER_EIO, e, "instantiating the decode graph");
    }
    return ER_OK;
}

/* Runs every eager path once (m = 1, 2 and n_batch rows, both samplers)
 * BEFORE the graphs are captured, so that lazily loaded kernels load here,
 * outside any capture and outside any timed, allocation-free step. Writes
 * KV positions [0, n_batch) of slot 0: dead rows, overwritten before any
 * session reads them. */
static int warm_up_eager(er_cuda *c, const er_model *m) {
    const er_dims *d = &m->d;
    const int B = d->n_batch, V = d->n_vocab;
    dev_slot *s0 = &c->slots[0];
    memset(c->h_words, 0, (size_t)(B + 1) * sizeof(int32_t));
    CUDA_CHECK(cudaMemcpyAsync(s0->words, c->h_words, (size_t)(B + 1) * 4, cudaMemcpyHostToDevice, c->stream),
               "warm-up words");
    er_cuda_launch_forward(c, m, s0, 1, 1, s0->logits);
    if (B >= 2) {
        er_cuda_launch_forward(c, m, s0, 2, 1, s0->logits);
        er_cuda_launch_forward(c, m, s0, B, B, c->logits_all);
    }
    erk_argmax((erk_stream)c->stream, s0->logits, V, c->pen_ids, 0, 1.0f, c->argmax_out, c->sample_scratch);
    /* and with a repetition penalty: the kernel that marks penalised ids runs
     * only then, and would otherwise load at the first penalised sample, in
     * the middle of a generation (pen_ids is cleared device memory: id 0) */
    erk_argmax((erk_stream)c->stream, s0->logits, V, c->pen_ids, 1, 1.5f, c->argmax_out, c->sample_scratch);
    erk_rank((erk_stream)c->stream, s0->logits, V, c->pen_ids, 0, 1.0f, 1.0f, c->rank_vals, c->rank_ids,
             c->sample_scratch);
    CUDA_CHECK(cudaGetLastError(), "warm-up launches");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "the warm-up steps");
    return ER_OK;
}

/* Launches each slot's graph once (position 0, token 0: a dead row), so a
 * graph's first-launch work is done at open too. */
static int warm_up_graphs(er_cuda *c, const er_model *m) {
    const int B = m->d.n_batch;
    memset(c->h_words, 0, (size_t)(B + 1) * sizeof(int32_t));
    for (int s = 0; s < m->d.n_sessions; s++) {
        CUDA_CHECK(cudaMemcpyAsync(c->slots[s].words, c->h_words, (size_t)(B + 1) * 4, cudaMemcpyHostToDevice,
                                   c->stream), "warm-up words");
        CUDA_CHECK(cudaGraphLaunch(c->slots[s].graph, c->stream), "warm-up graph launch");
    }
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "the warm-up graph launches");
    return ER_OK;
}

/* ---- open / close -------------------------------------------------------- */

static int open_device(er_cuda *c, er_model *m) {
    const er_dims *d = &m->d;
    int n = er_cuda_device_count();
    if (n < 0) return n;
    c->device = 0;
    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    struct cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, c->device), "cudaGetDeviceProperties");
    c->integrated = p.integrated;
    snprintf(c->reason, sizeof c->reason, "CUDA device 0: %s (sm_%d%d, %d SMs, %.1f GiB%s)", p.name, p.major,
             p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
             p.integrated ? ", integrated: shares DRAM with the CPU" : "");

    size_t bytes[ER_DSEC_COUNT];
    int rc = er_cuda_layout(&m->file, d, m->hp.tied_output, NULL, bytes);
    if (rc) return rc;
    c->dev_bytes = 0;
    for (int i = 0; i < ER_DSEC_PINNED; i++) c->dev_bytes += bytes[i];
    c->pinned_bytes = bytes[ER_DSEC_PINNED];

    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaError_t e = cudaMalloc((void **)&c->dev_base, c->dev_bytes);
    if (e != cudaSuccess) {
        c->dev_base = NULL;
        (void)cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        (void)cudaGetLastError();
        return er_fail(ER_ENOMEM, "cannot allocate %zu bytes on the GPU (%zu of %zu free): %s; lower n_ctx, "
                       "n_batch or n_sessions, or use the CPU", c->dev_bytes, fr, tot, cudaGetErrorString(e));
    }
    e = cudaHostAlloc((void **)&c->pinned, c->pinned_bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        c->pinned = NULL;
        return er_cuda_fail(ER_ENOMEM, e, "allocating the pinned staging buffer");
    }
    /* zeroed: activations and logits hold finite values before the first step */
    CUDA_CHECK(cudaMemset(c->dev_base, 0, c->dev_bytes), "clearing the device arena");
    if ((rc = er_cuda_layout(&m->file, d, m->hp.tied_output, c, bytes))) return rc;
    c->d = &m->d;

    /* Logits (and the ranked candidates) are read back into the sessions
     * section every step: registered, those copies are DMA. Optional: a
     * refused registration leaves ordinary (staged) copies. */
    er_arena *ss = &m->sec[ER_SEC_SESSIONS];
    if (ss->size && cudaHostRegister(ss->base, ss->size, cudaHostRegisterDefault) == cudaSuccess)
        c->registered = ss->base;
    else
        (void)cudaGetLastError();

    if ((rc = upload_weights(c, m))) return rc;
    CUDA_CHECK(cudaDeviceSynchronize(), "uploading the weights");
    if (c->integrated) drop_file_pages(m);
    if ((rc = warm_up_eager(c, m))) return rc;
    for (int s = 0; s < d->n_sessions; s++)
        if ((rc = capture(c, m, &c->slots[s]))) return rc;
    return warm_up_graphs(c, m);
}

int er_cuda_open(er_model *m) {
    const er_dims *d = &m->d;
    er_arena *a = &m->sec[ER_SEC_MODEL];
    er_cuda *c = er_arena_alloc(a, sizeof *c);
    dev_layer *layers = er_arena_alloc(a, sizeof(dev_layer) * (size_t)d->n_layer);
    dev_slot *slots = er_arena_alloc(a, sizeof(dev_slot) * (size_t)d->n_sessions);
    if (!c || !layers || !slots) return er_fail(ER_ECORRUPT, "internal: model section smaller than planned (CUDA)");
    memset(c, 0, sizeof *c);
    memset(layers, 0, sizeof(dev_layer) * (size_t)d->n_layer);
    memset(slots, 0, sizeof(dev_slot) * (size_t)d->n_sessions);
    c->layers = layers;
    c->slots = slots;
    int rc = open_device(c, m);
    if (rc) {
        er_cuda_close(c);
        return rc;
    }
    m->cuda = c;
    m->isa_reason = c->reason;
    return ER_OK;
}

void er_cuda_close(er_cuda *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->slots && c->d)
        for (int s = 0; s < c->d->n_sessions; s++)
            if (c->slots[s].graph) cudaGraphExecDestroy(c->slots[s].graph);
    if (c->registered) cudaHostUnregister(c->registered);
    if (c->pinned) cudaFreeHost(c->pinned);
    if (c->dev_base) cudaFree(c->dev_base);
    if (c->stream) cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    memset(c, 0, sizeof *c);
}

/* ---- snapshot copies ------------------------------------------------------ */

size_t er_cuda_bulk_bytes(const er_cuda *c) { return c->bulk_bytes; }
void *er_cuda_bulk(const er_cuda *c) { return c->h_bulk; }

static uint8_t *kv_at(er_cuda *c, int slot, int layer, int which, size_t off) {
    dev_slot *sl = &c->slots[slot];
    return (uint8_t *)(which ? sl->v_cache : sl->k_cache) + (size_t)layer * c->kv_layer_bytes + off;
}

int er_cuda_kv_to_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n) {
    if (n > c->bulk_bytes || off + n > c->kv_layer_bytes) return er_fail(ER_EINVAL, "internal: KV copy out of range");
    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    CUDA_CHECK(cudaMemcpyAsync(c->h_bulk, kv_at(c, slot, layer, which, off), n, cudaMemcpyDeviceToHost, c->stream),
               "reading KV rows");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "reading KV rows");
    return ER_OK;
}

int er_cuda_kv_from_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n) {
    if (n > c->bulk_bytes || off + n > c->kv_layer_bytes) return er_fail(ER_EINVAL, "internal: KV copy out of range");
    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    CUDA_CHECK(cudaMemcpyAsync(kv_at(c, slot, layer, which, off), c->h_bulk, n, cudaMemcpyHostToDevice, c->stream),
               "writing KV rows");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "writing KV rows");
    return ER_OK;
}

int er_cuda_logits_upload(er_session *s) {
    er_cuda *c = s->model->cuda;
    c->slots[s->slot].greedy_valid = 0; /* the loaded logits have no argmax yet */
    CUDA_CHECK(cudaSetDevice(c->device), "cudaSetDevice");
    CUDA_CHECK(cudaMemcpyAsync(c->slots[s->slot].logits, s->logits, (size_t)s->model->d.n_vocab * sizeof(float),
                               cudaMemcpyHostToDevice, c->stream), "writing logits");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "writing logits");
    return ER_OK;
}
