/*
 * model.c — open: map, validate, plan, carve the arena, bind tensors, build
 * the tokenizer, start threads. After er_model_open returns, the heap is
 * never touched again by this model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "model.h"
#include "tokenizer/vocab.h"

/* ---- tensor binding ------------------------------------------------------ */

/* Finds a tensor and marks it bound: at the end of bind_tensors every tensor
 * of the file must be (a tensor no step reads may be one that changes the
 * arithmetic, such as Phi-3's rope_factors_long). */
static int find_tensor(const er_model *m, const char *name, bool required, gguf_tensor *t) {
    for (uint64_t i = 0; i < m->file.n_tensors; i++) {
        gguf_tensor_at(&m->file, i, t);
        if (er_str_eq(t->name, name)) {
            m->bound[i] = 1;
            return 1;
        }
    }
    if (required) return er_fail(ER_ECORRUPT, "required tensor '%s' is missing", name);
    return 0;
}

/* Binds a weight matrix with GGUF shape [n_in, n_out]. */
static int bind_matrix(er_model *m, const char *name, int n_in, int n_out, er_weight *w) {
    gguf_tensor t;
    int rc = find_tensor(m, name, true, &t);
    if (rc < 0) return rc;
    if (t.n_dims != 2 || t.ne[0] != (uint64_t)n_in || t.ne[1] != (uint64_t)n_out)
        return er_fail(ER_ECORRUPT, "tensor '%s' has shape [%llu, %llu] (%u dims), want [%d, %d]", name,
                       (unsigned long long)t.ne[0], (unsigned long long)t.ne[1], t.n_dims, n_in, n_out);
    int wt = er_wtype_from_ggml(t.type);
    if (wt < 0)
        return er_fail(ER_EUNSUPPORTED, "tensor '%s' has type %s, which this runtime cannot compute with yet "
                       "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, "
                       "Q5_K, Q6_K)", name, ggml_type_name(t.type));
    w->data = t.data;
    w->wtype = wt;
    w->row_bytes = ggml_row_bytes(t.type, t.ne[0]);
    w->n_in = n_in;
    w->n_out = n_out;
    return ER_OK;
}

/* Binds a 1-D float vector of n elements; F16/BF16 files are widened into the arena. */
static int bind_vector(er_model *m, const char *name, int n, bool required, const float **out) {
    gguf_tensor t;
    int rc = find_tensor(m, name, required, &t);
    if (rc <= 0) {
        *out = NULL;
        return rc;
    }
    if (t.n_dims != 1 || t.ne[0] != (uint64_t)n)
        return er_fail(ER_ECORRUPT, "tensor '%s' has %u dims and %llu elements, want a vector of %d", name, t.n_dims,
                       (unsigned long long)t.ne[0], n);
    if (t.type == GGML_F32) {
        if ((uintptr_t)t.data % sizeof(float))
            return er_fail(ER_ECORRUPT, "tensor '%s' data is not 4-byte aligned", name);
        *out = (const float *)t.data;
        return ER_OK;
    }
    int wt = er_wtype_from_ggml(t.type);
    if (wt != ER_W_F16 && wt != ER_W_BF16)
        return er_fail(ER_EUNSUPPORTED, "vector '%s' has type %s (want F32, F16 or BF16)", name,
                       ggml_type_name(t.type));
    float *dst = er_arena_alloc(&m->sec[ER_SEC_MODEL], (size_t)n * sizeof(float));
    if (!dst) return er_fail(ER_ECORRUPT, "internal: model section exhausted widening '%s'", name);
    m->k->dequant_row[wt](t.data, dst, n);
    *out = dst;
    return ER_OK;
}

/* Rows [r0, r0 + n) of a bound matrix as a matrix of their own: the fused
 * tensors (phi3's attn_qkv, ffn_up holding gate then up) stack their parts
 * along the output rows, and every weight type stores rows whole. */
static er_weight rows_of(const er_weight *w, int r0, int n) {
    er_weight v = *w;
    v.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
    v.n_out = n;
    return v;
}

