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

int er_session_truncate(er_session *s, int32_t n) {
    if (!s) return er_fail(ER_EINVAL, "er_session_truncate: session is NULL");
    if (n < 0 || n > s->pos)
        return er_fail(ER_EINVAL, "er_session_truncate: %d tokens asked to keep, the session holds %d", n, s->pos);
    /* Every cached row is addressed by its position alone, so the rows below
     * n stay valid. A cache whose rows depend on later tokens (a ring that
     * wrapped, a recurrent state) cannot be cut this way and must refuse. */
    if (n < s->pos) {
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
