/*
 * edgerun.h — the one public header of the edgerun runtime.
 *
 * Memory model: a model file is memory-mapped read-only; everything else the
 * runtime needs (tensor bindings, KV caches, activations, logits, sampler and
 * tokenizer tables) lives in ONE arena that er_model_open sizes with er_plan and
 * allocates once (or takes from the caller). After er_model_open returns, no
 * entry point calls malloc/calloc/realloc/free (except er_live_open, and the
 * close of a swapped-out model by its last session: see er_live).
 *
 * Errors: every function returning int returns ER_OK (0) or a negative
 * er_status. The message describing the most recent failure on the calling
 * thread is available from er_last_error() until the next failing call on
 * that thread.
 *
 * Threads: an er_model is immutable after open and may be shared; an
 * er_session must be used by one thread at a time; tokenizer calls are
 * stateless and may run on any number of threads at once.
 *
 * The block between ER_CDEF_BEGIN and ER_CDEF_END is read verbatim by the
 * Python binding (cffi cdef); keep it free of preprocessor directives.
 */
#ifndef EDGERUN_H
#define EDGERUN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ER_API __declspec(dllexport)
#else
#define ER_API __attribute__((visibility("default")))
#endif

#define ER_VERSION_MAJOR 0
#define ER_VERSION_MINOR 1
#define ER_VERSION_PATCH 0

/* ER_CDEF_BEGIN */

/* Status codes. All failures are negative. */
typedef enum er_status {
    ER_OK = 0,
    ER_EINVAL = -1,          /* a NULL or out-of-range argument */
    ER_EIO = -2,             /* open/stat/mmap/read failed (errno text in the message) */
    ER_ECORRUPT = -3,        /* the file is not a valid GGUF v3 / is internally inconsistent */
    ER_EUNSUPPORTED = -4,    /* valid file, but an architecture/type/feature we do not run */
    ER_ENOMEM_ARENA = -5,    /* caller-provided arena too small; message states the shortfall */
    ER_ENOMEM = -6,          /* the one arena allocation at open failed */
    ER_ECONTEXT = -7,        /* the request would exceed the session's context (n_ctx) */
    ER_EBUSY = -8,           /* all session slots planned at open are in use */
    ER_ERANGE = -9,          /* an output buffer is too small; *n_out says how much is needed */
    ER_ESTATE = -10,         /* call not valid in the current state (e.g. sample before decode) */
    ER_EMISMATCH = -11       /* a valid snapshot of another model, or of an incompatible KV cache type */
} er_status;

typedef struct er_model er_model;       /* immutable after open; shareable across threads */
typedef struct er_session er_session;   /* one generation stream: KV cache, history, RNG */
typedef struct er_vocab er_vocab;       /* tokenizer view; owned by its er_model */

/* KV cache element type. */
enum { ER_KV_F32 = 0, ER_KV_F16 = 1 };

/* What a session does when a decode would pass n_ctx (er_options.ctx_strategy).
 * ER_CTX_FAIL: the decode fails with ER_ECONTEXT (nothing is appended).
 * ER_CTX_SLIDE: a decode fills the context; at n_ctx the session keeps its
 *   first ctx_keep tokens and the most recent half of the rest (rounded
 *   down), forgets the others, and goes on (a long decode slides as often as
 *   it needs; er_decode_all's rows are still one per token given);
 *   the token history shifts with the cache. The kept K rows are rotated in
 *   place to their new positions with each layer's own RoPE (frequency
 *   factors, linear scaling, partial rotary, gemma3's local and global bases;
 *   NoPE layers are moved only): no prefill, no allocation. The rows of the
 *   kept recent tokens still hold what those tokens saw before the shift, as
 *   in any in-place context shift, so later logits are close to, not equal
 *   to, a fresh session's over the kept tokens. Where rows cannot be moved
 *   and rotated exactly, the kept tokens are prefilled again from position 0
 *   instead (arena buffers only): sliding-window layers kept as rings (their
 *   row is position modulo the ring), LFM2's convolution state (indexed by
 *   position), Phi-3 LongRoPE (its attention factor scales cos and sin, so a
 *   rotation by the position delta would scale the row again), and the CUDA
 *   backend (its cache lives on the device).
 * ER_CTX_SLIDE_PREFILL: the same tokens are kept, always prefilled again: the
 *   logits after a shift equal a fresh session's prefilled with the kept
 *   tokens, at the cost of a prefill of up to n_ctx/2 + ctx_keep tokens. */
enum { ER_CTX_FAIL = 0, ER_CTX_SLIDE = 1, ER_CTX_SLIDE_PREFILL = 2 };

