/* threadpool.c — spin-then-block worker pool; see threadpool.h. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* pthread_setaffinity_np, sched_getaffinity, CPU_* */
#endif
#include "threadpool.h"

#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "edgerun.h"
#include "error.h"
#include "kernels/kernels.h"

/* How long a waiter polls before it blocks: longer than the gap between
 * two dispatches of one forward step (norms, rope, residual adds: a few
 * microseconds), far shorter than a scheduler tick, so an idle model sleeps
 * almost at once. Measured in time, not polls: on a loaded machine each
 * sched_yield below may give the core away for a whole time slice. */
#define ER_POOL_SPIN_NS 100000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Poll state of one wait: the pause hint for the first polls, then
 * sched_yield, so that on a loaded machine the thread we wait for (or any
 * other) gets this core instead of our loop; with nothing else runnable
 * sched_yield returns at once. keep_polling turns false once the pool's
 * spin time has passed (at once when the pool never spins). */
typedef struct spin_state {
    int i;
    uint64_t t0;
} spin_state;

static int keep_polling(const er_pool *p, spin_state *s) {
    if (!p->spin) return 0;
    if (s->i < 64) {
        s->i++;
        cpu_relax();
        return 1;
    }
    uint64_t t = now_ns();
    if (s->i++ == 64) s->t0 = t;
    else if (t - s->t0 > ER_POOL_SPIN_NS) return 0;
    sched_yield();
    return 1;
}

size_t er_pool_plan(int n_threads) {
    return n_threads > 1 ? er_align_up(sizeof(er_pool_worker) * (size_t)(n_threads - 1)) : 0;
}

