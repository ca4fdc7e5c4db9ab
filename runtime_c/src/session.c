/*
 * session.c — session slots, the KV cache position, and the decode entry points.
 */
#include <string.h>

#include "error.h"
#include "model.h"

int er_session_new(er_model *m, er_session **out) {
    if (!out) return er_fail(ER_EINVAL, "er_session_new: out is NULL");
    *out = NULL;
    if (!m) return er_fail(ER_EINVAL, "er_session_new: model is NULL");
    /* A session outside the handle would hold no reference, so the handle
     * could close the model under it after a swap. */
    if (m->live) return er_fail(ER_ESTATE, "the model belongs to an er_live handle: take sessions with er_live_session_new");
    return er_session_take(m, out);
}

int er_session_take(er_model *m, er_session **out) {
    *out = NULL;
    if (m->vocab_only) return er_fail(ER_ESTATE, "model was opened vocab_only: it has no weights to run");
    for (int i = 0; i < m->d.n_sessions; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&m->slot_used[i], &expect, 1)) {
            er_session *s = &m->sessions[i];
            s->pos = 0;
            s->has_logits = 0;
            s->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)i;
            memset(&s->stats, 0, sizeof s->stats);
            *out = s;
            return ER_OK;
        }
    }
    return er_fail(ER_EBUSY, "all %d session slots are in use (open the model with a larger n_sessions)",
                   m->d.n_sessions);
}

void er_session_free(er_session *s) {
    if (!s) return;
    if (s->model->live)
        er_live_session_release(s);
    else
        atomic_store(&s->model->slot_used[s->slot], 0);
}

const er_model *er_session_model(const er_session *s) { return s ? s->model : NULL; }

int er_session_reset(er_session *s) {
    if (!s) return er_fail(ER_EINVAL, "er_session_reset: session is NULL");
    s->pos = 0;
    s->has_logits = 0;
    return ER_OK;
}

/* Whether a ring of `held` rows, last written at position pos - 1, still
 * holds every position [n - span + 1, n) (from 0) that a step at n reads. */
static bool ring_keeps(int n, int pos, int span, int held) {
    const int first = n - span + 1 > 0 ? n - span + 1 : 0;
    return first >= n || first >= pos - held;
}

int er_session_truncate(er_session *s, int32_t n) {
    if (!s) return er_fail(ER_EINVAL, "er_session_truncate: session is NULL");
    if (n < 0 || n > s->pos)
        return er_fail(ER_EINVAL, "er_session_truncate: %d tokens asked to keep, the session holds %d", n, s->pos);
    /* A full cache's rows are addressed by their position alone, so the rows
     * below n stay valid. A sliding-window ring and LFM2's convolution ring
     * hold only the last positions: the next step at n reads positions
     * [n - span + 1, n), which must not have been overwritten by positions
     * after them. Cut further back, the state for n is gone, and running on
     * would read later tokens' rows as earlier ones: refuse, so the caller
     * resets and prefills instead (edgerun.chat does). */
    if (n < s->pos) {
        const er_model *m = s->model;
        for (int l = 0; l < m->d.n_layer; l++) {
            const er_layer *L = &m->layers[l];
            if (L->ring && !ring_keeps(n, s->pos, L->window, L->ring))
                return er_fail(ER_EUNSUPPORTED, "er_session_truncate: layer %d keeps a ring of the last %d positions; "
                               "cutting %d tokens back to %d loses what position %d reads (reset and prefill "
                               "instead)", l, L->ring, s->pos - n, n, n);
            if (L->conv && !ring_keeps(n, s->pos, m->d.conv_l, m->d.conv_l))
                return er_fail(ER_EUNSUPPORTED, "er_session_truncate: layer %d's convolution state holds the last %d "
                               "positions only; cutting %d tokens back to %d loses it (reset and prefill instead)",
                               l, m->d.conv_l, s->pos - n, n);
        }
        s->pos = n;
        s->has_logits = 0;
    }
    return ER_OK;
}