/* Options for er_plan and er_model_open. Start from er_options_default(). */
typedef struct er_options {
    int32_t n_ctx;        /* context length per session; 0 = min(model's context_length, 2048) */
    int32_t n_batch;      /* most tokens one forward step processes (prefill chunk); 0 = 64 */
    int32_t n_threads;    /* worker threads created at open; 0 = 1 */
    int32_t n_sessions;   /* session slots (each with its own KV cache); 0 = 1 */
    int32_t kv_type;      /* ER_KV_F32 or ER_KV_F16 */
    int32_t vocab_only;   /* 1: open only the tokenizer (vocabulary-only GGUF files) */
    size_t arena_bytes;   /* with arena != NULL: size of the caller's buffer */
    void *arena;          /* NULL: er_model_open allocates; else caller-owned, 64-byte aligned,
                             must outlive the model, and is the arena of this model only (two
                             open models in one buffer overwrite each other's weights and caches;
                             the Python binding refuses that, C does not track its callers' buffers) */
    const char *isa;      /* NULL/"" = best for this CPU (or $EDGERUN_ISA); "generic", ...;
                             "cuda" = the CUDA backend on GPU 0 (a build with -Dcuda=enabled and a
                             GPU + driver; otherwise ER_EUNSUPPORTED saying which is missing; also
                             ER_EUNSUPPORTED for n_batch > 65535 or a head dimension > 256, past
                             the CUDA kernels' launch limits) */
    int32_t trace_events; /* capacity of the op-trace ring in events, planned in the arena's "trace"
                             section; 0 = no ring (tracing unavailable, zero cost). With a ring,
                             recording starts on at open (see er_trace_enable). Range [0, 2^24]. */
    uint64_t cpu_mask;    /* 0 = no pinning; else bit i set = worker threads may run on CPU i (a
                             board's big cores; Linux only). A mask naming no usable CPU fails
                             the open with ER_EINVAL. */
    int32_t ctx_strategy; /* ER_CTX_FAIL (default), ER_CTX_SLIDE or ER_CTX_SLIDE_PREFILL (above) */
    int32_t ctx_keep;     /* tokens a slide always keeps at the start (the system prompt, BOS);
                             0 <= ctx_keep <= n_ctx - 2, else the open fails with ER_EINVAL */
} er_options;

/* One named region of the arena. */
typedef struct er_section {
    const char *name;     /* static string: "model", "kv_cache", "activations", ... */
    size_t bytes;         /* bytes the plan reserves for the section */
    size_t used;          /* high-water mark actually used (0 in a plan) */
    int32_t persistent;   /* 1: lives for the model's lifetime; 0: scratch reused per step */
    int32_t device;       /* 0: host arena; 1: GPU memory (isa "cuda": the one device allocation) */
} er_section;

#define ER_MAX_SECTIONS 16

/* The arena plan: bytes per section and the total, including alignment.
 * With isa "cuda" the host sections that live on the GPU instead (kv_cache,
 * activations) shrink to what the host still needs, and the device sections
 * ("gpu_weights", "gpu_kv_cache", "gpu_activations", "gpu_scratch") follow
 * the host ones. (The CUDA fields are additive: a library from before them
 * fills the same layout.) */
typedef struct er_plan_report {
    int32_t n_sections;
    er_section sections[16]; /* ER_MAX_SECTIONS (a literal: cffi reads this block); 9 host sections,
                                then up to 4 device sections */
    size_t total_bytes;   /* the exact arena size er_model_open needs (host sections only) */
    int32_t n_ctx, n_batch, n_threads, n_sessions, kv_type;
    size_t device_bytes;  /* the one device allocation (sections with device = 1); 0 on the CPU */
    size_t pinned_bytes;  /* the CUDA backend's pinned host staging (cudaHostAlloc, outside the
                             arena); 0 on the CPU */
} er_plan_report;

