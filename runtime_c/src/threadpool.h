/*
 * threadpool.h — fixed worker pool created at open (internal).
 *
 * Two ways to dispatch fn(ctx, ith, nth), the caller being thread 0:
 *  - er_pool_run: every thread runs fn exactly once (a barrier), so fn may
 *    split work statically by ith (er_split);
 *  - er_pool_run_dynamic: the caller runs fn and every worker that wakes
 *    while the dispatch is open joins it. fn must claim its work from a
 *    counter (er_pool_claim) and not count on any ith showing up: a worker
 *    the OS has not scheduled yet misses the dispatch instead of holding it
 *    hostage. When the caller's fn returns no work is left to claim; it
 *    waits only for the workers that joined, and closes the dispatch to
 *    late wakers only if some worker has not joined. The
 *    forward pass uses this one: on a loaded machine a step no longer waits
 *    a scheduler tick for the slowest thread to wake up.
 *
 * Waits spin a short while (a decode step issues ~5 dispatches per layer a
 * few microseconds apart, and a futex wake-up costs more than that), then
 * block on a condition variable.
 *
 * More threads than CPUs: workers 1..CPUs-1 are "primary", the rest "extra".
 * Extras never spin and sleep on their own condition variable, which only a
 * barrier dispatch (er_pool_run) wakes; a dynamic dispatch wakes primaries
 * only (an extra that happens to be awake may still join). So 8 threads on
 * 2 CPUs run the forward pass like 2 — the other 6 could not run at the same
 * time anyway, and waking them on every operation cost more than they add —
 * instead of collapsing into wake-ups and time-slice fights.
 *
 * Nothing here allocates after er_pool_start.
 */
#ifndef ER_THREADPOOL_H
#define ER_THREADPOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "arena.h"

typedef void (*er_task_fn)(void *ctx, int ith, int nth);

/* One worker. Its two lines are written by the worker alone; the caller
 * only reads them. */
typedef struct er_pool_worker {
    /* The last dispatch this worker took a place in (or tried to). Read by
     * the caller only when it must close a dispatch this worker has not
     * finished, so in the usual case the line is still the worker's own
     * when the next join writes it, and the join costs no cache-line
     * transfer between cores. */
    _Alignas(64) atomic_ullong joined;
    struct er_pool *pool;
    int ith;
    pthread_t tid;
    /* The last dispatch this worker has left (done with fn, or turned away):
     * what the caller polls at the end of a dispatch. */
    _Alignas(64) atomic_ullong done;
} er_pool_worker;

typedef struct er_pool {
    int n_threads;               /* including the caller */
    int n_started;               /* workers actually running (for clean shutdown) */
    int n_ready;                 /* workers past their start-up (under mu; er_pool_start waits for all) */
    int spin;                    /* 1: the caller and primary workers poll a while before blocking */
    int n_primary;               /* workers 1..n_primary are primary: min(n_threads, CPUs) - 1 */
    er_pool_worker *workers;     /* n_threads - 1, in the arena */
    /* The dispatch line, written by the caller (workers write it only on
     * their way to sleep). A polling worker that sees gen change finds fn
     * and ctx in the same line: one transfer between cores starts it, where
     * separate lines for the number, the task and a shared join counter
     * made a chain of four or five (each 150-180 ns when the two vCPUs sit
     * on different CCDs). fn/ctx are plain fields: written before the store
     * of gen that opens a dispatch, read by a worker only after its join is
     * confirmed for that gen, and not written again until every worker that
     * joined is done. */
    /* 64 bits, so that a number never comes round again: a worker asleep
     * since long ago still holds its last `done`, which must not pass for
     * a later dispatch's */
    _Alignas(64) atomic_ullong gen;  /* number of the latest dispatch (1, 2, ...) */
    atomic_ullong closed;        /* == gen once a dynamic dispatch takes no more workers */
    er_task_fn fn;
    void *ctx;
    atomic_int quit;
    atomic_int caller_sleeping;  /* the caller is blocked (or about to block) on cv_done */
    atomic_int n_sleeping;       /* primary workers blocked (or about to block) on cv_start */
    atomic_int n_sleeping_extra; /* extra workers blocked (or about to block) on cv_extra */
    _Alignas(64) pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_extra, cv_done;
} er_pool;

/* Arena bytes er_pool_start takes for n_threads. */
size_t er_pool_plan(int n_threads);

/* Starts n_threads - 1 workers. cpu_mask != 0 restricts every worker to the
 * CPUs whose bits are set (a board's big cores; Linux only). On failure
 * stops what it started and returns an er_status: ER_ENOMEM when
 * pthread_create fails, ER_EINVAL for a mask naming no usable CPU,
 * ER_EUNSUPPORTED for a mask where affinity is not available. */
int er_pool_start(er_pool *p, int n_threads, uint64_t cpu_mask, er_arena *a);

void er_pool_run(er_pool *p, er_task_fn fn, void *ctx);
void er_pool_run_dynamic(er_pool *p, er_task_fn fn, void *ctx);

/* Joins the workers. Safe on a pool whose start failed. */
void er_pool_stop(er_pool *p);

/* CPUs this process may run on (affinity-aware on Linux), at least 1. */
int er_pool_cpus(void);

/* Splits [0, n) evenly: thread ith of nth gets [*lo, *hi). */
static inline void er_split(int n, int ith, int nth, int *lo, int *hi) {
    int per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

/* Dynamic split: claims the next chunk index from *next (relaxed: the
 * counter only hands out indices, it orders no data — the pool's dispatch
 * and completion do). The caller resets *next before er_pool_run. */
static inline int er_pool_claim(atomic_int *next) {
    return atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
}

#endif
