/*
 * test_pool_dynamic.c — er_pool_run_dynamic: the dispatch the forward pass
 * uses, where a worker joins only if it wakes while the dispatch is open.
 *
 * Thousands of tiny dispatches with 2, 3 and 8 threads (more than this
 * machine's CPUs: the blocking path), each claiming chunks from a counter:
 *  - every chunk is done exactly once, by whoever claimed it;
 *  - no thread is inside the task after er_pool_run_dynamic returns (a
 *    counter the task raises on entry and lowers on exit);
 *  - a task's plain writes are visible to the caller afterwards (the results
 *    array is read without atomics; TSan builds would report a missing
 *    release/acquire);
 * and mixing with er_pool_run (the barrier) keeps both correct.
 */
#include <stdio.h>
#include <string.h>

#include "edgerun.h"
#include "threadpool.h"
#include "test_util.h"

#define N_CHUNKS 53

typedef struct task {
    int round;
    atomic_int next;
    atomic_int inside;            /* threads currently in the task */
    int done[N_CHUNKS];           /* round that did the chunk (plain writes) */
    atomic_int count[N_CHUNKS];   /* times the chunk was done this round */
} task;

static void work(void *arg, int ith, int nth) {
    task *t = arg;
    (void)ith;
    (void)nth;
    atomic_fetch_add(&t->inside, 1);
    for (int c; (c = er_pool_claim(&t->next)) < N_CHUNKS;) {
        t->done[c] = t->round;
        atomic_fetch_add(&t->count[c], 1);
    }
    atomic_fetch_sub(&t->inside, 1);
}

static void hammer(int n_threads, int rounds) {
    static _Alignas(64) unsigned char mem[4096];
    er_arena a;
    er_arena_init(&a, mem, sizeof mem);
    er_pool p;
    CHECK(er_pool_start(&p, n_threads, 0, &a) == ER_OK, "start %d: %s", n_threads, er_last_error());
    task t;
    memset(&t, 0, sizeof t);
    int bad_chunks = 0, left_inside = 0;
    for (int r = 1; r <= rounds; r++) {
        t.round = r;
        atomic_store(&t.next, 0);
        for (int c = 0; c < N_CHUNKS; c++) atomic_store(&t.count[c], 0);
        if (r % 5 == 0)
            er_pool_run(&p, work, &t);
        else
            er_pool_run_dynamic(&p, work, &t);
        left_inside += atomic_load(&t.inside) != 0;
        for (int c = 0; c < N_CHUNKS; c++) bad_chunks += t.done[c] != r || atomic_load(&t.count[c]) != 1;
    }
    CHECK(bad_chunks == 0, "%d threads: %d chunks not done exactly once in their round", n_threads, bad_chunks);
    CHECK(left_inside == 0, "%d threads: a thread was still inside the task after %d dispatches returned", n_threads,
          left_inside);
    er_pool_stop(&p);
}

int main(void) {
    hammer(2, 4000);
    hammer(3, 2000);
    hammer(8, 1000);
    hammer(1, 100);
    return test_summary();
}