/* Hyper-parameters as read from the file. */
typedef struct er_hparams {
    char arch[32];            /* "llama", "qwen2" */
    char name[64];            /* general.name or "" */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx_train, head_dim;
    float rope_freq_base;
    float rms_eps;
    int32_t tied_output;      /* 1: output projection reuses token_embd */
    int32_t has_qkv_bias;     /* 1: qwen2-style attention biases */
    uint64_t n_params;        /* elements over all tensors */
    uint64_t weight_bytes;    /* bytes of all tensor data in the file */
    /* Family traits (arch "llama", "qwen2", "qwen3", "smollm3", "gemma3", "phi3"). */
    int32_t n_rot;            /* dimensions of each head RoPE rotates (head_dim unless partial, phi3) */
    float rope_scale;         /* linear RoPE scaling factor: frequencies divided by it (1 = none) */
    int32_t rope_freq_factors; /* 1: per-frequency divisors from rope_freqs.weight (Llama 3.x) */
    float rope_freq_base_swa; /* RoPE base of the sliding-window layers (gemma3), else rope_freq_base */
    int32_t sliding_window;   /* positions a sliding-window layer attends to (0 = none) */
    float final_logit_softcap; /* logits = c * tanh(logits / c) with this c (0 = none) */
    int32_t rope_longrope;    /* LongRoPE (phi3): 1 = rope_factors_short, 2 = rope_factors_long, chosen at
                                 open as llama.cpp does: long when n_ctx > the original context; 0 = none */
    float rope_attn_factor;   /* RoPE cos and sin scaled by it (rope.scaling.attn_factor; 1 = none) */
    int32_t rope_orig_ctx;    /* LongRoPE's original context (rope.scaling.original_context_length): the
                                 n_ctx above which the long factors apply; 0 without LongRoPE */
} er_hparams;

/* A layer's block as the forward pass runs it (er_model_layer). */
enum { ER_BLOCK_ATTENTION = 0, ER_BLOCK_SHORTCONV = 1 };
typedef struct er_layer_info {
    int32_t block;            /* ER_BLOCK_ATTENTION, or ER_BLOCK_SHORTCONV (LFM2: a gated short
                                 convolution in attention's place, the file's 0 K/V heads) */
    int32_t rope;             /* how RoPE turns the layer's Q and K: 1 as the hyper-parameters say
                                 (base rope_freq_base, with any scaling); 2 with the local layers' own
                                 base rope_freq_base_swa and no scaling (gemma3's sliding-window
                                 layers); 0 not at all (SmolLM3's every 4th layer, every short
                                 convolution) */
    int32_t window;           /* positions a query attends to: the sliding window of a local layer
                                 (gemma3's 5 of 6, phi3's where set), 0 = the whole context */
    int32_t n_head_kv;        /* K/V heads (0 for a short convolution) */
    int32_t conv_kernel;      /* taps of the short convolution (shortconv.l_cache), else 0 */
} er_layer_info;

/* One tensor of the file. Pointers are into the model's mapping. */
typedef struct er_tensor_info {
    const char *name;         /* NUL-terminated copy kept in the arena */
    const char *type_name;    /* "F32", "F16", "BF16", "Q8_0", "Q4_0", ... */
    int32_t type;             /* GGML type id */
    int32_t n_dims;
    int64_t ne[4];            /* ne[0] is the contiguous (row) dimension */
    uint64_t offset;          /* byte offset in the file */
    uint64_t nbytes;
} er_tensor_info;

/* Sampling parameters. temperature <= 0 means greedy (argmax). */
typedef struct er_sampling {
    float temperature;        /* 0 = greedy */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repeat_penalty;     /* 1 = off; applied to the last repeat_last_n tokens of history */
    int32_t repeat_last_n;    /* 0 = whole history */
} er_sampling;

/* Run-time statistics of a session (timings measured by the runtime). */
typedef struct er_stats {
    double prefill_ms;        /* total time in er_decode for calls with more than one token */
    double decode_ms;         /* total time in single-token er_decode calls */
    double sample_ms;
    int64_t n_prefill_tokens;
    int64_t n_decode_tokens;
    double last_prefill_ms;   /* the most recent multi-token call (TTFT of its request) */
} er_stats;

/* One timed operation of the forward pass (see er_trace_get). Timestamps are
 * nanoseconds of a monotonic clock since the model was opened. */
typedef struct er_trace_event {
    uint64_t t_start_ns;
    uint64_t t_end_ns;
    int32_t op;               /* ER_OP_*; er_trace_op_name gives its name */
    int32_t layer;            /* 0.., or -1 outside the layer stack (embedding, output) */
    int32_t thread;           /* 0: the thread that called er_decode (whole operation);
                                 1..n_threads-1: a pool worker's share of a parallel operation */
    int32_t shape[3];         /* [rows (tokens in the step), outputs, inputs]; attention:
                                 [rows, heads, positions attended]; unused entries 0 */
} er_trace_event;