int er_pool_cpus(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Dispatch g is one this worker has not seen, and still open. */
static inline int fresh(const er_pool *p, unsigned long long g, unsigned long long seen) {
    return g != seen && atomic_load_explicit(&p->closed, memory_order_relaxed) != g;
}

/* Waits for a fresh dispatch (or quit); returns gen as last read. A primary
 * worker polls first and sleeps on cv_start; an extra one sleeps at once on
 * cv_extra, which only barrier dispatches (and stop) signal. */
static unsigned long long wait_start(er_pool *p, unsigned long long seen, int primary) {
    unsigned long long g;
    spin_state st = {0, 0};
    do {
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (fresh(p, g, seen) || atomic_load_explicit(&p->quit, memory_order_relaxed)) return g;
    } while (primary && keep_polling(p, &st));
    atomic_int *sleeping = primary ? &p->n_sleeping : &p->n_sleeping_extra;
    pthread_cond_t *cv = primary ? &p->cv_start : &p->cv_extra;
    pthread_mutex_lock(&p->mu);
    /* seq_cst increment, then re-check gen: a barrier dispatch stores gen
     * seq_cst and then reads the sleeper count. In the single total order
     * either it sees us and signals under the mutex, or our load of gen comes
     * after its store. (A dynamic dispatch opens with a plain release store;
     * see run() for why missing a worker that is falling asleep is fine.) */
    atomic_fetch_add(sleeping, 1);
    while (!fresh(p, g = atomic_load(&p->gen), seen) && !atomic_load(&p->quit)) pthread_cond_wait(cv, &p->mu);
    atomic_fetch_sub(sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

/* The stack a worker's deepest task needs (a matmul kernel keeps its
 * activation slices there, ~12 KiB) made resident before the first task,
 * and before er_pool_start returns: a worker that first ran, or first
 * joined a dispatch, late in a generation would otherwise take page faults
 * in the middle of that step (test_no_alloc counts page faults while
 * decoding). Not inlined, so the pages touched are the ones the tasks'
 * frames reuse below worker_main's. */
static __attribute__((noinline)) void touch_stack(void) {
    volatile unsigned char pad[64 * 1024];
    for (size_t i = 0; i < sizeof pad; i += 4096) pad[i] = 0;
}

static void *worker_main(void *arg) {
    er_pool_worker *w = arg;
    er_pool *p = w->pool;
    unsigned long long seen = 0;
    /* Denormal arithmetic is 10-100x slower on many cores. Workers flush
     * denormals to zero; thread 0 is the caller's own thread, whose FP mode we
     * leave alone, so its rows may keep values below 1e-38 — a difference no
     * logit shows. */
    er_cpu_set_ftz();
    touch_stack();
    pthread_mutex_lock(&p->mu);
    p->n_ready++;
    pthread_cond_broadcast(&p->cv_done); /* er_pool_start waits on it; dispatch waiters re-check */
    pthread_mutex_unlock(&p->mu);
    for (;;) {
        unsigned long long g = wait_start(p, seen, w->ith <= p->n_primary);
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) return NULL;
        seen = g;
        /* Join: publish the claim on g, then confirm g is still the open
         * dispatch. The caller closes (stores closed) and then reads joined,
         * both as full fences: either it sees our claim and waits for `done`,
         * or our re-read sees the close (or a later dispatch) and we leave
         * without touching fn or ctx. Exchanges, not stores: a
         * read-modify-write is a full fence everywhere, including qemu-user
         * (see wait_done). */
        atomic_exchange(&w->joined, g);
        if (atomic_load(&p->gen) == g && atomic_load(&p->closed) != g) p->fn(p->ctx, w->ith, p->n_threads);
        /* The release half publishes the task's writes to the caller; the
         * fence half orders it before the read of caller_sleeping, which
         * pairs with wait_done's exchange. */
        atomic_exchange(&w->done, g);
        if (atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Restricts a worker to the mask's CPUs (the whole set, not one CPU each:
 * the scheduler may still move a worker off a big core that the caller or
 * another process occupies). */
static int pin(pthread_t tid, uint64_t mask) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0; c < 64; c++)
        if (mask >> c & 1) CPU_SET(c, &set);
    if (pthread_setaffinity_np(tid, sizeof set, &set) != 0)
        return er_fail(ER_EINVAL, "cpu_mask 0x%llx names no CPU this process may run on",
                       (unsigned long long)mask);
    return ER_OK;
#else
    (void)tid;
    return er_fail(ER_EUNSUPPORTED, "cpu_mask 0x%llx: thread pinning is only implemented on Linux",
                   (unsigned long long)mask);
#endif
}

int er_pool_start(er_pool *p, int n_threads, uint64_t cpu_mask, er_arena *a) {
    memset(p, 0, sizeof *p);
    p->n_threads = n_threads < 1 ? 1 : n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->closed, 0);
    atomic_init(&p->quit, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->n_sleeping_extra, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_extra, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    int cpus = er_pool_cpus();
    if (cpu_mask) {
        int in_mask = 0;
        for (int c = 0; c < 64; c++) in_mask += (int)(cpu_mask >> c & 1);
        if (in_mask < cpus) cpus = in_mask;
    }
    p->n_primary = (p->n_threads < cpus ? p->n_threads : cpus) - 1;
    p->spin = cpus > 1; /* one CPU: whoever we wait for needs this very core */
    if (p->n_threads == 1) return ER_OK;
    p->workers = er_arena_alloc(a, sizeof(er_pool_worker) * (size_t)(p->n_threads - 1));
    if (!p->workers) return er_fail(ER_ENOMEM_ARENA, "thread pool: arena section too small");
    for (int i = 0; i < p->n_threads - 1; i++) {
        atomic_init(&p->workers[i].joined, 0);
        atomic_init(&p->workers[i].done, 0);
        p->workers[i].pool = p;
        p->workers[i].ith = i + 1;
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]) != 0) {
            er_pool_stop(p);
            return er_fail(ER_ENOMEM, "could not start worker thread %d of %d", i + 1, p->n_threads - 1);
        }
        p->n_started++;
        if (cpu_mask) {
            int rc = pin(p->workers[i].tid, cpu_mask);
            if (rc) {
                er_pool_stop(p);
                return rc;
            }
        }
    }
    /* every worker started up (FTZ set, stack resident) before open returns */
    pthread_mutex_lock(&p->mu);
    while (p->n_ready < p->n_started) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return ER_OK;
}

