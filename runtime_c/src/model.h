/*
 * model.h — the model and session structures shared by plan.c, model.c,
 * forward.c, session.c and sampler.c (internal).
 *
 * Everything here lives in the arena except the mapping itself: er_model is
 * the first allocation of the arena's "model" section, so closing a model is
 * unmap + (maybe) one free.
 */
#ifndef ER_MODEL_H
#define ER_MODEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "edgerun.h"
#include "arena.h"
#include "gguf.h"
#include "kernels/kernels.h"
#include "cuda/cuda_backend.h"
#include "threadpool.h"
#include "trace.h"

/* Arena sections, in layout order. Names are what er_plan reports. */
enum er_sec {
    ER_SEC_MODEL = 0,    /* er_model, layer bindings, tensor names, converted norm vectors */
    ER_SEC_TOKENIZER,    /* vocab look-up tables */
    ER_SEC_KV,           /* K and V caches of every session slot */
    ER_SEC_SESSIONS,     /* session structs, token history, logits, sampler candidates */
    ER_SEC_ACT,          /* activations of one forward step (shared; steps are serialised) */
    ER_SEC_THREADS,      /* thread pool state, per-thread attention scores */
    ER_SEC_TRACE,        /* op-trace ring (er_options.trace_events; 0 bytes when off) */
    ER_SEC_REPACKED,     /* weights rearranged at open into a kernel's interleaved layout (repack.c) */
    ER_SEC_KV_WINDOW,    /* sliding-window layers' K and V rings of every session slot (er_kv_layer_rows) */
    ER_SEC_COUNT
};

/* A weight matrix: n_out rows of n_in elements (GGUF ne[0] = n_in). */
typedef struct er_weight {
    const void *data;          /* into the mapping */
    const void *packed;        /* the repacked copy (ER_SEC_REPACKED), or NULL: see repack.c */
    int wtype;                 /* enum er_wtype */
    size_t row_bytes;
    int n_in, n_out;
} er_weight;

typedef struct er_layer {
    const float *attn_norm, *ffn_norm;
    er_weight wq, wk, wv, wo;
    const float *bq, *bk, *bv;             /* qwen2 only; NULL otherwise */
    er_weight w_gate, w_up, w_down;
    /* family steps (family.c): NULL/0 where the layer does not take them */
    const float *q_norm, *k_norm;          /* per-head RMSNorm of Q and K before RoPE (head_dim) */
    const float *post_attn_norm, *post_ffn_norm; /* RMSNorm of the block's output before the residual add */
    int rope;                              /* RoPE angles: 0 none (NoPE), 1 act.rope_cs, 2 act.rope_cs_swa */
    int window;                            /* positions each query sees (sliding window), or 0: all */
    int fused;                             /* wq/wk/wv and w_gate/w_up are views into fused tensors (phi3) */
    /* LFM2's short-convolution block, in place of attention where conv is 1:
     * in_proj gives B, C and x (n_embd each); y = C * conv(B * x); out_proj */
    int conv;
    size_t kv_off;                         /* element offset of the layer's K (and V) cache in the session's
                                              full caches, or for a ring in its rings (er_kv_base) */
    size_t kv_rows;                        /* cached rows: n_ctx, 2 * ring, or 0 (model.h, er_kv_layer_rows) */
    int ring;                              /* positions of a sliding-window ring, or 0: row = position */
    er_weight conv_in, conv_out;
    const float *conv_w;                   /* [n_embd][conv_l] taps, the last one the current position's */
} er_layer;

/* Family traits (family.c): which steps of the forward pass a family takes. */
enum {
    ER_T_NEOX = 1u << 0,       /* RoPE rotates the halves of each head (else adjacent pairs) */
    ER_T_QKV_BIAS = 1u << 1,   /* attn_{q,k,v}.bias are required (qwen2) */
    ER_T_QK_NORM = 1u << 2,    /* attn_q_norm/attn_k_norm: per-head RMSNorm of Q and K */
    ER_T_POST_NORMS = 1u << 3, /* post_attention_norm, post_ffw_norm (gemma3) */
    ER_T_GELU = 1u << 4,       /* GeGLU with tanh GELU instead of SwiGLU */
    ER_T_EMBD_SCALE = 1u << 5, /* embeddings scaled by sqrt(n_embd) */
    ER_T_FUSED = 1u << 6,      /* attn_qkv and ffn_up holding gate and up (phi3) */
    ER_T_NOPE4 = 1u << 7,      /* every fourth layer has no RoPE (smollm3) */
    ER_T_SWA6 = 1u << 8,       /* five sliding-window layers, then a global one (gemma3) */
    ER_T_SHORTCONV = 1u << 9,  /* gated short-convolution layers between attention layers (lfm2) */
};
/* Per-layer kinds (er_family_layer). */
enum { ER_L_NOPE = 1u << 0, ER_L_SWA = 1u << 1, ER_L_CONV = 1u << 2 };