/* Operations er_trace_event.op names, in the order a layer runs them, but
 * for those appended later so that the earlier values keep their numbers:
 * ER_OP_GELU_MUL, the feed-forward gate of a GeGLU model (gemma3), which runs
 * where ER_OP_SILU_MUL runs in a SwiGLU model; and the short-convolution
 * block of an LFM2 layer without attention, which runs between
 * ER_OP_ATTN_NORM and ER_OP_FFN_NORM in place of ER_OP_QKV .. ER_OP_ATTN_OUT:
 * ER_OP_CONV_IN (in_proj, giving B, C and x), ER_OP_SHORTCONV (the gated
 * convolution over the last positions; shape [rows, n_embd, 3 * n_embd]) and
 * ER_OP_CONV_OUT (out_proj). */
enum {
    ER_OP_EMBED = 0, ER_OP_ATTN_NORM, ER_OP_QKV, ER_OP_ROPE, ER_OP_KV_STORE, ER_OP_ATTENTION,
    ER_OP_ATTN_OUT, ER_OP_FFN_NORM, ER_OP_FFN_GATE_UP, ER_OP_SILU_MUL, ER_OP_FFN_DOWN,
    ER_OP_OUTPUT_NORM, ER_OP_LM_HEAD, ER_OP_GELU_MUL, ER_OP_CONV_IN, ER_OP_SHORTCONV, ER_OP_CONV_OUT,
    ER_OP_COUNT
};

/* Streaming detokenizer state: caller-owned, zero-initialise (or er_detok_reset). */
typedef struct er_detok_state {
    uint8_t pending[8];       /* bytes of an incomplete UTF-8 sequence held back */
    int32_t n_pending;
    int32_t n_emitted;        /* tokens seen so far (drives SentencePiece's leading-space rule) */
} er_detok_state;

/* Tokenizer flags for er_tokenize. */
enum { ER_TOK_ADD_SPECIAL = 1, ER_TOK_PARSE_SPECIAL = 2 };

/* Tokenizer families. */
enum { ER_VOCAB_NONE = 0, ER_VOCAB_SPM = 1, ER_VOCAB_BPE = 2 };

/* Message of the calling thread's last failure ("" if none). Never NULL.
 * The string is thread-local and valid until that thread's next failing call. */
ER_API const char *er_last_error(void);

/* Human-readable name of a status code ("ER_ECORRUPT", ...). Never NULL. */
ER_API const char *er_status_name(int status);

/* Library version "MAJOR.MINOR.PATCH". */
ER_API const char *er_version(void);

/* Fills *opts with the defaults described in er_options. Returns ER_EINVAL on NULL. */
ER_API int er_options_default(er_options *opts);

/* Computes the arena needed to open `path` with `opts` (NULL = defaults) without
 * allocating heap memory: the file is mapped, validated, measured and unmapped.
 * Errors: ER_EINVAL, ER_EIO, ER_ECORRUPT, ER_EUNSUPPORTED. */
ER_API int er_plan(const char *path, const er_options *opts, er_plan_report *out);

/* Opens a model: maps the file, validates every header field and tensor, plans
 * and allocates the arena (or uses opts->arena), binds tensors, builds tokenizer
 * tables and starts the worker threads. Every page of the arena is resident
 * when it returns, the KV caches of all n_sessions slots included (so
 * resident memory is the plan's total from the start, and decode steps take
 * no page faults), and every worker thread is running. On success *out owns
 * the mapping, the arena (if it allocated it) and the threads; release with
 * er_model_close.
 * Errors: ER_EINVAL, ER_EIO, ER_ECORRUPT, ER_EUNSUPPORTED, ER_ENOMEM,
 * ER_ENOMEM_ARENA (caller arena too small: the message gives needed, given and
 * the shortfall in bytes). On failure *out is NULL and nothing is leaked. */
ER_API int er_model_open(const char *path, const er_options *opts, er_model **out);

/* Releases the model. All its sessions must have been freed. NULL is a no-op. */
ER_API void er_model_close(er_model *model);

/* Copies the hyper-parameters. Errors: ER_EINVAL. */
ER_API int er_model_hparams(const er_model *model, er_hparams *out);

/* Fills *out with layer `layer`'s kind as the forward pass runs it: which
 * block, whether RoPE applies, its sliding window. These follow from the
 * family and the file (family.c) and are not all keys of the file, so a
 * tool that reports them asks here rather than re-deriving the family's
 * rules. Errors: ER_EINVAL (NULL argument, layer outside [0, n_layer), or a
 * vocabulary-only model, which has no layers). */
ER_API int er_model_layer(const er_model *model, int layer, er_layer_info *out);

/* A string metadata key of the file (e.g. "tokenizer.chat_template"): *ptr
 * points into the model's mapping (valid until er_model_close, NOT
 * NUL-terminated) and *len is its byte count. Errors: ER_EINVAL (NULL
 * argument, the key absent, or a key of another type: the message says which). */
