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
 *    closes the dispatch and waits only for the workers that joined. The
 *    forward pass uses this one: on a loaded machine a step no longer waits
 *    a scheduler tick for the slowest thread to wake up.
 *
 * Waits spin a short while (a forward step issues ~15 dispatches per layer a
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

typedef struct er_pool_worker {
    struct er_pool *pool;
    int ith;
    pthread_t tid;
} er_pool_worker;

typedef struct er_pool {
    int n_threads;               /* including the caller */
    int n_started;               /* workers actually running (for clean shutdown) */
    int spin;                    /* 1: the caller and primary workers poll a while before blocking */
    int n_primary;               /* workers 1..n_primary are primary: min(n_threads, CPUs) - 1 */
    er_pool_worker *workers;     /* n_threads - 1, in the arena */
    /* fn/ctx are plain fields: written by the caller before the increment of
     * gen that opens a dispatch, read by a worker only while it holds a
     * place in `active` for that same gen */
    er_task_fn fn;
    void *ctx;
    /* Separate cache lines: joined workers update `active` while idle ones
     * poll gen. gen is odd while a dispatch is open, even when closed. */
    _Alignas(64) atomic_uint gen;
    atomic_int n_sleeping;       /* primary workers blocked (or about to block) on cv_start */
    atomic_int n_sleeping_extra; /* extra workers blocked (or about to block) on cv_extra */
    atomic_int quit;
    _Alignas(64) atomic_int active;  /* workers inside fn (or checking whether they may enter) */
    atomic_int finished;         /* workers that ran fn in the current dispatch */
    atomic_int caller_sleeping;  /* the caller is blocked (or about to block) on cv_done */
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