int er_session_seed(er_session *s, uint64_t seed) {
    if (!s) return er_fail(ER_EINVAL, "er_session_seed: session is NULL");
    /* splitmix64 of the seed, so seeds 0, 1, 2... give unrelated streams and
     * the xorshift state is never 0 */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    s->rng = (z ^ (z >> 31)) | 1;
    return ER_OK;
}

int er_session_pos(const er_session *s) {
    if (!s) return er_fail(ER_EINVAL, "er_session_pos: session is NULL");
    return s->pos;
}

int er_session_n_ctx(const er_session *s) {
    if (!s) return er_fail(ER_EINVAL, "er_session_n_ctx: session is NULL");
    return s->model->d.n_ctx;
}

int er_session_stats(const er_session *s, er_stats *out) {
    if (!s || !out) return er_fail(ER_EINVAL, "er_session_stats: NULL argument");
    *out = s->stats;
    return ER_OK;
}

/* Shared by er_decode and er_decode_all: checks, chunking, timing, history. */
static int decode(er_session *s, const int32_t *ids, size_t n, float *all) {
    er_model *m = s->model;
    const er_dims *d = &m->d;
    if (n == 0) return er_fail(ER_EINVAL, "er_decode: no tokens given (n = 0)");
    const int slide = m->ctx_strategy != ER_CTX_FAIL;
    if (!slide && n > (size_t)(d->n_ctx - s->pos))
        return er_fail(ER_ECONTEXT, "context full: %d tokens cached + %zu new > n_ctx %d (reset the session or open "
                       "with a larger n_ctx)", s->pos, n, d->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->n_vocab)
            return er_fail(ER_EINVAL, "token id %d at index %zu is out of range [0, %d)", ids[i], i, d->n_vocab);

    double t0 = er_now_ms();
    pthread_mutex_lock(&m->step_lock);
    int rc = ER_OK;
    for (size_t done = 0; done < n;) {
        int chunk = (int)(n - done < (size_t)d->n_batch ? n - done : (size_t)d->n_batch);
        /* a sliding context fills up before it slides (kv_shift.c) */
        if (slide && s->pos == d->n_ctx && (rc = er_kv_slide(s))) break;
        if (chunk > d->n_ctx - s->pos) chunk = d->n_ctx - s->pos;
        /* only the CUDA backend fails here (a device error); the chunks
         * before the failing one stay appended, its own is not */
        if ((rc = er_forward(s, ids + done, chunk, all ? all + done * (size_t)d->n_vocab : NULL))) break;
        memcpy(s->history + s->pos, ids + done, (size_t)chunk * sizeof(int32_t));
        s->pos += chunk;
        done += (size_t)chunk;
    }
    pthread_mutex_unlock(&m->step_lock);
    if (rc) {
        s->has_logits = 0;
        return rc;
    }
    double dt = er_now_ms() - t0;
    s->has_logits = 1;
    if (n > 1) {
        s->stats.prefill_ms += dt;
        s->stats.last_prefill_ms = dt;
        s->stats.n_prefill_tokens += (int64_t)n;
    } else {
        s->stats.decode_ms += dt;
        s->stats.n_decode_tokens += 1;
    }
    return ER_OK;
}

int er_decode(er_session *s, const int32_t *ids, size_t n, float **last_logits) {
    if (!s || !ids) return er_fail(ER_EINVAL, "er_decode: session and ids must not be NULL");
    int rc = decode(s, ids, n, NULL);
    if (rc) return rc;
    if (last_logits) *last_logits = s->logits;
    return ER_OK;
}

int er_decode_all(er_session *s, const int32_t *ids, size_t n, float *out, size_t out_cap) {
    if (!s || !ids || !out) return er_fail(ER_EINVAL, "er_decode_all: session, ids and out must not be NULL");
    size_t V = (size_t)s->model->d.n_vocab;
    if (n > SIZE_MAX / V || out_cap < n * V)
        return er_fail(ER_ERANGE, "er_decode_all: out holds %zu floats, %zu tokens need %zu", out_cap, n, n * V);
    return decode(s, ids, n, out);
}

