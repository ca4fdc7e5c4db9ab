/*
 * threadpool.h — fixed worker pool created at open (internal).
 *
 * er_pool_run(fn) runs fn(ctx, ith, nth) on every thread, the caller being
 * thread 0, and returns when all are done. Workers block on a condition
 * variable between steps: a simple, oversubscription-safe pool; the issue on
 * fast CPU kernels replaces the hand-off with a spin-then-block barrier.
 * Nothing here allocates after er_pool_start.
 */
#ifndef ER_THREADPOOL_H
#define ER_THREADPOOL_H

#include <pthread.h>
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
    er_pool_worker *workers;     /* n_threads - 1, in the arena */
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    er_task_fn fn;
    void *ctx;
    uint64_t generation;
    int n_done;
    int quit;
} er_pool;

/* Arena bytes er_pool_start takes for n_threads. */
size_t er_pool_plan(int n_threads);

/* Starts n_threads - 1 workers. On failure stops what it started and returns
 * an er_status (ER_ENOMEM when pthread_create fails). */
int er_pool_start(er_pool *p, int n_threads, er_arena *a);

void er_pool_run(er_pool *p, er_task_fn fn, void *ctx);

/* Joins the workers. Safe on a pool whose start failed. */
void er_pool_stop(er_pool *p);

/* Splits [0, n) evenly: thread ith of nth gets [*lo, *hi). */
static inline void er_split(int n, int ith, int nth, int *lo, int *hi) {
    int per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

#endif