/* A batched step's row (er_forward_batch): its session's index in the step, and its position. */
typedef struct er_batch_row {
    int32_t sess, pos;
} er_batch_row;

/* Shapes the plan and the forward pass agree on. */
typedef struct er_dims {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx, n_batch, n_threads, n_sessions, kv_type;
    uint32_t trace_events;     /* trace ring capacity (0 = none) */
    size_t kv_row;             /* elements per cached position per layer: n_head_kv * head_dim */
    int kv_blk;                /* K/V heads per block of the cache (er_kv_col) */
    size_t act_row_max;        /* bytes of the largest prepared activation row */
    /* the family (family.c) */
    const char *family;        /* its row's architecture name (static) */
    unsigned traits;           /* ER_T_* */
    int n_rot;                 /* dimensions of each head RoPE rotates (<= head_dim) */
    float attn_scale;          /* scores = q.k * attn_scale */
    int conv_l;                /* short-convolution taps (lfm2), else 0 */
    size_t conv_ring;          /* floats of a session's convolution ring: n_layer * conv_l * n_embd */
    size_t kv_cache_rows;      /* rows of a session's K (and V) cache over its full-size layers */
    size_t kv_ring_rows;       /* and over its sliding-window rings (er_kv_layer_rows) */
} er_dims;

/*
 * Attention work items (forward.c): one K/V head against up to
 * er_att_tokens() tokens, with all of the head's group of query heads for
 * each, so that about ER_ATT_QUERIES queries share each K/V row the kernel
 * converts (kernels.h, attention_multi); never more than ER_ATT_MAX_QUERIES
 * in one call. Each thread's scratch (act.scores) is er_att_scratch()
 * floats: a converted block of rows and the scores of every query.
 */
#define ER_ATT_QUERIES 16
#define ER_ATT_MAX_QUERIES 64
static inline int er_att_tokens(const er_dims *d) {
    const int group = d->n_head / d->n_head_kv;
    return group >= ER_ATT_QUERIES ? 1 : ER_ATT_QUERIES / group;
}
static inline size_t er_att_queries(const er_dims *d) {
    const size_t q = (size_t)er_att_tokens(d) * (size_t)(d->n_head / d->n_head_kv);
    return q < ER_ATT_MAX_QUERIES ? q : ER_ATT_MAX_QUERIES;
}
/* (callers check that it does not overflow: plan.c) */
static inline size_t er_att_scratch(const er_dims *d) {
    return (size_t)ER_ATT_BLOCK * (size_t)d->head_dim + er_att_queries(d) * (size_t)d->n_ctx;
}
/* A decode step's items instead: ranges of this many K/V heads, read row by
 * row across the range (kernels.h, attention_heads), one range per thread
 * as far as the scratch's er_att_queries() scores allow. With several
 * threads only where each thread's share is ER_ATT_HEADS_MIN K/V heads or
 * more: smaller items, taken as they come, let the threads even out cores
 * of unequal speed (this VM's vCPUs; big.LITTLE boards), and a short range
 * gains little from the row walk. Measured at 2 threads, 4 runs each:
 * 4 K/V heads (1,600 positions) as two ranges of 2 decoded at 265-334
 * tok/s, as single heads 303-378; 12 heads (950 positions) as two ranges
 * of 6 at 300-360, as single heads 284-310, as three ranges of 4 at
 * 296-301 (against 335-348 for two of 6 in the same minutes). 0: decode
 * takes the items above, or from ER_ATT_SPLIT_MIN positions the split
 * below. */