ER_API int er_model_meta_str(const er_model *model, const char *key, const char **ptr, size_t *len);

/* The plan the model was opened with, with per-section high-water marks in `used`. */
ER_API int er_model_arena(const er_model *model, er_plan_report *out);

/* Number of tensors in the file, and the description of tensor i (0-based).
 * Errors: ER_EINVAL (NULL or i out of range). */
ER_API int er_model_n_tensors(const er_model *model);
ER_API int er_model_tensor(const er_model *model, int32_t i, er_tensor_info *out);

/* Name of the kernel table in use ("generic", "avx2", "neon", ...) and why it was
 * chosen (static strings; "" for a NULL model). */
ER_API const char *er_model_isa(const er_model *model);
ER_API const char *er_model_isa_reason(const er_model *model);

/* Space-separated CPU features the kernel dispatcher detected ("avx avx2 fma
 * f16c", "asimd asimddp fphp sve", ...); "" when none are known. Static
 * storage, safe from any thread; needs no model (`edgerun info --isa`). */
ER_API const char *er_cpu_features(void);

/* ---- CUDA devices --------------------------------------------------------- */

/* One GPU as the CUDA backend sees it. */
typedef struct er_cuda_device {
    char name[256];           /* "NVIDIA H200", "Orin", ... */
    int32_t major, minor;     /* compute capability (8.7 = Jetson Orin, 9.0 = Hopper) */
    int32_t integrated;       /* 1: shares DRAM with the CPU (Jetson) */
    int32_t n_sm;             /* streaming multiprocessors */
    uint64_t total_bytes;     /* device memory */
} er_cuda_device;

/* Number of CUDA devices the backend can use (>= 1), or ER_EUNSUPPORTED with
 * the reason in er_last_error(): this build has no CUDA backend (rebuild
 * with -Dcuda=enabled), or the CUDA runtime found no device or no usable
 * driver (the CUDA error text). Models with isa "cuda" run on device 0. */
ER_API int er_cuda_device_count(void);

/* Describes device i (0-based). Errors: ER_EINVAL (NULL, i out of range),
 * ER_EUNSUPPORTED (as er_cuda_device_count). */
ER_API int er_cuda_device_get(int32_t i, er_cuda_device *out);

/* Takes a free session slot (KV cache, history, RNG live in the arena).
 * Errors: ER_EINVAL, ER_EBUSY (all n_sessions slots in use). */
ER_API int er_session_new(er_model *model, er_session **out);

/* Returns the slot to the model. NULL is a no-op. */
ER_API void er_session_free(er_session *session);

/* Forgets all tokens (position 0, empty history); keeps RNG state and stats. */
ER_API int er_session_reset(er_session *session);

/* Seeds the sampler's RNG (xorshift-based; the same seed gives the same tokens). */
ER_API int er_session_seed(er_session *session, uint64_t seed);

/* Keeps the first n tokens of the session (0 <= n <= pos) and forgets the
 * rest: the next er_decode appends at position n, over the forgotten rows. A
 * chat re-rendering its conversation keeps the common prefix this way instead
 * of prefilling it again. The last logits go with the forgotten tokens
 * (er_sample gives ER_ESTATE until the next decode); RNG and stats are kept.
 * n == pos changes nothing. Errors: ER_EINVAL (NULL, n < 0 or n > pos);
 * ER_EUNSUPPORTED where a sliding-window ring or LFM2's convolution state
 * (which keep only the last positions) no longer holds what the step at n
 * reads: nothing changes, and the caller resets and prefills instead. */
ER_API int er_session_truncate(er_session *session, int32_t n);

/* The token ids the cache holds, in position order: *ids points at the
 * session's history (valid until its next decode, truncate or reset) and the
 * return value is their count (er_session_pos), or an error (ER_EINVAL on
 * NULL). After a slide (ER_CTX_SLIDE) it is the shifted history, so a chat
 * finds its common prefix against what the cache really holds. */
ER_API int er_session_history(const er_session *session, const int32_t **ids);

/* Tokens in the KV cache, and the context size. */
ER_API int er_session_pos(const er_session *session);
ER_API int er_session_n_ctx(const er_session *session);

/* Copies the timing statistics. */
ER_API int er_session_stats(const er_session *session, er_stats *out);

/* Appends n tokens (n >= 1) to the session, running the forward pass in chunks of
 * n_batch. On success *last_logits (if not NULL) points at n_vocab floats: the
 * logits after the last token, inside the arena, valid until the next call on
 * this session. Errors: ER_EINVAL (NULL, n == 0, id out of range), ER_ECONTEXT
 * (pos + n > n_ctx; nothing is appended). */