static int bind_tensors(er_model *m) {
    const er_dims *d = &m->d;
    const er_hparams *hp = &m->hp;
    int qd = d->n_head * d->head_dim, kvd = (int)d->kv_row, rc;
    m->bound = er_arena_alloc(&m->sec[ER_SEC_MODEL], (size_t)m->file.n_tensors);
    if (m->file.n_tensors && !m->bound) return er_fail(ER_ECORRUPT, "internal: model section exhausted (bound)");
    memset(m->bound, 0, (size_t)m->file.n_tensors);
    if ((rc = bind_matrix(m, "token_embd.weight", d->n_embd, d->n_vocab, &m->tok_embd))) return rc;
    /* LFM2's final norm is stored under the embedding norm's name */
    const char *out_norm = d->traits & ER_T_SHORTCONV ? "token_embd_norm.weight" : "output_norm.weight";
    if ((rc = bind_vector(m, out_norm, d->n_embd, true, &m->output_norm))) return rc;
    if (m->hp.tied_output)
        m->output = m->tok_embd;
    else if ((rc = bind_matrix(m, "output.weight", d->n_embd, d->n_vocab, &m->output)))
        return rc;
    /* Llama 3.x: each rotated pair's frequency divided by its factor */
    if (hp->rope_freq_factors) {
        if ((rc = bind_vector(m, "rope_freqs.weight", d->n_rot / 2, true, &m->rope_freqs))) return rc;
        for (int i = 0; i < d->n_rot / 2; i++)
            if (!(m->rope_freqs[i] > 0.0f) || !isfinite(m->rope_freqs[i]))
                return er_fail(ER_ECORRUPT, "tensor 'rope_freqs.weight' element %d is not a positive number", i);
    }
    /* LongRoPE: both sets are understood; the one this context uses is applied */
    if (hp->rope_longrope) {
        const float *shorts, *longs;
        if ((rc = bind_vector(m, "rope_factors_short.weight", d->n_rot / 2, true, &shorts)) ||
            (rc = bind_vector(m, "rope_factors_long.weight", d->n_rot / 2, true, &longs)))
            return rc;
        m->rope_freqs = hp->rope_longrope == 2 ? longs : shorts;
        for (int i = 0; i < d->n_rot / 2; i++)
            if (!(m->rope_freqs[i] > 0.0f) || !isfinite(m->rope_freqs[i]))
                return er_fail(ER_ECORRUPT, "tensor 'rope_factors_%s.weight' element %d is not a positive number",
                               hp->rope_longrope == 2 ? "long" : "short", i);
    }

    m->layers = er_arena_alloc(&m->sec[ER_SEC_MODEL], sizeof(er_layer) * (size_t)d->n_layer);
    if (!m->layers) return er_fail(ER_ECORRUPT, "internal: model section exhausted (layers)");
    size_t kv_off = 0, ring_off = 0;
    for (int l = 0; l < d->n_layer; l++) {
        er_layer *L = &m->layers[l];
        memset(L, 0, sizeof *L);
        const unsigned kind = er_family_layer(&m->file, d, hp, l);
        /* the layer's part of each session's cache, as plan.c counted it */
        L->kv_rows = er_kv_layer_rows(d, kind, hp->sliding_window, &L->ring);
        size_t *off = L->ring ? &ring_off : &kv_off;
        L->kv_off = *off * d->kv_row;
        *off += L->kv_rows;
        char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
        if ((rc = bind_vector(m, NAME("attn_norm.weight"), d->n_embd, true, &L->attn_norm)) ||
            (rc = bind_vector(m, NAME("ffn_norm.weight"), d->n_embd, true, &L->ffn_norm)) ||
            (rc = bind_matrix(m, NAME("ffn_down.weight"), d->n_ff, d->n_embd, &L->w_down)))
            return rc;
        if (kind & ER_L_CONV) {
            /* LFM2's short convolution block in place of attention; the FFN as llama's */
            if ((rc = bind_matrix(m, NAME("shortconv.in_proj.weight"), d->n_embd, 3 * d->n_embd, &L->conv_in)) ||
                (rc = bind_matrix(m, NAME("shortconv.out_proj.weight"), d->n_embd, d->n_embd, &L->conv_out)) ||
                (rc = bind_matrix(m, NAME("ffn_gate.weight"), d->n_embd, d->n_ff, &L->w_gate)) ||
                (rc = bind_matrix(m, NAME("ffn_up.weight"), d->n_embd, d->n_ff, &L->w_up)))
                return rc;
            gguf_tensor t;
            if ((rc = find_tensor(m, NAME("shortconv.conv.weight"), true, &t)) < 0) return rc;
            if (t.n_dims != 2 || t.ne[0] != (uint64_t)d->conv_l || t.ne[1] != (uint64_t)d->n_embd)
                return er_fail(ER_ECORRUPT, "tensor '%s' has shape [%llu, %llu], want [%d, %d]", nm,
                               (unsigned long long)t.ne[0], (unsigned long long)t.ne[1], d->conv_l, d->n_embd);
            if (t.type != GGML_F32 || (uintptr_t)t.data % sizeof(float))
                return er_fail(ER_EUNSUPPORTED, "tensor '%s' has type %s (this runtime reads the convolution "
                               "taps as F32, which llama.cpp's converter writes)", nm, ggml_type_name(t.type));
            L->conv_w = (const float *)t.data;
            L->conv = 1;
            continue;
        }
        if ((rc = bind_matrix(m, NAME("attn_output.weight"), qd, d->n_embd, &L->wo))) return rc;
        if (d->traits & ER_T_FUSED) {
            er_weight qkv, gu;
            if ((rc = bind_matrix(m, NAME("attn_qkv.weight"), d->n_embd, qd + 2 * kvd, &qkv)) ||
                (rc = bind_matrix(m, NAME("ffn_up.weight"), d->n_embd, 2 * d->n_ff, &gu)))
                return rc;
            L->wq = rows_of(&qkv, 0, qd);
            L->wk = rows_of(&qkv, qd, kvd);
            L->wv = rows_of(&qkv, qd + kvd, kvd);
            L->w_gate = rows_of(&gu, 0, d->n_ff);
            L->w_up = rows_of(&gu, d->n_ff, d->n_ff);
            L->fused = 1;
        } else {
            if ((rc = bind_matrix(m, NAME("attn_q.weight"), d->n_embd, qd, &L->wq)) ||
                (rc = bind_matrix(m, NAME("attn_k.weight"), d->n_embd, kvd, &L->wk)) ||
                (rc = bind_matrix(m, NAME("attn_v.weight"), d->n_embd, kvd, &L->wv)) ||
                (rc = bind_matrix(m, NAME("ffn_gate.weight"), d->n_embd, d->n_ff, &L->w_gate)) ||
                (rc = bind_matrix(m, NAME("ffn_up.weight"), d->n_embd, d->n_ff, &L->w_up)))
                return rc;
            /* qwen2 requires the biases; other files may carry them too (some converters do). */
            bool need_bias = m->hp.has_qkv_bias;
            if ((rc = bind_vector(m, NAME("attn_q.bias"), qd, need_bias, &L->bq)) < 0 ||
                (rc = bind_vector(m, NAME("attn_k.bias"), kvd, need_bias, &L->bk)) < 0 ||
                (rc = bind_vector(m, NAME("attn_v.bias"), kvd, need_bias, &L->bv)) < 0)
                return rc;
            if (!L->bq != !L->bk || !L->bq != !L->bv)
                return er_fail(ER_EUNSUPPORTED, "layer %d has some of attn_q/k/v.bias but not all three", l);
        }
        if ((d->traits & ER_T_QK_NORM) &&
            ((rc = bind_vector(m, NAME("attn_q_norm.weight"), d->head_dim, true, &L->q_norm)) ||
             (rc = bind_vector(m, NAME("attn_k_norm.weight"), d->head_dim, true, &L->k_norm))))
            return rc;
        if ((d->traits & ER_T_POST_NORMS) &&
            ((rc = bind_vector(m, NAME("post_attention_norm.weight"), d->n_embd, true, &L->post_attn_norm)) ||
             (rc = bind_vector(m, NAME("post_ffw_norm.weight"), d->n_embd, true, &L->post_ffn_norm))))
            return rc;
#undef NAME
        L->rope = kind & ER_L_NOPE ? 0 : (kind & ER_L_SWA) && (d->traits & ER_T_SWA6) ? 2 : 1;
        L->window = kind & ER_L_SWA ? hp->sliding_window : 0;
    }
    for (uint64_t i = 0; i < m->file.n_tensors; i++)
        if (!m->bound[i]) {
            gguf_tensor t;
            gguf_tensor_at(&m->file, i, &t);
            return er_fail(ER_EUNSUPPORTED, "tensor '%.*s' is read by no step this runtime runs for %s: it may "
                           "change what the model computes, so the file is refused rather than run approximately",
                           (int)(t.name.len > 80 ? 80 : t.name.len), t.name.ptr, hp->arch);
        }
    return ER_OK;
}