#define ER_ATT_HEADS_MIN 4
static inline int er_att_heads(const er_dims *d, int n_threads) {
    const int group = d->n_head / d->n_head_kv, cap = (int)er_att_queries(d) / group;
    const int per = (d->n_head_kv + n_threads - 1) / n_threads;
    if (n_threads > 1 && per < ER_ATT_HEADS_MIN) return 0;
    return per < cap ? per : cap;
}

/* A decode step's attention split in two over the threads instead
 * (forward.c, att_split_worker): ranges of K rows scored for every query
 * head, taken as they come, then a range of K/V heads' softmax and V sums
 * per thread, with results as on one thread (kernels.h,
 * attention_scores). For decode steps the K/V head ranges above do not take
 * (fewer than ER_ATT_HEADS_MIN K/V heads per thread), from ER_ATT_SPLIT_MIN
 * positions, for head sizes the split keeps bit for bit, and while every
 * query's scores fit in the threads' scratch taken as one buffer. Returns
 * the rows per item, or 0. Measured at 2 threads on 4 K/V heads against
 * the items above, alternating runs: decoding from 300 positions 606
 * against 611 tok/s, from 700 552 against 489 (medians of 3), from 1,536
 * 438 against 337 (of 4); the second dispatch is what shorter caches
 * would not repay. */
#define ER_ATT_SPLIT_MIN 256
static inline int er_att_split(const er_dims *d, int n_threads, int n_kv) {
    if (n_threads < 2 || n_kv < ER_ATT_SPLIT_MIN || d->head_dim % ER_ATT_SPLIT_LANES || er_att_heads(d, n_threads))
        return 0;
    if ((size_t)d->n_head * (size_t)n_kv > (size_t)n_threads * er_att_scratch(d)) return 0;
    /* two ranges per thread, of 64 to 256 rows (a multiple of 8) */
    const int rows = (n_kv / (2 * n_threads) + 7) / 8 * 8;
    return rows < 64 ? 64 : rows > 256 ? 256 : rows;
}

/*
 * Each layer's K/V cache is cut into blocks of d->kv_blk K/V heads, a block
 * holding its heads' columns for every position: [block][position][heads of
 * the block][head_dim]. With one block (kv_blk = n_head_kv, the usual case)
 * that is the plain [position][kv_row] layout. A model whose decode steps
 * split K/V head ranges over threads (er_att_heads > 0 at the model's thread
 * count) gets one block per range, so each thread's attention reads its
 * heads as one stream: cut out of whole rows, a range is a short piece every
 * kv_row elements, which hardware prefetchers do not follow (110M F16 K
 * rows of 1,536 bytes over 192 positions, this VM: one thread reads half of
 * each row in 15-17 us a layer, all of it in 8; two threads, each on half of
 * each row, 15-16 us; each on half of the positions, 5.4-6.5 us).
 * Returns the element offset of K/V head h at position pos within one
 * layer's cache (layers are n_ctx * kv_row elements apart); *stride gets the
 * elements from one position of that head to the next.
 */
static inline size_t er_kv_col_rows(const er_dims *d, size_t rows, int h, int pos, size_t *stride) {
    const int first = h / d->kv_blk * d->kv_blk;
    const int w = d->n_head_kv - first < d->kv_blk ? d->n_head_kv - first : d->kv_blk;
    *stride = (size_t)w * (size_t)d->head_dim;
    return (size_t)first * (size_t)d->head_dim * rows + (size_t)pos * *stride +
           (size_t)(h - first) * (size_t)d->head_dim;
}
static inline size_t er_kv_col(const er_dims *d, int h, int pos, size_t *stride) {
    return er_kv_col_rows(d, (size_t)d->n_ctx, h, pos, stride);
}

/*
 * Layers differ in how many cached rows they keep (er_layer kv_off,
 * kv_rows, ring): n_ctx for a global layer, none for LFM2's convolution
 * layers, and for a sliding-window layer a ring of R = window + n_batch - 1
 * positions, written twice (rows p % R and p % R + R), so that each query's
 * window [p - window + 1, p] is the R-row-or-less run starting at row
 * (p - window + 1) % R, read as the kernels read any cache. R is more than
 * the window by a prefill chunk less one: a chunk stores all its positions
 * before its attention reads, and its last store must not overwrite a row
 * its first query still sees. Taken where 2R < n_ctx (else the full cache).
 * er_kv_layer_rows gives a layer kind's rows and ring (0: none).
 */
