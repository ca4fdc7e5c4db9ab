/*
 * plan.c — hyper-parameters from the file and the arena plan.
 *
 * The plan is the contract of the static arena: model.c carves exactly these
 * sections and never asks for more, so the numbers er_plan prints are the
 * bytes the device will use. Everything is computed with overflow checks,
 * because the dimensions come from an untrusted file.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "error.h"
#include "model.h"
#include "tokenizer/vocab.h"

static const char *const k_sec_names[ER_SEC_COUNT] = {
    "model", "tokenizer", "kv_cache", "sessions", "activations", "threads", "trace", "repacked", "kv_window",
};
static const int k_sec_persistent[ER_SEC_COUNT] = {1, 1, 1, 1, 0, 1, 1, 1, 1};
/* the report holds every host section and the CUDA plan's device ones */
_Static_assert(sizeof(((er_plan_report *)0)->sections) / sizeof(er_section) == ER_MAX_SECTIONS,
               "er_plan_report.sections must hold ER_MAX_SECTIONS");
_Static_assert(ER_SEC_COUNT + ER_DSEC_PINNED <= ER_MAX_SECTIONS, "more sections than er_plan_report holds");

/* Limits that keep every size product far from overflow on 32-bit targets too,
 * and reject absurd files before any arithmetic trusts them. */
#define ER_MAX_DIM (1 << 20)
#define ER_MAX_LAYERS 4096
#define ER_MAX_CTX (1 << 20)
#define ER_MAX_TRACE_EVENTS (1 << 24)

void er_options_resolve(const er_options *in, er_options *out) {
    er_options d;
    er_options_default(&d);
    *out = in ? *in : d;
    if (out->n_batch <= 0) out->n_batch = 64;
    if (out->n_threads <= 0) out->n_threads = 1;
    if (out->n_sessions <= 0) out->n_sessions = 1;
}

int er_options_default(er_options *o) {
    if (!o) return er_fail(ER_EINVAL, "er_options_default: opts is NULL");
    memset(o, 0, sizeof *o);
    o->n_batch = 64;
    o->n_threads = 1;
    o->n_sessions = 1;
    o->kv_type = ER_KV_F32;
    return ER_OK;
}

/* Checked a*b (size_t); false on overflow. */
static bool mul_ok(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

/* Adds an aligned block of n elements of `elem` bytes to *total. */
static bool add_block(size_t *total, size_t n, size_t elem) {
    size_t bytes;
    if (!mul_ok(n, elem, &bytes) || bytes > SIZE_MAX - 2 * ER_ARENA_ALIGN) return false;
    bytes = er_align_up(bytes);
    if (bytes > SIZE_MAX - *total) return false;
    *total += bytes;
    return true;
}

static int get_dim(const gguf_file *f, const char *arch, const char *suffix, bool required,
                   uint32_t lo, uint32_t hi, int *out) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    if (!gguf_get_u32(f, key, &v)) {
        gguf_kv kv;
        if (gguf_find_kv(f, key, &kv))
            return er_fail(ER_ECORRUPT, "key '%s' has the wrong type (want an unsigned integer)", key);
        if (required) return er_fail(ER_ECORRUPT, "required key '%s' is missing", key);
        return ER_OK;
    }
    if (v < lo || v > hi)
        return er_fail(ER_ECORRUPT, "key '%s' = %u is out of range [%u, %u]", key, v, lo, hi);
    *out = (int)v;
    return ER_OK;
}

