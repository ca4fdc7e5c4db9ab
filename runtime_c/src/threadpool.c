/* threadpool.c — condition-variable worker pool; see threadpool.h. */
#include "threadpool.h"

#include <string.h>

#include "edgerun.h"
#include "error.h"
#include "kernels/kernels.h"

size_t er_pool_plan(int n_threads) {
    return n_threads > 1 ? er_align_up(sizeof(er_pool_worker) * (size_t)(n_threads - 1)) : 0;
}

static void *worker_main(void *arg) {
    er_pool_worker *w = arg;
    er_pool *p = w->pool;
    uint64_t seen = 0;
    /* Denormal arithmetic is 10-100x slower on many cores. Workers flush
     * denormals to zero; thread 0 is the caller's own thread, whose FP mode we
     * leave alone, so its rows may keep values below 1e-38 — a difference no
     * logit shows. */
    er_cpu_set_ftz();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->cv_start, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        er_task_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);

        fn(ctx, w->ith, p->n_threads);

        pthread_mutex_lock(&p->mu);
        if (++p->n_done == p->n_threads - 1) pthread_cond_signal(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
}

int er_pool_start(er_pool *p, int n_threads, er_arena *a) {
    memset(p, 0, sizeof *p);
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (p->n_threads == 1) return ER_OK;
    p->workers = er_arena_alloc(a, sizeof(er_pool_worker) * (size_t)(p->n_threads - 1));
    if (!p->workers) return er_fail(ER_ENOMEM_ARENA, "thread pool: arena section too small");
    for (int i = 0; i < p->n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].ith = i + 1;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            er_pool_stop(p);
            return er_fail(ER_ENOMEM, "could not start worker thread %d of %d", i + 1, p->n_threads - 1);
        }
        p->n_started++;
    }
    return ER_OK;
}

void er_pool_run(er_pool *p, er_task_fn fn, void *ctx) {
    if (p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_done = 0;
    p->generation++;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);

    fn(ctx, 0, p->n_threads);

    pthread_mutex_lock(&p->mu);
    while (p->n_done < p->n_threads - 1) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void er_pool_stop(er_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].tid, NULL);
    p->n_started = 0;
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
}