static int copy_names(er_model *m) {
    er_arena *a = &m->sec[ER_SEC_MODEL];
    m->tensor_names = er_arena_alloc(a, sizeof(char *) * (size_t)m->file.n_tensors);
    if (m->file.n_tensors && !m->tensor_names) return er_fail(ER_ECORRUPT, "internal: model section exhausted");
    for (uint64_t i = 0; i < m->file.n_tensors; i++) {
        gguf_tensor t;
        gguf_tensor_at(&m->file, i, &t);
        char *s = er_arena_alloc(a, t.name.len + 1);
        if (!s) return er_fail(ER_ECORRUPT, "internal: model section exhausted (names)");
        memcpy(s, t.name.ptr, t.name.len);
        s[t.name.len] = '\0';
        m->tensor_names[i] = s;
    }
    return ER_OK;
}

/* ---- activations and sessions -------------------------------------------- */

static void *take(er_model *m, int sec, size_t n, size_t elem) {
    return er_arena_alloc(&m->sec[sec], n * elem);
}

static int carve_runtime(er_model *m, int cuda) {
    const er_dims *d = &m->d;
    size_t B = (size_t)d->n_batch, E = (size_t)d->n_embd, qd = (size_t)d->n_head * d->head_dim;
    /* the CUDA backend keeps activations and KV caches on the device */
    if (!cuda) {
        m->act.x = take(m, ER_SEC_ACT, B * E, 4);
        m->act.xb = take(m, ER_SEC_ACT, B * E, 4);
        m->act.xb2 = take(m, ER_SEC_ACT, B * E, 4);
        m->act.q = take(m, ER_SEC_ACT, B * qd, 4);
        m->act.k = take(m, ER_SEC_ACT, B * d->kv_row, 4);
        m->act.v = take(m, ER_SEC_ACT, B * d->kv_row, 4);
        m->act.att = take(m, ER_SEC_ACT, B * qd, 4);
        m->act.hb = take(m, ER_SEC_ACT, B * (size_t)d->n_ff, 4);
        m->act.hb2 = take(m, ER_SEC_ACT, B * (size_t)d->n_ff, 4);
        m->act.xq = take(m, ER_SEC_ACT, B, d->act_row_max);
        m->act.scores = take(m, ER_SEC_ACT, (size_t)d->n_threads * er_att_scratch(d), 4);
        m->act.rope_cs = take(m, ER_SEC_ACT, B * (size_t)d->head_dim, 4);
        m->act.rope_cs_swa = take(m, ER_SEC_ACT, B * (size_t)d->head_dim, 4);
        m->act.conv = d->conv_l ? take(m, ER_SEC_ACT, B * 3 * E, 4) : NULL;
        if (d->conv_l && !m->act.conv) return er_fail(ER_ECORRUPT, "internal: activation section smaller than planned");
        m->act.rows = take(m, ER_SEC_ACT, B, sizeof(er_batch_row));
        m->act.m_one = 0;
        const size_t S = (size_t)d->n_sessions;
        m->act.logits_b = S > 1 ? take(m, ER_SEC_ACT, (S < B ? S : B) * (size_t)d->n_vocab, 4) : NULL;
        if (!m->act.rows || (S > 1 && !m->act.logits_b))
            return er_fail(ER_ECORRUPT, "internal: activation section smaller than planned");
        if (!m->act.scores || !m->act.rope_cs_swa)
            return er_fail(ER_ECORRUPT, "internal: activation section smaller than planned");
    }

    m->slot_used = take(m, ER_SEC_MODEL, (size_t)d->n_sessions, sizeof(atomic_int));
    m->sessions = take(m, ER_SEC_SESSIONS, (size_t)d->n_sessions, sizeof(er_session));
    if (!m->slot_used || !m->sessions) return er_fail(ER_ECORRUPT, "internal: session section smaller than planned");
    size_t kv_elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    size_t cache = d->kv_cache_rows * d->kv_row, rings = d->kv_ring_rows * d->kv_row;
    for (int i = 0; i < d->n_sessions; i++) {
        er_session *s = &m->sessions[i];
        memset(s, 0, sizeof *s);
        atomic_init(&m->slot_used[i], 0);
        s->model = m;
        s->slot = i;
        s->k_cache = cuda ? NULL : take(m, ER_SEC_KV, cache, kv_elem);
        s->v_cache = cuda ? NULL : take(m, ER_SEC_KV, cache, kv_elem);
        s->conv_ring = d->conv_ring ? take(m, ER_SEC_KV, d->conv_ring, 4) : NULL;
        s->k_ring = !cuda && rings ? take(m, ER_SEC_KV_WINDOW, rings, kv_elem) : NULL;
        s->v_ring = !cuda && rings ? take(m, ER_SEC_KV_WINDOW, rings, kv_elem) : NULL;
        if (!cuda && rings && !s->v_ring) return er_fail(ER_ECORRUPT, "internal: kv_window section smaller than planned");
        if (d->conv_ring && !s->conv_ring) return er_fail(ER_ECORRUPT, "internal: KV section smaller than planned");
        s->history = take(m, ER_SEC_SESSIONS, (size_t)d->n_ctx, 4);
        s->logits = take(m, ER_SEC_SESSIONS, (size_t)d->n_vocab, 4);
        s->cand_p = take(m, ER_SEC_SESSIONS, (size_t)d->n_vocab, 4);
        s->cand_id = take(m, ER_SEC_SESSIONS, (size_t)d->n_vocab, 4);
        if ((!cuda && !s->v_cache) || !s->cand_id) return er_fail(ER_ECORRUPT, "internal: session section smaller than planned");
    }
    er_trace_event *ring = d->trace_events ? take(m, ER_SEC_TRACE, d->trace_events, sizeof(er_trace_event)) : NULL;
    if (d->trace_events && !ring) return er_fail(ER_ECORRUPT, "internal: trace section smaller than planned");
    er_trace_init(&m->trace, ring, d->trace_events);
    return ER_OK;
}