ER_API int er_decode(er_session *session, const int32_t *ids, size_t n, float **last_logits);

/* Like er_decode, but writes the logits after EVERY token into the caller's
 * buffer `out` (n * n_vocab floats, row-major). Errors as er_decode, plus
 * ER_ERANGE when out_cap < n * n_vocab. */
ER_API int er_decode_all(er_session *session, const int32_t *ids, size_t n, float *out, size_t out_cap);

/* One forward step for n_sessions distinct sessions of the same model: session
 * i appends n_ids[i] >= 1 tokens ids[i] (a prompt chunk, or one decode
 * token), and every weight matrix is streamed once for all of them. Each
 * session's logits are bit for bit those er_decode would give it alone. On
 * success last_logits[i] (if last_logits is not NULL) points at session i's
 * n_vocab last logits, as er_decode's. The rows of one step, the sum of
 * n_ids, must fit in the model's n_batch (no chunking: a scheduler sizes its
 * chunks). Errors, with nothing appended to any session: ER_EINVAL (NULL
 * arrays or sessions, n_sessions == 0, n_ids[i] == 0, a session given twice,
 * sessions of different models, an id out of range), ER_ECONTEXT (a session
 * without room for its tokens), ER_ERANGE (sum of n_ids > n_batch),
 * ER_EUNSUPPORTED (a model run by the CUDA backend). */
ER_API int er_decode_batch(er_session *const *sessions, const int32_t *const *ids, const size_t *n_ids,
                           size_t n_sessions, float **last_logits);

/* Picks the next token from the last logits with `params` (NULL = greedy),
 * using the session's RNG and token history (for the repetition penalty).
 * Does not append the token. Errors: ER_EINVAL, ER_ESTATE (no logits yet). */
ER_API int er_sample(er_session *session, const er_sampling *params, int32_t *id_out);

/* Default sampling parameters (greedy, everything off). */
ER_API int er_sampling_default(er_sampling *params);

/* Checks params as er_sample would, without a session: a caller can refuse
 * bad sampling before it prefills a prompt (whose tokens would otherwise be
 * in the cache when er_sample fails). Errors: ER_EINVAL naming the field and
 * its range (NULL is greedy: ER_OK). */
ER_API int er_sampling_check(const er_sampling *params);

/* ---- snapshots ---------------------------------------------------------- */

/* A 64-bit fingerprint of the model: FNV-1a over the hyper-parameters, the
 * tensor table (names, types, shapes, offsets) and 64 bytes at the start,
 * middle and end of every tensor's data. Computed once at open; two files
 * with equal fingerprints are treated as the same model by er_session_load.
 * Errors: ER_EINVAL. */
ER_API int er_model_fingerprint(const er_model *model, uint64_t *out);

/* Writes the session's state to `path`: KV cache rows [0, pos), token history,
 * last logits, sampler RNG and statistics, behind a versioned header with the
 * model fingerprint and CRC-32 checksums. Crash-safe: the bytes go to a
 * temporary file in the same folder ("<path>.tmp.<pid>"), which is fsynced and
 * renamed over `path`, then the folder is fsynced, so `path` always holds
 * either the previous snapshot or the new one, complete. No heap is used.
 * Errors: ER_EINVAL (NULL, path too long), ER_EIO (message has the errno text;
 * `path` is then untouched and the temporary file removed). */
ER_API int er_session_save(const er_session *session, const char *path);

/* Replaces the session's state with the snapshot at `path`. Everything (size,
 * version, checksums, fingerprint, KV type, context) is verified before the
 * session is touched: on any error the session is exactly as it was.
 * Generation continued after a load is token-identical to continuing the saved
 * session, also where the saving and the loading model were opened with
 * different n_threads (the file holds whole K/V rows whatever blocks the
 * cache keeps in memory). Errors: ER_EINVAL, ER_EIO, ER_ECORRUPT (not a
 * snapshot, truncated, checksum mismatch), ER_EUNSUPPORTED (a snapshot
 * version this runtime does not read), ER_EMISMATCH (another model, or
 * another kv_type), ER_ECONTEXT (the snapshot holds more positions than this
 * session's n_ctx). */
ER_API int er_session_load(er_session *session, const char *path);

/* ---- live model swap ------------------------------------------------------ */