static int read_hparams(const gguf_file *f, er_hparams *hp, er_dims *d) {
    memset(hp, 0, sizeof *hp);
    er_str s;
    if (gguf_get_str(f, "general.name", &s)) {
        size_t n = s.len < sizeof hp->name - 1 ? (size_t)s.len : sizeof hp->name - 1;
        memcpy(hp->name, s.ptr, n);
    }
    if (!gguf_get_str(f, "general.architecture", &s))
        return er_fail(ER_ECORRUPT, "required key 'general.architecture' is missing (or not a string)");
    er_str arch = s;
    int rc = er_family_check(arch);
    if (rc) return rc;
    memcpy(hp->arch, s.ptr, s.len);
    const char *a = hp->arch;

    if ((rc = get_dim(f, a, "embedding_length", true, 1, ER_MAX_DIM, &hp->n_embd)) ||
        (rc = get_dim(f, a, "block_count", true, 1, ER_MAX_LAYERS, &hp->n_layer)) ||
        (rc = get_dim(f, a, "feed_forward_length", true, 1, ER_MAX_DIM, &hp->n_ff)) ||
        (rc = get_dim(f, a, "attention.head_count", true, 1, ER_MAX_DIM, &hp->n_head)))
        return rc;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    /* an array: K/V heads per layer (LFM2; checked against the family below) */
    const int kv_per_layer = er_family_head_count_kv(f, a, hp->n_layer, &hp->n_head_kv);
    if (kv_per_layer < 0) return kv_per_layer;
    if ((!kv_per_layer && (rc = get_dim(f, a, "attention.head_count_kv", false, 1, ER_MAX_DIM, &hp->n_head_kv))) ||
        (rc = get_dim(f, a, "context_length", false, 1, ER_MAX_CTX, &hp->n_ctx_train)))
        return rc;
    if (hp->n_embd % hp->n_head)
        return er_fail(ER_ECORRUPT, "embedding_length %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    if (hp->n_head % hp->n_head_kv)
        return er_fail(ER_ECORRUPT, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((rc = get_dim(f, a, "attention.key_length", false, 1, ER_MAX_DIM, &hp->head_dim))) return rc;
    int v_len = hp->head_dim, n_rot = hp->head_dim;
    if ((rc = get_dim(f, a, "attention.value_length", false, 1, ER_MAX_DIM, &v_len)) ||
        (rc = get_dim(f, a, "rope.dimension_count", false, 1, ER_MAX_DIM, &n_rot)))
        return rc;
    if (v_len != hp->head_dim)
        return er_fail(ER_EUNSUPPORTED, "value_length %d differs from key_length %d", v_len, hp->head_dim);
    if (hp->head_dim % 2) return er_fail(ER_ECORRUPT, "head dimension %d is odd; RoPE needs pairs", hp->head_dim);

    char key[96];
    hp->rope_freq_base = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    if (gguf_find_kv(f, key, &(gguf_kv){0}) && !gguf_get_f32(f, key, &hp->rope_freq_base))
        return er_fail(ER_ECORRUPT, "key '%s' is not a number", key);
    if (!(hp->rope_freq_base > 0.0f)) return er_fail(ER_ECORRUPT, "key '%s' must be positive", key);
    hp->rms_eps = 1e-5f;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    if (gguf_find_kv(f, key, &(gguf_kv){0}) && !gguf_get_f32(f, key, &hp->rms_eps))
        return er_fail(ER_ECORRUPT, "key '%s' is not a number", key);
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
        return er_fail(ER_ECORRUPT, "key '%s' = %g is out of range (0, 1)", key, (double)hp->rms_eps);

    gguf_tensor t;
    if (!gguf_find_tensor(f, "token_embd.weight", &t))
        return er_fail(ER_ECORRUPT, "required tensor 'token_embd.weight' is missing");
    if (t.n_dims != 2 || t.ne[0] != (uint64_t)hp->n_embd || t.ne[1] > ER_MAX_DIM)
        return er_fail(ER_ECORRUPT, "tensor 'token_embd.weight' has shape [%llu, %llu], want [%d, n_vocab]",
                       (unsigned long long)t.ne[0], (unsigned long long)t.ne[1], hp->n_embd);
    hp->n_vocab = (int)t.ne[1];
    hp->tied_output = !gguf_find_tensor(f, "output.weight", &t);

    /* the family: its traits, and a refusal for any key it does not understand */
    if ((rc = er_family_read(f, arch, hp, d))) return rc;
    hp->has_qkv_bias = (d->traits & ER_T_QKV_BIAS) != 0;
    if (kv_per_layer && !(d->traits & ER_T_SHORTCONV))
        return er_fail(ER_EUNSUPPORTED, "key '%s.attention.head_count_kv' is per layer: this runtime runs per-layer "
                       "kinds for lfm2 only", a);
    /* Partial rotary embedding (the first n_rot dimensions of each head, the
     * rest passed through) is what Phi-3 does; for other families the file
     * would be one we have not checked against its reference. */
    if (n_rot > hp->head_dim || n_rot % 2 || (n_rot != hp->head_dim && !(d->traits & ER_T_FUSED)))
        return er_fail(ER_EUNSUPPORTED, "key '%s.rope.dimension_count' = %d: partial rotary embedding of a head "
                       "of %d is run for phi3 only (an even part of the head)", a, n_rot, hp->head_dim);
    hp->n_rot = n_rot;
    /* Llama 3.x's frequency factors; in another family's file the tensor is
     * left unbound, and open refuses it by name (model.c) */
    hp->rope_freq_factors = er_str_eq(arch, "llama") && gguf_find_tensor(f, "rope_freqs.weight", &t);
    d->n_rot = n_rot;
    /* Gemma 3 27B scales queries by 1/sqrt(n_embd / n_head) (its
     * query_pre_attn_scalar), the smaller ones by 1/sqrt(head_dim); the file
     * does not say which, and llama.cpp tells 27B by its 62 layers */
    d->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (er_str_eq(arch, "gemma3") && hp->n_layer == 62) d->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));

    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor_at(f, i, &t);
        hp->n_params += t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
        hp->weight_bytes += t.nbytes;
    }
    return ER_OK;
}