/* Everything decode writes made resident at open: the K/V caches (in 2 MiB
 * pages where the OS grants them on an arena open allocated), the session
 * slots (token history, logits, sampler candidates), the activations, the
 * threads' section and the trace ring. Left to fault in as decode first
 * wrote each page, a layer's K/V store took a page fault every few steps
 * (on this project's VM, 110M decode at 1 thread spent 69 us a step in the
 * K/V store, 15 us with the cache resident: ~2.5% of the step), and
 * attention's scores and the token history grew into new pages with the
 * position: a step's latency depended on whether it crossed a page. The
 * memory is the plan's in any case; resident memory is now what the plan
 * says from the start, and a machine short of it runs out at open rather
 * than in the middle of a reply. Huge pages also cut the attention walk's
 * page-table misses (per layer 28.9 -> 26.6 us there). test_no_alloc
 * counts page faults. */
static void fault_in_runtime(er_model *m) {
    if (m->arena_owned) er_arena_advise_huge(&m->sec[ER_SEC_KV]);
    const int secs[] = {ER_SEC_KV, ER_SEC_KV_WINDOW, ER_SEC_SESSIONS, ER_SEC_ACT, ER_SEC_THREADS, ER_SEC_TRACE};
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) er_arena_fault_in(&m->sec[secs[i]]);
}

