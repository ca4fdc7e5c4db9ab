/*
 * live.c — er_live: a model handle swapped while other threads generate.
 *
 * The one hard part is the reader side: taking a session must read the
 * current model and take a reference on it as ONE step, or a swap plus the
 * old model's last session ending could close the model between the two.
 * A mutex pairs them; it is held for a pointer load and an increment, once
 * per request (er_live_session_new), never per step: er_decode/er_sample do
 * not look at the handle at all, since a session's model never changes.
 *
 * References live in the model (er_model.live_refs, atomic) so that
 * er_session_free can drop them without the handle's lock; acq_rel on the
 * decrement makes every session's last writes visible to the thread that
 * closes the model.
 */
#include <stdlib.h>

#include "error.h"
#include "model.h"

struct er_live {
    pthread_mutex_t mu;          /* guards current and generation */
    er_model *current;
    uint64_t generation;
    atomic_ullong sessions_started;
    atomic_llong sessions_active;
    atomic_ullong models_closed;
    atomic_int models_open;
};

/* Drops one reference on m; the last one closes it. Never called with mu held:
 * closing joins the model's workers and frees its arena. */
static void drop_ref(er_live *L, er_model *m) {
    if (atomic_fetch_sub_explicit(&m->live_refs, 1, memory_order_acq_rel) != 1) return;
    er_model_close(m);
    atomic_fetch_add_explicit(&L->models_closed, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&L->models_open, 1, memory_order_relaxed);
}

/* Whether the handle may take m over. The caller must not be using m on
 * another thread meanwhile: it is handing the model over. */
static int check_adoptable(const er_model *m, const char *fn) {
    if (!m) return er_fail(ER_EINVAL, "%s: model is NULL", fn);
    if (m->vocab_only) return er_fail(ER_EINVAL, "%s: the model was opened vocab_only: it has no weights to run", fn);
    if (m->live) return er_fail(ER_ESTATE, "%s: the model already belongs to an er_live handle", fn);
    for (int i = 0; i < m->d.n_sessions; i++)
        if (atomic_load(&m->slot_used[i]))
            return er_fail(ER_EBUSY, "%s: the model has sessions in use (slot %d); free them before handing it over",
                           fn, i);
    return ER_OK;
}

static void adopt(er_live *L, er_model *m) {
    m->live = L;
    atomic_store_explicit(&m->live_refs, 1, memory_order_relaxed); /* the "current" reference */
    atomic_fetch_add_explicit(&L->models_open, 1, memory_order_relaxed);
}

int er_live_open(er_model *model, er_live **out) {
    if (!out) return er_fail(ER_EINVAL, "er_live_open: out is NULL");
    *out = NULL;
    int rc = check_adoptable(model, "er_live_open");
    if (rc) return rc;
    er_live *L = malloc(sizeof *L);
    if (!L) return er_fail(ER_ENOMEM, "er_live_open: cannot allocate the handle");
    if (pthread_mutex_init(&L->mu, NULL) != 0) {
        free(L);
        return er_fail(ER_ENOMEM, "er_live_open: cannot initialise the handle's mutex");
    }
    L->current = model;
    L->generation = 0;
    atomic_init(&L->sessions_started, 0);
    atomic_init(&L->sessions_active, 0);
    atomic_init(&L->models_closed, 0);
    atomic_init(&L->models_open, 0);
    adopt(L, model);
    *out = L;
    return ER_OK;
}

int er_live_swap(er_live *L, er_model *next) {
    if (!L) return er_fail(ER_EINVAL, "er_live_swap: live is NULL");
    int rc = check_adoptable(next, "er_live_swap");
    if (rc) return rc;
    adopt(L, next);
    pthread_mutex_lock(&L->mu);
    er_model *old = L->current;
    L->current = next;
    L->generation++;
    pthread_mutex_unlock(&L->mu);
    drop_ref(L, old);
    return ER_OK;
}

/* Reads the current model and takes a reference on it (plus an active-session
 * count for the caller's coming session) in one step. */
