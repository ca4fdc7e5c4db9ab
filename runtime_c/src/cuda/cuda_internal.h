/*
 * cuda_internal.h — the CUDA backend's own state (internal to src/cuda/).
 *
 * One er_cuda per model, in the arena's model section. All device memory is
 * ONE cudaMalloc (dev_base) cut by the layout in plan_cuda.c, and all pinned
 * host memory ONE cudaHostAlloc (pinned); nothing is allocated after
 * er_cuda_open returns.
 */
#ifndef ER_CUDA_INTERNAL_H
#define ER_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "model.h"

/* Every block inside the device allocation starts at this alignment (what
 * cudaMalloc itself guarantees, so vector loads of any width are aligned). */
#define ER_CUDA_ALIGN 256

/* A weight matrix on the device, in the kernels' row layout. */
typedef struct dev_mat {
    void *w;
    int wtype, n_in, n_out;
    size_t row_bytes;          /* erk_row_bytes(wtype, n_in) */
} dev_mat;

typedef struct dev_layer {
    float *attn_norm, *ffn_norm;
    float *bq, *bk, *bv;       /* NULL where the file has no bias */
    dev_mat wq, wk, wv, wo, gate, up, down;
} dev_layer;

/* One session slot's device state. The decode graph reads the token id and
 * position from `words` ([0] = position, [1..n_batch] = token ids), so it
 * is captured once and serves every step. */
typedef struct dev_slot {
    void *k_cache, *v_cache;   /* [n_layer][n_ctx][kv_row] of kv_type */
    float *logits;             /* n_vocab: the slot's last logits (device sampling reads them) */
    int32_t *words;
    cudaGraphExec_t graph;     /* the decode step (m = 1), NULL until captured */
    int32_t greedy;            /* argmax of `logits` (no penalty), read back with them... */
    int greedy_valid;          /* ...when 1: greedy sampling without a penalty needs no GPU trip */
} dev_slot;

struct er_cuda {
    int device;
    int integrated;            /* cudaDevAttrIntegrated: GPU shares DRAM with the CPU */
    char reason[400];          /* er_model_isa_reason: names the GPU */
    cudaStream_t stream;

    uint8_t *dev_base;         /* the one device allocation */
    size_t dev_bytes;
    uint8_t *pinned;           /* the one pinned host allocation */
    size_t pinned_bytes;
    void *registered;          /* host arena range registered for DMA (sessions section), or NULL */

    /* weights */
    dev_mat tok_embd, output;
    float *output_norm;
    dev_layer *layers;
    size_t max_row_bytes;      /* widest device row: the upload chunk must hold one */

    /* activations, n_batch rows each */
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2;
    float *logits_all;         /* n_batch x n_vocab (er_decode_all's rows) */
    dev_slot *slots;

    /* scratch */
    void *mm_scratch, *att_scratch, *sample_scratch;
    float *rank_vals;          /* n_vocab */
    int32_t *rank_ids;         /* n_vocab */
    int32_t *pen_ids;          /* n_ctx */
    int32_t *argmax_out;

    /* pinned staging regions */
    int32_t *h_words;          /* 1 + n_batch */
    int32_t *h_pen;            /* n_ctx */
    int32_t *h_out;            /* 1 */
    uint8_t *h_bulk;           /* uploads and snapshot rows */
    size_t bulk_bytes;

    size_t kv_layer_bytes;     /* one layer of one cache: n_ctx * kv_row * elem */
    const er_dims *d;
};

/* plan_cuda.c: walks the device layout. With c == NULL only sizes
 * (bytes[]) are computed; with c (dev_base and pinned set, bytes[] from a
 * previous call) every pointer of c is assigned. host: the arena block for
 * c->layers and c->slots (NULL in the plan). */
int er_cuda_layout(const gguf_file *f, const er_dims *d, int tied_output, er_cuda *c, size_t bytes[ER_DSEC_COUNT]);

/* Bytes of the model-section block er_cuda_open takes (er_cuda, layers, slots). */
size_t er_cuda_host_bytes(const er_dims *d);

/* device.c: sets the message for a failed CUDA call and returns `status`. */
int er_cuda_fail(int status, cudaError_t e, const char *what);

/* forward_cuda.c: enqueues the forward pass of m rows of slot `slot` on the
 * stream (ids and position from the slot's words); the last `rows` rows'
 * logits go to `logits` (rows x n_vocab). Used eagerly and under capture. */
void er_cuda_launch_forward(er_cuda *c, const er_model *md, dev_slot *sl, int m, int rows, float *logits);

/* Enqueues the argmax of the slot's last logits into c->argmax_out: every
 * step ends with it (in the decode graph too), so the usual greedy sample
 * is already on the host when er_sample asks. */
void er_cuda_launch_greedy(er_cuda *c, const er_model *md, dev_slot *sl);

#define CUDA_CHECK(call, what)                                        \
    do {                                                              \
        cudaError_t e_ = (call);                                      \
        if (e_ != cudaSuccess) return er_cuda_fail(ER_EIO, e_, what); \
    } while (0)

/* CUDA_CHECK for calls made after a copy from pinned staging (h_words,
 * h_pen) was queued on stream st: the error return first waits for the
 * stream, so that the next call, which rewrites the staging buffer, cannot
 * race a copy still in flight. */
#define CUDA_CHECK_SYNC(call, what, st)                      \
    do {                                                     \
        cudaError_t e_ = (call);                             \
        if (e_ != cudaSuccess) {                             \
            (void)cudaStreamSynchronize(st);                 \
            return er_cuda_fail(ER_EIO, e_, what);           \
        }                                                    \
    } while (0)

#endif