/* ---- open / close -------------------------------------------------------- */

/* Undoes a failed open. The pool is started last, so it never needs stopping here. */
static void release(er_model *m, void *arena, int owned) {
    gguf_file f = m->file;
    er_cuda_close(m->cuda);
    pthread_mutex_destroy(&m->step_lock);
    gguf_close(&f);
    if (owned) free(arena);
}

int er_model_open(const char *path, const er_options *opts, er_model **out) {
    if (!out) return er_fail(ER_EINVAL, "er_model_open: out is NULL");
    *out = NULL;
    if (!path) return er_fail(ER_EINVAL, "er_model_open: path is NULL");
    er_options o;
    er_options_resolve(opts, &o);
    if (o.arena && ((uintptr_t)o.arena % ER_ARENA_ALIGN))
        return er_fail(ER_EINVAL, "caller arena must be %d-byte aligned", ER_ARENA_ALIGN);

    const char *reason = NULL;
    /* isa "cuda": the GPU runs the model; the best CPU table still does the
     * host-side work (widening F16 norm vectors before upload) */
    const int cuda = er_options_cuda(&o) && !o.vocab_only;
    /* no backend in this build, or no GPU/driver: say so before mapping anything */
    if (cuda) {
        int n = er_cuda_device_count();
        if (n < 0) return n;
    }
    const er_kernels *k = er_kernels_select(cuda ? NULL : o.isa, &reason);
    if (!k) return ER_EUNSUPPORTED; /* message set by the selector */

    gguf_file f;
    int rc = gguf_open(path, &f);
    if (rc) return rc;
    er_hparams hp;
    er_dims d;
    er_plan_report plan;
    int neox;
    if ((rc = er_plan_file(&f, opts, &hp, &d, &plan, &neox))) { /* raw opts: it rejects negatives */
        gguf_close(&f);
        return rc;
    }

    void *arena = o.arena;
    int owned = 0;
    if (arena) {
        if (o.arena_bytes < plan.total_bytes) {
            gguf_close(&f);
            return er_fail(ER_ENOMEM_ARENA, "arena too small: needs %zu bytes, given %zu (short by %zu bytes)",
                           plan.total_bytes, o.arena_bytes, plan.total_bytes - o.arena_bytes);
        }
    } else {
        /* The one heap allocation of the model's lifetime. */
        if (posix_memalign(&arena, ER_ARENA_ALIGN, plan.total_bytes ? plan.total_bytes : ER_ARENA_ALIGN)) {
            gguf_close(&f);
            return er_fail(ER_ENOMEM, "cannot allocate the %zu-byte arena", plan.total_bytes);
        }
        owned = 1;
    }

    er_arena sec[ER_SEC_COUNT];
    uint8_t *p = arena;
    for (int i = 0; i < ER_SEC_COUNT; i++) {
        er_arena_init(&sec[i], p, plan.sections[i].bytes);
        p += plan.sections[i].bytes;
    }
    er_model *m = er_arena_alloc(&sec[ER_SEC_MODEL], sizeof *m);
    memset(m, 0, sizeof *m);
    memcpy(m->sec, sec, sizeof sec);
    m->file = f;
    m->hp = hp;
    m->d = d;
    m->plan = plan;
    m->vocab_only = o.vocab_only;
    m->ctx_strategy = o.ctx_strategy;
    m->ctx_keep = o.ctx_keep;
    m->rope_neox = neox;
    m->arena_base = arena;
    m->arena_size = owned ? plan.total_bytes : o.arena_bytes;
    m->arena_owned = owned;
    m->k = k;
    m->isa_reason = reason;
    pthread_mutex_init(&m->step_lock, NULL);
    er_trace_init(&m->trace, NULL, 0);
    atomic_init(&m->live_refs, 0);

    if ((rc = copy_names(m))) goto fail;
    if (plan.sections[ER_SEC_TOKENIZER].bytes > 0 && (rc = er_vocab_build(&m->file, &m->sec[ER_SEC_TOKENIZER], &m->vocab)))
        goto fail;
    if (o.vocab_only) {
        if (!m->vocab) {
            rc = er_fail(ER_ECORRUPT, "file has no tokenizer (tokenizer.ggml.model is missing); its model takes token "
                                         "ids only, or convert it again with its tokenizer.json or tokenizer.model");
            goto fail;
        }
    } else {
        if ((rc = bind_tensors(m)) || (rc = carve_runtime(m, cuda))) goto fail;
        m->fingerprint = er_fingerprint_compute(m);
        if (cuda ? (rc = er_cuda_open(m)) : (rc = er_repack_model(m))) goto fail;
        fault_in_runtime(m);
        if ((rc = er_pool_start(&m->pool, d.n_threads, o.cpu_mask, &m->sec[ER_SEC_THREADS]))) goto fail;
    }
    *out = m;
    return ER_OK;
fail:
    release(m, arena, owned);
    return rc;
}