int er_options_cuda(const er_options *o) { return o && o->isa && strcmp(o->isa, ER_CUDA_ISA) == 0; }

/* cuda: the CUDA backend runs the model (see cuda/cuda_backend.h): the KV
 * caches, activations and weights live on the GPU, so the host keeps the
 * tokenizer, sessions (history, logits, sampler candidates), the threads of
 * host-side work and the backend's bookkeeping; the device sections follow. */
static int fill_sections(const gguf_file *f, const er_hparams *hp, const er_dims *d, int vocab_only,
                         const er_kernels *k, int cuda, er_plan_report *out) {
    size_t sec[ER_SEC_COUNT] = {0}, dev[ER_DSEC_COUNT] = {0}, cuda_host = 0;
    bool ok = add_block(&sec[ER_SEC_MODEL], 1, sizeof(er_model));
    /* tensor name copies + the pointer table */
    ok = ok && add_block(&sec[ER_SEC_MODEL], f->n_tensors, sizeof(char *));
    for (uint64_t i = 0; ok && i < f->n_tensors; i++) {
        gguf_tensor t;
        gguf_tensor_at(f, i, &t);
        ok = add_block(&sec[ER_SEC_MODEL], t.name.len + 1, 1);
    }
    int status = ER_OK;
    size_t vb = er_vocab_plan(f, &status);
    if (vb == (size_t)-1) return status;
    sec[ER_SEC_TOKENIZER] = vb;

    if (!vocab_only) {
        size_t V = (size_t)d->n_vocab, E = (size_t)d->n_embd, L = (size_t)d->n_layer;
        size_t B = (size_t)d->n_batch, C = (size_t)d->n_ctx, S = (size_t)d->n_sessions;
        size_t qd = (size_t)d->n_head * (size_t)d->head_dim;
        ok = ok && add_block(&sec[ER_SEC_MODEL], L, sizeof(er_layer)) &&
             add_block(&sec[ER_SEC_MODEL], f->n_tensors, 1); /* er_model.bound */
        /* norm vectors stored in the file as F16/BF16 are widened once into the arena */
        for (uint64_t i = 0; ok && i < f->n_tensors; i++) {
            gguf_tensor t;
            gguf_tensor_at(f, i, &t);
            if (t.n_dims == 1 && t.type != GGML_F32) ok = add_block(&sec[ER_SEC_MODEL], t.ne[0], sizeof(float));
        }
        ok = ok && add_block(&sec[ER_SEC_MODEL], S, sizeof(atomic_int));
        if (cuda) {
            int rc = er_cuda_plan(f, d, hp->tied_output, dev, &cuda_host);
            if (rc) return rc;
            ok = ok && add_block(&sec[ER_SEC_MODEL], cuda_host, 1);
        }

        size_t kv_elem = d->kv_type == ER_KV_F16 ? 2 : 4, per_cache;
        ok = ok && mul_ok(d->kv_cache_rows, d->kv_row, &per_cache);
        for (size_t s = 0; ok && !cuda && s < 2 * S; s++) ok = add_block(&sec[ER_SEC_KV], per_cache, kv_elem);
        /* sliding-window layers' rings, accounted apart from the full caches */
        size_t per_ring = 0;
        ok = ok && mul_ok(d->kv_ring_rows, d->kv_row, &per_ring);
        for (size_t s = 0; ok && !cuda && per_ring && s < 2 * S; s++)
            ok = add_block(&sec[ER_SEC_KV_WINDOW], per_ring, kv_elem);
        /* lfm2: each session's convolution ring (model.h, er_session.conv_ring) */
        for (size_t s = 0; ok && d->conv_ring && s < S; s++) ok = add_block(&sec[ER_SEC_KV], d->conv_ring, 4);

        ok = ok && add_block(&sec[ER_SEC_SESSIONS], S, sizeof(er_session));
        for (size_t s = 0; ok && s < S; s++)
            ok = add_block(&sec[ER_SEC_SESSIONS], C, sizeof(int32_t)) &&
                 add_block(&sec[ER_SEC_SESSIONS], V, sizeof(float)) &&
                 add_block(&sec[ER_SEC_SESSIONS], V, sizeof(float)) &&
                 add_block(&sec[ER_SEC_SESSIONS], V, sizeof(int32_t));

        /* each thread's attention scratch, er_att_scratch() floats */
        size_t *a = &sec[ER_SEC_ACT], att = 0;
        ok = ok && (cuda || (mul_ok(er_att_queries(d), C, &att) &&
                             att <= SIZE_MAX - (size_t)ER_ATT_BLOCK * ER_MAX_DIM &&
                             mul_ok(att + (size_t)ER_ATT_BLOCK * (size_t)d->head_dim, (size_t)d->n_threads, &att)));
        ok = ok && (cuda || (add_block(a, B * E, 4) && add_block(a, B * E, 4) && add_block(a, B * E, 4) &&
             add_block(a, B * qd, 4) && add_block(a, B * d->kv_row, 4) && add_block(a, B * d->kv_row, 4) &&
             add_block(a, B * qd, 4) && add_block(a, B * (size_t)d->n_ff, 4) &&
             add_block(a, B * (size_t)d->n_ff, 4) && add_block(a, B, d->act_row_max) &&
             add_block(a, att, 4) && add_block(a, B * (size_t)d->head_dim, 4) &&
             add_block(a, B * (size_t)d->head_dim, 4) &&
             (!d->conv_l || add_block(a, B * 3 * E, 4)) && add_block(a, B, sizeof(er_batch_row)) &&
             (S < 2 || add_block(a, (S < B ? S : B) * V, 4))));
        sec[ER_SEC_THREADS] = er_pool_plan(d->n_threads);
        sec[ER_SEC_TRACE] = er_trace_plan(d->trace_events);
        sec[ER_SEC_REPACKED] = cuda ? 0 : er_repack_plan(f, k, d->n_layer);
        ok = ok && sec[ER_SEC_REPACKED] != SIZE_MAX;
    }
    if (!ok) return er_fail(ER_ECORRUPT, "arena size overflows: the file's dimensions are absurd");

    memset(out, 0, sizeof *out);
    out->n_sections = ER_SEC_COUNT;
    for (int i = 0; i < ER_SEC_COUNT; i++) {
        out->sections[i].name = k_sec_names[i];
        out->sections[i].bytes = sec[i];
        out->sections[i].persistent = k_sec_persistent[i];
        if (sec[i] > SIZE_MAX - out->total_bytes) return er_fail(ER_ECORRUPT, "arena size overflows");
        out->total_bytes += sec[i];
    }
    if (cuda && !vocab_only) {
        for (int i = 0; i < ER_DSEC_PINNED; i++) {
            er_section *e = &out->sections[out->n_sections++];
            e->name = er_cuda_section_name(i);
            e->bytes = dev[i];
            e->persistent = i != ER_DSEC_ACT && i != ER_DSEC_SCRATCH;
            e->device = 1;
            if (dev[i] > SIZE_MAX - out->device_bytes) return er_fail(ER_ECORRUPT, "device plan overflows");
            out->device_bytes += dev[i];
        }
        out->pinned_bytes = dev[ER_DSEC_PINNED];
    }
    out->n_ctx = d->n_ctx;
    out->n_batch = d->n_batch;
    out->n_threads = d->n_threads;
    out->n_sessions = d->n_sessions;
    out->kv_type = d->kv_type;
    return ER_OK;
}