static inline size_t er_kv_layer_rows(const er_dims *d, unsigned kind, int window, int *ring) {
    *ring = 0;
    if (kind & ER_L_CONV) return 0;
    if ((kind & ER_L_SWA) && window > 0) {
        const size_t r = (size_t)window + (size_t)d->n_batch - 1;
        if (2 * r < (size_t)d->n_ctx) {
            *ring = (int)r;
            return 2 * r;
        }
    }
    return (size_t)d->n_ctx;
}
/* The cache row of position pos in a layer with ring R (0: none). */
static inline int er_kv_slot(int ring, int pos) { return ring ? pos % ring : pos; }

struct er_session {
    er_model *model;
    int slot;
    int pos;                   /* tokens in the cache */
    int has_logits;
    int32_t *history;          /* n_ctx token ids */
    float *logits;             /* n_vocab */
    float *cand_p;             /* n_vocab sampler work */
    int32_t *cand_id;          /* n_vocab sampler work */
    void *k_cache, *v_cache;   /* full-size layers: kv_rows x kv_row of kv_type each, at er_layer.kv_off */
    void *k_ring, *v_ring;     /* sliding-window layers' rings, the same way (section kv_window) */
    float *conv_ring;          /* lfm2: [n_layer][conv_l][n_embd], B*x of position p in row p % conv_l */
    uint64_t rng;
    er_stats stats;
};

/* Layer L's K (v = 0) or V (v = 1) cache in session s, from its first row. */
static inline uint8_t *er_kv_base(const er_session *s, const er_layer *L, int v, size_t elem) {
    return (uint8_t *)(L->ring ? (v ? s->v_ring : s->k_ring) : (v ? s->v_cache : s->k_cache)) + L->kv_off * elem;
}

struct er_model {
    gguf_file file;
    er_hparams hp;
    er_dims d;
    er_plan_report plan;
    int vocab_only;
    int rope_neox;             /* qwen2 rotates halves; llama GGUF rotates adjacent pairs */

    void *arena_base;
    size_t arena_size;
    int arena_owned;           /* 1: we malloc'ed it at open and free it at close */
    er_arena sec[ER_SEC_COUNT];

    const er_kernels *k;       /* with the CUDA backend: the CPU table for host-side work (widening) */
    const char *isa_reason;
    er_cuda *cuda;             /* the CUDA backend's device state (isa "cuda"), else NULL */

    er_weight tok_embd, output;
    const float *output_norm;
    const float *rope_freqs;   /* n_rot/2 frequency divisors (rope_freqs.weight, Llama 3.x), or NULL */
    uint8_t *bound;            /* per tensor of the file: 1 once a step has bound it (model.c) */
    er_layer *layers;
    char **tensor_names;       /* NUL-terminated copies for er_model_tensor */

    er_vocab *vocab;
    int ctx_strategy, ctx_keep; /* er_options: what a full session does (kv_shift.c) */

    er_session *sessions;      /* n_sessions slots */
    atomic_int *slot_used;

    /* Forward-pass scratch (ER_SEC_ACT), sized for n_batch rows. */
    struct {
        float *x, *xb, *xb2, *q, *k, *v, *att, *hb, *hb2;
        void *xq;              /* prepared (quantized) activation rows */
        float *scores;         /* n_threads * er_att_scratch() */
        float *rope_cs;        /* n_batch * head_dim: (cos, sin) pairs of the step's positions */
        float *rope_cs_swa;    /* the same with the local layers' base (gemma3), else NULL */
        float *conv;           /* lfm2: n_batch * 3 * n_embd, in_proj's B, C and x */
        er_batch_row *rows;    /* n_batch: a batched step's rows' sessions and positions (er_forward_batch) */
        float *logits_b;       /* min(n_sessions, n_batch) * n_vocab: a batched step's last logits, or NULL
                                  with one session */
        int m_one;             /* a batched step's last rows taking one-row products (er_matmul_args), else 0 */
    } act;

    pthread_mutex_t step_lock; /* one forward step at a time: activations and pool are shared */
    er_pool pool;