/* A swappable handle: the model that new requests run on can be replaced
 * while other threads keep generating. Semantics, precisely:
 *  - A session belongs to the model it was taken from (er_live_session_new
 *    binds it to the model current at that moment) until it is freed. Its KV
 *    cache was computed with that model's weights, so every step it runs uses
 *    those weights and no other: a step in flight when er_live_swap returns
 *    finishes on the old weights, and no step ever mixes two models.
 *  - Every session taken after er_live_swap returns runs on the new model.
 *    A session that should continue on the new weights calls
 *    er_live_session_rebind between steps: its tokens are re-run through the
 *    new model (a prefill) and the next step uses the new weights.
 *  - Each model counts its references: one while it is current, one per
 *    session. A swapped-out model is closed (er_model_close: workers joined,
 *    file unmapped, arena freed) by whichever thread drops its last
 *    reference: er_live_swap itself when it had no sessions, else the
 *    er_session_free (or rebind) that ends its last session, on that thread.
 * Why a handle and not er_model_swap(er_model **live, er_model *next): a bare
 * pointer gives readers no way to take a reference atomically with reading
 * it, so a model could be closed between a reader loading the pointer and
 * starting a session on it. The handle pairs the two under its lock.
 * Threads: all er_live_* calls and er_session_free may run on any threads at
 * once (er_live_close excepted: no other call on the handle may be running).
 * Steps (er_decode, er_sample) take no lock of the handle. A session is still
 * used by one thread at a time. Memory: er_live_open allocates the handle
 * (one small malloc); no other call allocates except er_model_close freeing
 * a retired model's arena. */
typedef struct er_live er_live;

/* Counters of a live handle; each is read atomically, the set is not one instant. */
typedef struct er_live_stats {
    uint64_t generation;        /* swaps so far: the current model is generation N (the first is 0) */
    uint64_t current_fingerprint; /* er_model_fingerprint of the current model */
    uint64_t sessions_started;  /* sessions taken through the handle (rebinds not counted) */
    int64_t sessions_active;    /* sessions not yet freed, on any of its models */
    uint64_t models_closed;     /* swapped-out models closed so far (their last session ended) */
    int32_t models_open;        /* models still open: the current one + swapped-out ones with sessions */
} er_live_stats;

/* Creates a handle whose current model is `model`, taking ownership of it:
 * from now on the handle closes it, and sessions on it must come from
 * er_live_session_new (er_session_new refuses it with ER_ESTATE).
 * On failure the caller keeps the model. Errors: ER_EINVAL (NULL, or a
 * vocab_only model), ER_ESTATE (the model already belongs to a handle),
 * ER_EBUSY (the model has sessions in use), ER_ENOMEM. */
ER_API int er_live_open(er_model *model, er_live **out);

/* Makes `next` the current model, atomically for er_live_session_new, and
 * takes ownership of it; the previous model is closed once its last session
 * ends (at once if it has none). Sessions already running are not touched.
 * On failure nothing changes and the caller keeps `next`. Errors as
 * er_live_open (ER_ESTATE also when next is the current model). */
ER_API int er_live_swap(er_live *live, er_model *next);

/* Takes a free session slot of the current model and binds the session to
 * that model (see above). Release with er_session_free.
 * Errors: ER_EINVAL, ER_EBUSY (all slots of the current model in use). */
ER_API int er_live_session_new(er_live *live, er_session **out);

/* Moves *session to the current model if it runs on an older one: a session
 * is taken on the current model, the old session's tokens are decoded into it
 * (its last logits are then the new model's), the RNG seed state and stats
 * are carried over, the old session is freed (which may close the old model)
 * and *session points at the new one. Returns 0 when *session already ran on
 * the current model (nothing done), 1 when it was moved. On error *session is
 * unchanged and still valid. Errors: ER_EINVAL, ER_EBUSY (no free slot on the
 * current model), ER_ECONTEXT (the tokens exceed the current model's n_ctx). */
ER_API int er_live_session_rebind(er_live *live, er_session **session);

/* Copies the handle's counters. Errors: ER_EINVAL. */
ER_API int er_live_stats_get(er_live *live, er_live_stats *out);

/* Closes the current model and frees the handle. Every session taken through
 * it must have been freed: otherwise nothing is released and ER_EBUSY is
 * returned. NULL is a no-op (ER_OK). */
ER_API int er_live_close(er_live *live);

/* The model a session runs on (for its vocabulary, hyper-parameters and
 * fingerprint); valid while the session is. NULL for a NULL session. */
ER_API const er_model *er_session_model(const er_session *session);

/* ---- tracing ------------------------------------------------------------ */

/* Turns recording into the trace ring on (1) or off (0). Off costs one
 * predictable branch per operation. Errors: ER_EINVAL (NULL, on not 0/1),
 * ER_ESTATE (the model was opened with trace_events = 0: there is no ring). */