/* Waits (spin, then block) until worker w has left dispatch g; `done` is
 * re-read under the mutex after caller_sleeping is set, pairing with the
 * worker that stores it and then reads caller_sleeping. */
static void wait_done(er_pool *p, er_pool_worker *w, unsigned long long g) {
    spin_state st = {0, 0};
    do {
        if (atomic_load_explicit(&w->done, memory_order_acquire) == g) return;
    } while (keep_polling(p, &st));
    pthread_mutex_lock(&p->mu);
    /* An exchange, not a store: this is the store-then-load half of a Dekker
     * pair with the worker's RMW-then-load. C11 orders a seq_cst store before
     * the following seq_cst load, and real Arm cores do (STLR;LDAR), but
     * qemu-user translates STLR/LDAR without a store-load fence, so on an x86
     * host the load could pass the store and the wake-up be lost (seen as a
     * hang of the pool tests under qemu). A read-modify-write is a full fence
     * everywhere. */
    atomic_exchange(&p->caller_sleeping, 1);
    while (atomic_load(&w->done) != g) pthread_cond_wait(&p->cv_done, &p->mu);
    atomic_store(&p->caller_sleeping, 0);
    pthread_mutex_unlock(&p->mu);
}

static void run(er_pool *p, er_task_fn fn, void *ctx, int every_thread) {
    if (p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    const unsigned long long g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    /* A barrier must reach every worker, so it opens with a full fence
     * before reading the sleeper counts (wait_start's Dekker pair). A
     * dynamic dispatch opens with a release store: the fence would hold the
     * caller for a round trip to the core that polls this line. Without it
     * the count can be read before the store is seen, and a worker falling
     * asleep at that moment (after ER_POOL_SPIN_NS idle) sleeps through this
     * dispatch, which a dynamic dispatch allows; the next one sees it
     * counted and wakes it. */
    if (every_thread)
        atomic_exchange(&p->gen, g);
    else
        atomic_store_explicit(&p->gen, g, memory_order_release);
    const int sleeping = atomic_load(&p->n_sleeping);
    const int sleeping_extra = every_thread ? atomic_load(&p->n_sleeping_extra) : 0;
    if (sleeping > 0 || sleeping_extra > 0) {
        pthread_mutex_lock(&p->mu);
        if (sleeping > 0) pthread_cond_broadcast(&p->cv_start);
        if (sleeping_extra > 0) pthread_cond_broadcast(&p->cv_extra);
        pthread_mutex_unlock(&p->mu);
    }

    fn(ctx, 0, p->n_threads);

    /* A worker that is done costs one read of its `done` line. Only one that
     * is not has its `joined` line read, and only one not inside the task
     * yet makes the caller close the dispatch (late wakers stay out). */
    int closed = 0;
    for (int i = 0; i < p->n_threads - 1; i++) {
        er_pool_worker *w = &p->workers[i];
        if (!every_thread && atomic_load_explicit(&w->done, memory_order_acquire) != g &&
            atomic_load(&w->joined) != g) {
            if (!closed) {
                atomic_exchange(&p->closed, g); /* a full fence before the re-read: the join's Dekker pair */
                closed = 1;
            }
            if (atomic_load(&w->joined) != g) continue;
        }
        wait_done(p, w, g);
    }
}

void er_pool_run(er_pool *p, er_task_fn fn, void *ctx) { run(p, fn, ctx, 1); }
void er_pool_run_dynamic(er_pool *p, er_task_fn fn, void *ctx) { run(p, fn, ctx, 0); }

void er_pool_stop(er_pool *p) {
    atomic_store(&p->quit, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv_start);
    pthread_cond_broadcast(&p->cv_extra);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].tid, NULL);
    p->n_started = 0;
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_extra);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
}