static er_model *acquire_current(er_live *L) {
    pthread_mutex_lock(&L->mu);
    er_model *m = L->current;
    atomic_fetch_add_explicit(&m->live_refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&L->sessions_active, 1, memory_order_relaxed);
    pthread_mutex_unlock(&L->mu);
    return m;
}

/* Undoes acquire_current when no session came of it. */
static void unacquire(er_live *L, er_model *m) {
    drop_ref(L, m);
    atomic_fetch_sub_explicit(&L->sessions_active, 1, memory_order_release);
}

int er_live_session_new(er_live *L, er_session **out) {
    if (!out) return er_fail(ER_EINVAL, "er_live_session_new: out is NULL");
    *out = NULL;
    if (!L) return er_fail(ER_EINVAL, "er_live_session_new: live is NULL");
    er_model *m = acquire_current(L);
    int rc = er_session_take(m, out);
    if (rc) {
        unacquire(L, m);
        return rc;
    }
    atomic_fetch_add_explicit(&L->sessions_started, 1, memory_order_relaxed);
    return ER_OK;
}

void er_live_session_release(er_session *s) {
    er_model *m = s->model;
    er_live *L = m->live;
    atomic_store_explicit(&m->slot_used[s->slot], 0, memory_order_release);
    drop_ref(L, m); /* may close m: s points into m's arena and is dead from here */
    /* Last touch of L: once the count reaches 0, er_live_close may free it. */
    atomic_fetch_sub_explicit(&L->sessions_active, 1, memory_order_release);
}

int er_live_session_rebind(er_live *L, er_session **sp) {
    if (!L || !sp || !*sp) return er_fail(ER_EINVAL, "er_live_session_rebind: NULL argument");
    er_session *old = *sp;
    if (old->model->live != L)
        return er_fail(ER_EINVAL, "er_live_session_rebind: the session was not taken from this er_live handle");
    pthread_mutex_lock(&L->mu);
    int same = L->current == old->model;
    pthread_mutex_unlock(&L->mu);
    if (same) return 0;

    er_model *m = acquire_current(L);
    if (m == old->model) { /* swapped back meanwhile */
        unacquire(L, m);
        return 0;
    }
    er_session *ns;
    int rc = er_session_take(m, &ns);
    if (rc) {
        unacquire(L, m);
        return rc;
    }
    if (old->pos > m->d.n_ctx) {
        rc = er_fail(ER_ECONTEXT, "er_live_session_rebind: the session holds %d tokens, the current model's n_ctx is %d",
                     old->pos, m->d.n_ctx);
        er_live_session_release(ns);
        return rc;
    }
    /* The old KV cache was computed with the old weights: rebuild it from the
     * tokens, so the next step sees only the new model. */
    if (old->pos > 0 && (rc = er_decode(ns, old->history, (size_t)old->pos, NULL))) {
        er_live_session_release(ns);
        return rc;
    }
    ns->has_logits = old->pos > 0 && old->has_logits;
    ns->rng = old->rng;
    ns->stats = old->stats; /* the rebuild is not the caller's prefill */
    er_live_session_release(old);
    *sp = ns;
    return 1;
}

int er_live_stats_get(er_live *L, er_live_stats *out) {
    if (!L || !out) return er_fail(ER_EINVAL, "er_live_stats_get: NULL argument");
    pthread_mutex_lock(&L->mu);
    out->generation = L->generation;
    out->current_fingerprint = L->current->fingerprint;
    pthread_mutex_unlock(&L->mu);
    out->sessions_started = atomic_load(&L->sessions_started);
    out->sessions_active = atomic_load(&L->sessions_active);
    out->models_closed = atomic_load(&L->models_closed);
    out->models_open = atomic_load(&L->models_open);
    return ER_OK;
}

int er_live_close(er_live *L) {
    if (!L) return ER_OK;
    long long active = atomic_load_explicit(&L->sessions_active, memory_order_acquire);
    if (active != 0)
        return er_fail(ER_EBUSY, "er_live_close: %lld sessions are still in use; free them first", active);
    drop_ref(L, L->current);
    pthread_mutex_destroy(&L->mu);
    free(L);
    return ER_OK;
}