int er_decode_batch(er_session *const *ss, const int32_t *const *ids, const size_t *n_ids, size_t n_sessions,
                    float **last_logits) {
    if (!ss || !ids || !n_ids) return er_fail(ER_EINVAL, "er_decode_batch: sessions, ids and n_ids must not be NULL");
    if (n_sessions == 0) return er_fail(ER_EINVAL, "er_decode_batch: no sessions given (n_sessions = 0)");
    if (!ss[0]) return er_fail(ER_EINVAL, "er_decode_batch: session 0 is NULL");
    er_model *m = ss[0]->model;
    const er_dims *d = &m->d;
    if (n_sessions > (size_t)d->n_sessions)
        return er_fail(ER_EINVAL, "er_decode_batch: %zu sessions given, the model has %d slots", n_sessions,
                       d->n_sessions);
    if (m->cuda)
        return er_fail(ER_EUNSUPPORTED, "er_decode_batch: the CUDA backend runs one session per step (use er_decode "
                       "per session)");
    size_t total = 0;
    for (size_t i = 0; i < n_sessions; i++) {
        const er_session *s = ss[i];
        if (!s) return er_fail(ER_EINVAL, "er_decode_batch: session %zu is NULL", i);
        if (s->model != m) return er_fail(ER_EINVAL, "er_decode_batch: session %zu belongs to another model", i);
        for (size_t j = 0; j < i; j++)
            if (ss[j] == s) return er_fail(ER_EINVAL, "er_decode_batch: sessions %zu and %zu are the same", j, i);
        if (!ids[i]) return er_fail(ER_EINVAL, "er_decode_batch: ids of session %zu is NULL", i);
        const size_t n = n_ids[i];
        if (n == 0) return er_fail(ER_EINVAL, "er_decode_batch: no tokens given for session %zu", i);
        if (n > (size_t)(d->n_ctx - s->pos))
            return er_fail(ER_ECONTEXT, "context full: session %zu has %d tokens cached + %zu new > n_ctx %d", i,
                           s->pos, n, d->n_ctx);
        for (size_t j = 0; j < n; j++)
            if (ids[i][j] < 0 || ids[i][j] >= d->n_vocab)
                return er_fail(ER_EINVAL, "token id %d at index %zu of session %zu is out of range [0, %d)",
                               ids[i][j], j, i, d->n_vocab);
        total += n;
        if (total > (size_t)d->n_batch)
            return er_fail(ER_ERANGE, "er_decode_batch: the step's rows exceed n_batch %d (split prompts into "
                           "smaller chunks)", d->n_batch);
    }
    const size_t *n = n_ids; /* each <= n_batch, an int */

    double t0 = er_now_ms();
    pthread_mutex_lock(&m->step_lock);
    const int rc = er_forward_batch(ss, ids, n, (int)n_sessions);
    for (size_t i = 0; !rc && i < n_sessions; i++) {
        er_session *s = ss[i];
        memcpy(s->history + s->pos, ids[i], (size_t)n[i] * sizeof(int32_t));
        s->pos += (int)n[i];
    }
    pthread_mutex_unlock(&m->step_lock);
    if (rc) return rc;
    /* each session is charged the whole step: what it waited for its tokens */
    double dt = er_now_ms() - t0;
    for (size_t i = 0; i < n_sessions; i++) {
        er_session *s = ss[i];
        s->has_logits = 1;
        if (n[i] > 1) {
            s->stats.prefill_ms += dt;
            s->stats.last_prefill_ms = dt;
            s->stats.n_prefill_tokens += (int64_t)n[i];
        } else {
            s->stats.decode_ms += dt;
            s->stats.n_decode_tokens += 1;
        }
        if (last_logits) last_logits[i] = s->logits;
    }
    return ER_OK;
}