ER_API int er_trace_enable(er_model *model, int on);

/* Forgets all recorded events. Errors: ER_EINVAL. */
ER_API int er_trace_reset(er_model *model);

/* Events held in the ring (at most trace_events; when more were recorded the
 * oldest were overwritten), or a negative er_status (ER_EINVAL). */
ER_API int er_trace_count(er_model *model);

/* Copies held event i (0 = oldest). Errors: ER_EINVAL (NULL or i out of range). */
ER_API int er_trace_get(er_model *model, int32_t i, er_trace_event *out);

/* Name of an ER_OP_* value ("qkv", "attention", ...); "unknown" otherwise. */
ER_API const char *er_trace_op_name(int op);

/* Writes the held events as Chrome trace-event JSON ({"traceEvents": [...]},
 * complete events with ts/dur in microseconds, tid = the thread index, args
 * with layer and shape), which Perfetto and chrome://tracing open. Waits for
 * a running forward step to finish. Errors: ER_EINVAL, ER_EIO. */
ER_API int er_trace_export(er_model *model, const char *path);

/* ---- tokenizer ---------------------------------------------------------- */

/* The model's tokenizer, or NULL if the file has none. Owned by the model. */
ER_API const er_vocab *er_model_vocab(const er_model *model);

/* Vocabulary facts. A NULL vocab gives ER_EINVAL (-1) with a message ("none"
 * for er_vocab_pre). */
ER_API int er_vocab_kind(const er_vocab *vocab);            /* ER_VOCAB_SPM / ER_VOCAB_BPE */
ER_API int er_vocab_n_tokens(const er_vocab *vocab);
ER_API int er_vocab_bos(const er_vocab *vocab);             /* -1 if none */
ER_API int er_vocab_eos(const er_vocab *vocab);             /* -1 if none */
ER_API int er_vocab_is_eog(const er_vocab *vocab, int32_t id); /* 1 for EOS/EOT-like ids, 0 otherwise
                                                                  (also for ids out of range) */
ER_API const char *er_vocab_pre(const er_vocab *vocab);     /* pre-tokenizer name, static */

/* Bytes of scratch er_tokenize needs for `text_len` bytes of input. The bound is
 * linear in text_len; passing less makes er_tokenize fail with ER_ERANGE.
 * SIZE_MAX for a NULL vocab or an absurd text_len (> 2^40). */
ER_API size_t er_tokenize_scratch_bytes(const er_vocab *vocab, size_t text_len);

/* Encodes UTF-8 text to ids. flags: ER_TOK_ADD_SPECIAL (BOS/EOS per the file's
 * add_bos_token/add_eos_token), ER_TOK_PARSE_SPECIAL (match special tokens in
 * the text). Uses only `scratch` (caller-owned) besides the read-only vocab.
 * On success *n_out = number of ids written. Errors: ER_EINVAL, ER_ERANGE (cap
 * or scratch too small: *n_out then holds the ids needed, when known). */
ER_API int er_tokenize(const er_vocab *vocab, const char *text, size_t len, int flags,
                       int32_t *ids, size_t cap, size_t *n_out,
                       void *scratch, size_t scratch_bytes);

/* The raw text of token `id` as stored in the file (NUL-terminated, in the arena);
 * NULL (with a message) for a NULL vocab or an id out of range. */
ER_API const char *er_vocab_token_text(const er_vocab *vocab, int32_t id);

/* Streaming decode: appends the bytes token `id` contributes to `out` (at most
 * cap bytes), holding back an incomplete UTF-8 sequence in *state until it
 * completes. *n_out = bytes written. Errors: ER_EINVAL, ER_ERANGE. */
ER_API int er_detok_step(const er_vocab *vocab, er_detok_state *state, int32_t id,
                         char *out, size_t cap, size_t *n_out);

/* Flushes held-back bytes (invalid sequences become U+FFFD) at end of stream. */
ER_API int er_detok_flush(const er_vocab *vocab, er_detok_state *state,
                          char *out, size_t cap, size_t *n_out);

/* Decodes a whole id sequence to text as Hugging Face's decode does
 * (skip_special: 1 drops control tokens). *n_out = bytes (not counting the
 * terminating NUL, which is written when room allows).
 * Errors: ER_EINVAL, ER_ERANGE (*n_out = bytes needed). */
ER_API int er_detokenize(const er_vocab *vocab, const int32_t *ids, size_t n, int skip_special,
                         char *out, size_t cap, size_t *n_out);

/* ER_CDEF_END */

#ifdef __cplusplus
}
#endif
#endif /* EDGERUN_H */