void er_model_close(er_model *m) {
    if (!m) return;
    gguf_file f = m->file;
    void *arena = m->arena_base;
    int owned = m->arena_owned;
    if (!m->vocab_only) er_pool_stop(&m->pool);
    /* before the arena goes: the backend unregisters its pinned view of it */
    er_cuda_close(m->cuda);
    pthread_mutex_destroy(&m->step_lock);
    gguf_close(&f);
    if (owned) free(arena);
}

/* ---- queries -------------------------------------------------------------- */

int er_model_hparams(const er_model *m, er_hparams *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_model_hparams: NULL argument");
    *out = m->hp;
    return ER_OK;
}

int er_model_layer(const er_model *m, int layer, er_layer_info *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_model_layer: NULL argument");
    const int n = m->vocab_only ? 0 : m->d.n_layer;
    if (layer < 0 || layer >= n) return er_fail(ER_EINVAL, "er_model_layer: layer %d is outside [0, %d)", layer, n);
    const er_layer *L = &m->layers[layer];
    *out = (er_layer_info){.block = L->conv ? ER_BLOCK_SHORTCONV : ER_BLOCK_ATTENTION,
                           .rope = L->conv ? 0 : L->rope,
                           .window = L->conv ? 0 : L->window,
                           .n_head_kv = L->conv ? 0 : m->d.n_head_kv,
                           .conv_kernel = L->conv ? m->d.conv_l : 0};
    return ER_OK;
}