int er_plan_file(const gguf_file *f, const er_options *opts, er_hparams *hp, er_dims *d, er_plan_report *out,
                 int *rope_neox) {
    /* 0 means "default"; a negative count is a caller bug, not a request for
     * the default, so it is refused before er_options_resolve maps it */
    if (opts && (opts->n_batch < 0 || opts->n_threads < 0 || opts->n_sessions < 0))
        return er_fail(ER_EINVAL, "n_batch (%d), n_threads (%d) and n_sessions (%d) must be >= 0 (0 = default)",
                       opts->n_batch, opts->n_threads, opts->n_sessions);
    if (opts && (opts->vocab_only != 0 && opts->vocab_only != 1))
        return er_fail(ER_EINVAL, "vocab_only must be 0 or 1, got %d", opts->vocab_only);
    if (opts && (opts->trace_events < 0 || opts->trace_events > ER_MAX_TRACE_EVENTS))
        return er_fail(ER_EINVAL, "trace_events %d is out of range [0, %d]", opts->trace_events, ER_MAX_TRACE_EVENTS);
    er_options o;
    er_options_resolve(opts, &o);
    if (o.n_ctx < 0 || o.n_ctx > ER_MAX_CTX) return er_fail(ER_EINVAL, "n_ctx %d is out of range [0, %d]", o.n_ctx, ER_MAX_CTX);
    if (o.n_batch > 65536) return er_fail(ER_EINVAL, "n_batch %d is out of range [1, 65536]", o.n_batch);
    if (o.n_threads > 512) return er_fail(ER_EINVAL, "n_threads %d is out of range [1, 512]", o.n_threads);
    if (o.n_sessions > 1024) return er_fail(ER_EINVAL, "n_sessions %d is out of range [1, 1024]", o.n_sessions);
    if (o.kv_type != ER_KV_F32 && o.kv_type != ER_KV_F16)
        return er_fail(ER_EINVAL, "kv_type %d is not ER_KV_F32 (0) or ER_KV_F16 (1)", o.kv_type);

    memset(d, 0, sizeof *d);
    memset(hp, 0, sizeof *hp);
    *rope_neox = 0;
    if (!o.vocab_only) {
        int rc = read_hparams(f, hp, d);
        if (rc) return rc;
        *rope_neox = (d->traits & ER_T_NEOX) != 0;
        d->n_vocab = hp->n_vocab;
        d->n_embd = hp->n_embd;
        d->n_layer = hp->n_layer;
        d->n_head = hp->n_head;
        d->n_head_kv = hp->n_head_kv;
        d->head_dim = hp->head_dim;
        d->n_ff = hp->n_ff;
        d->n_ctx = o.n_ctx ? o.n_ctx : (hp->n_ctx_train < 2048 ? hp->n_ctx_train : 2048);
        d->n_batch = o.n_batch < d->n_ctx ? o.n_batch : d->n_ctx;
        if (o.ctx_strategy < ER_CTX_FAIL || o.ctx_strategy > ER_CTX_SLIDE_PREFILL)
            return er_fail(ER_EINVAL, "ctx_strategy %d is not ER_CTX_FAIL (0), ER_CTX_SLIDE (1) or ER_CTX_SLIDE_PREFILL (2)",
                           o.ctx_strategy);
        /* a slide must forget at least one token: two or more beyond the kept ones */
        if (o.ctx_strategy != ER_CTX_FAIL && d->n_ctx < 2)
            return er_fail(ER_EINVAL, "a sliding context needs n_ctx >= 2, got %d", d->n_ctx);
        if (o.ctx_keep < 0 || (o.ctx_keep > 0 && o.ctx_keep > d->n_ctx - 2))
            return er_fail(ER_EINVAL, "ctx_keep %d is out of range [0, n_ctx - 2 = %d]", o.ctx_keep, d->n_ctx - 2);
        /* LongRoPE: the long factors when the context exceeds the original
         * one (llama.cpp's choice; transformers switches per call on the
         * sequence's length, which agrees while a sequence stays on one side) */
        if (hp->rope_longrope) hp->rope_longrope = d->n_ctx > hp->rope_longrope ? 2 : 1;
        d->n_threads = o.n_threads;
        d->n_sessions = o.n_sessions;
        d->kv_type = o.kv_type;
        d->trace_events = (uint32_t)o.trace_events;
        d->kv_row = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
        d->conv_ring = (size_t)d->n_layer * (size_t)d->conv_l * (size_t)d->n_embd;
        /* each layer's cached rows: n_ctx, a sliding window's ring, or none */
        d->kv_cache_rows = d->kv_ring_rows = 0;
        for (int l = 0; l < d->n_layer; l++) {
            int ring;
            const size_t rows = er_kv_layer_rows(d, er_family_layer(f, d, hp, l), hp->sliding_window, &ring);
            *(ring ? &d->kv_ring_rows : &d->kv_cache_rows) += rows;
        }
        d->kv_blk = er_att_heads(d, d->n_threads);
        if (!d->kv_blk) d->kv_blk = d->n_head_kv;
        size_t widest = (size_t)hp->n_embd;
        if ((size_t)hp->n_head * hp->head_dim > widest) widest = (size_t)hp->n_head * hp->head_dim;
        if ((size_t)hp->n_ff > widest) widest = (size_t)hp->n_ff;
        /* forward.c's prepare() keeps one region per quantized act kind (a
         * file may mix Q8_0- and Q8_K-activated weights on one input), each
         * starting 64-byte aligned: a row of every kind plus 64 bytes of
         * alignment slack per kind covers B rows of all of them */
        const int wide = (int)((widest + ER_QK_K - 1) / ER_QK_K * ER_QK_K);
        d->act_row_max = 0;
        for (int k = ER_ACT_F32 + 1; k < ER_ACT_COUNT; k++) d->act_row_max += er_act_row_bytes(k, wide) + 64;
    } else {
        gguf_kv kv;
        if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STR, &kv)) hp->n_vocab = (int)kv.arr_n;
        snprintf(hp->arch, sizeof hp->arch, "vocab");
    }
    /* the table open will use decides which matrices get an interleaved
     * copy; a name the build cannot run plans none (open then fails anyway).
     * The CUDA backend repacks nothing (its own row layout is planned by
     * er_cuda_plan); its host-side table is the CPU's best. */
    const int cuda = er_options_cuda(&o) && !o.vocab_only;
    if (cuda && !er_cuda_built()) return er_cuda_device_count(); /* the "no backend" error */
    /* The CUDA backend runs the llama step (and qwen2's biases) only: no GPU
     * here has tested the other families' steps, so they are refused on it */
    if (cuda && ((d->traits & ~(unsigned)(ER_T_NEOX | ER_T_QKV_BIAS)) || hp->rope_freq_factors ||
                 hp->rope_longrope || hp->rope_attn_factor != 1.0f ||
                 hp->rope_scale != 1.0f || hp->sliding_window || hp->n_rot != hp->head_dim ||
                 hp->final_logit_softcap != 0.0f || !(er_str_eq((er_str){hp->arch, strlen(hp->arch)}, "llama") ||
                                                      er_str_eq((er_str){hp->arch, strlen(hp->arch)}, "qwen2"))))
        return er_fail(ER_EUNSUPPORTED, "the CUDA backend does not run family '%s'%s yet (it runs llama and qwen2); "
                       "use a CPU kernel table", hp->arch,
                       hp->rope_freq_factors || hp->rope_scale != 1.0f ? " with RoPE scaling" : "");
    const char *why = NULL;
    const er_kernels *k = o.vocab_only || cuda ? NULL : er_kernels_select(o.isa, &why);
    return fill_sections(f, hp, d, o.vocab_only, k, cuda, out);
}

int er_plan(const char *path, const er_options *opts, er_plan_report *out) {
    if (!path || !out) return er_fail(ER_EINVAL, "er_plan: path and out must not be NULL");
    gguf_file f;
    int rc = gguf_open(path, &f);
    if (rc) return rc;
    er_hparams hp;
    er_dims d;
    int neox;
    rc = er_plan_file(&f, opts, &hp, &d, out, &neox);
    gguf_close(&f);
    return rc;
}