    er_trace trace;            /* op-trace ring (ER_SEC_TRACE) */
    uint64_t fingerprint;      /* er_model_fingerprint; computed at open */

    /* live.c: set when an er_live handle takes the model over. live_refs is
     * 1 while the model is current plus 1 per session; the thread that drops
     * it to 0 closes the model. Unused (NULL/0) for models nobody hands over. */
    struct er_live *live;
    atomic_int live_refs;
};

/* family.c: finds the file's family, refuses keys under "<arch>." it does not
 * understand, and reads the family's keys into hp and d (traits). */
int er_family_read(const gguf_file *f, er_str arch, er_hparams *hp, er_dims *d);
/* ER_OK for an architecture with a row; else ER_EUNSUPPORTED naming the ones there are. */
int er_family_check(er_str arch);
/* ER_L_* bits of layer l. */
unsigned er_family_layer(const gguf_file *f, const er_dims *d, const er_hparams *hp, int l);
/* A per-layer "<arch>.attention.head_count_kv" array: 1 with *n_head_kv the
 * attention layers' count, 0 where the key is not an array, or an error. */
int er_family_head_count_kv(const gguf_file *f, const char *arch, int n_layer, int *n_head_kv);
/* "llama, qwen2, ...": the architectures this runtime runs (static). */
const char *er_family_list(void);

/* plan.c: derive dims from the file and options; fill the plan report. */
int er_plan_file(const gguf_file *f, const er_options *opts, er_hparams *hp, er_dims *d,
                 er_plan_report *out, int *rope_neox);

/* Resolves defaults into a copy of the options. */
void er_options_resolve(const er_options *in, er_options *out);

/* forward.c: runs m tokens at positions s->pos.. through the model. If
 * logits_all is not NULL it receives m * n_vocab floats; the last row always
 * lands in s->logits. Caller holds step_lock and has checked the context.
 * Returns ER_OK, or (CUDA backend only) the device's failure. */
int er_forward(er_session *s, const int32_t *ids, int m, float *logits_all);
/* One step for ns distinct sessions of one model, session i's n[i] >= 1 tokens
 * ids[i], sum of n[i] <= n_batch (the caller checks, holds step_lock, and
 * advances each pos); each session's last logits into its logits. CPU only. */
int er_forward_batch(er_session *const *ss, const int32_t *const *ids, const size_t *n, int ns);

/* kv_shift.c: makes room in a full session by the model's ctx_strategy
 * (edgerun.h, ER_CTX_SLIDE): forgets the middle, shifts the history and the
 * cache. Caller holds step_lock. ER_OK, ER_ECONTEXT where nothing can go
 * (ctx_keep holds it all), or a CUDA re-prefill's failure. */
int er_kv_slide(er_session *s);

/* plan.c: 1 when the (resolved) options select the CUDA backend. */
int er_options_cuda(const er_options *o);

/* sampler.c: top-p, min-p and the draw over n candidates already ranked best
 * first (cp = temperature-scaled logits, overwritten with weights); the CPU
 * and CUDA samplers share it so a seed draws the same token on both. */
int32_t er_sample_ranked(er_session *s, const er_sampling *p, float *cp, const int32_t *ci, int n);

/* session.c: takes a free slot of m without the er_live ownership check
 * (er_session_new refuses models owned by a handle; live.c uses this). */
int er_session_take(er_model *m, er_session **out);

/* live.c: the er_session_free of a session on a handle-owned model: frees the
 * slot, drops the session's model reference (closing a swapped-out model on
 * its last one) and the handle's active count. */
void er_live_session_release(er_session *s);

/* repack.c: bytes of the "repacked" section for file f with kernel table k
 * (0 when k has no interleaved layout for the file's matrices, or
 * $EDGERUN_REPACK is "0"); and, at open after the tensors are bound, the
 * copies themselves (sets er_weight.packed). */
size_t er_repack_plan(const gguf_file *f, const er_kernels *k, int n_layer);
int er_repack_model(er_model *m);

/* snapshot.c: the fingerprint er_model_fingerprint reports (hparams, tensor
 * table, sampled weight bytes); called once at open. */
uint64_t er_fingerprint_compute(const er_model *m);

/* Time in milliseconds from a monotonic clock. */
double er_now_ms(void);

#endif