int er_model_meta_str(const er_model *m, const char *key, const char **ptr, size_t *len) {
    if (!m || !key || !ptr || !len) return er_fail(ER_EINVAL, "er_model_meta_str: NULL argument");
    gguf_kv kv;
    if (!gguf_find_kv(&m->file, key, &kv)) return er_fail(ER_EINVAL, "the file has no key '%s'", key);
    er_str s;
    if (!gguf_get_str(&m->file, key, &s)) return er_fail(ER_EINVAL, "key '%s' is not a string", key);
    *ptr = s.ptr;
    *len = (size_t)s.len;
    return ER_OK;
}

int er_model_arena(const er_model *m, er_plan_report *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_model_arena: NULL argument");
    *out = m->plan;
    for (int i = 0; i < ER_SEC_COUNT; i++) out->sections[i].used = m->sec[i].high;
    /* the device sections are carved whole by the same walk that planned them */
    for (int i = ER_SEC_COUNT; i < out->n_sections; i++) out->sections[i].used = out->sections[i].bytes;
    return ER_OK;
}

int er_model_n_tensors(const er_model *m) {
    if (!m) return er_fail(ER_EINVAL, "er_model_n_tensors: model is NULL");
    return (int)m->file.n_tensors;
}

int er_model_tensor(const er_model *m, int32_t i, er_tensor_info *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_model_tensor: NULL argument");
    if (i < 0 || (uint64_t)i >= m->file.n_tensors)
        return er_fail(ER_EINVAL, "tensor index %d out of range [0, %llu)", i, (unsigned long long)m->file.n_tensors);
    gguf_tensor t;
    gguf_tensor_at(&m->file, (uint64_t)i, &t);
    out->name = m->tensor_names[i];
    out->type_name = ggml_type_name(t.type);
    out->type = (int32_t)t.type;
    out->n_dims = (int32_t)t.n_dims;
    for (int j = 0; j < 4; j++) out->ne[j] = (int64_t)t.ne[j];
    out->offset = m->file.data_off + t.offset;
    out->nbytes = t.nbytes;
    return ER_OK;
}

const char *er_model_isa(const er_model *m) { return m ? (m->cuda ? ER_CUDA_ISA : m->k->name) : ""; }
const char *er_model_isa_reason(const er_model *m) { return m && m->isa_reason ? m->isa_reason : ""; }
const er_vocab *er_model_vocab(const er_model *m) { return m ? m->vocab : NULL; }
