/*
 * test_threadpool.c — the worker pool under load, written to be run under
 * ThreadSanitizer (`make test-tsan`) as well as in every normal build.
 *
 *  - many tiny dispatches: each task reads what the caller wrote before
 *    er_pool_run and writes plain (non-atomic) per-thread slots the caller
 *    reads after it returns, so a missing release/acquire in the hand-off or
 *    the completion is a data race TSan reports, and a lost or doubled
 *    dispatch is a wrong count this test reports;
 *  - dynamic chunks (er_pool_claim): every chunk done exactly once;
 *  - pools of 2 threads (spinning waiters on a 2-CPU machine) and of more
 *    threads than CPUs (the blocking path), started and stopped repeatedly;
 *  - two sessions of one model (2 pool threads, trace ring on) decoding from
 *    two threads at once, plus a third thread reading the trace: each
 *    session's greedy tokens equal a run made alone;
 *  - decode steps past 256 positions at 2 and 3 threads, whose attention
 *    is split in two dispatches: logits equal one thread's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "threadpool.h"
#include "test_util.h"

#define MAX_T 8
#define N_CHUNKS 37

/* The pool's contract (threadpool.h): the caller always runs the task, a
 * worker joins only if it wakes while the dispatch is open, so work is
 * claimed chunk by chunk and no task may count on a given ith showing up. */
typedef struct tiny_ctx {
    int round;                    /* written by the caller before each dispatch */
    atomic_int next;              /* chunk counter, reset before each dispatch */
    int chunk_round[N_CHUNKS];    /* the round that claimed the chunk (plain writes) */
    int chunk_count[N_CHUNKS];    /* times the chunk was claimed (plain writes) */
    int last_round[MAX_T];        /* last round thread ith joined (plain, own slot) */
    int worker_joins[MAX_T];      /* [0]: set negative when a thread joined one dispatch twice */
    volatile unsigned sink[MAX_T];
} tiny_ctx;

static void tiny_task(void *arg, int ith, int nth) {
    tiny_ctx *c = arg;
    if (ith < 0 || ith >= nth || ith >= MAX_T) return; /* counted as lost chunks below */
    if (c->last_round[ith] == c->round) c->worker_joins[0] = -1000000; /* doubled join */
    c->last_round[ith] = c->round;
    if (ith > 0) c->worker_joins[ith]++;
    for (int k; (k = er_pool_claim(&c->next)) < N_CHUNKS;) {
        /* a little work per chunk, so a woken worker finds some left */
        unsigned x = (unsigned)k;
        for (int i = 0; i < 64; i++) x = x * 1664525u + 1013904223u;
        c->sink[ith] = x;
        c->chunk_round[k] = c->round;
        c->chunk_count[k]++;
    }
}

static void hammer_pool(int n_threads, int rounds, long *joins) {
    static _Alignas(64) unsigned char mem[4096];
    er_arena a;
    er_arena_init(&a, mem, sizeof mem);
    er_pool p;
    int rc = er_pool_start(&p, n_threads, 0, &a);
    CHECK(rc == ER_OK, "er_pool_start(%d): %s", n_threads, er_last_error());
    if (rc) return;
    static tiny_ctx c;
    memset(&c, 0, sizeof c);
    int bad = 0;
    for (int r = 1; r <= rounds; r++) {
        c.round = r;
        atomic_store_explicit(&c.next, 0, memory_order_relaxed);
        er_pool_run(&p, tiny_task, &c);
        for (int k = 0; k < N_CHUNKS; k++) bad += c.chunk_round[k] != r || c.chunk_count[k] != r;
    }
    CHECK(bad == 0, "%d threads: %d chunks not claimed exactly once across %d dispatches", n_threads, bad, rounds);
    CHECK(c.worker_joins[0] == 0, "%d threads: a thread joined one dispatch twice", n_threads);
    for (int t = 1; t < n_threads; t++) *joins += c.worker_joins[t];
    er_pool_stop(&p);
}

/* ---- two sessions on two threads ----------------------------------------------- */

#define N_GEN 24

typedef struct gen_job {
    er_model *m;
    int32_t first;                /* the prompt is [1, first, first+1, ...] */
    int32_t out[N_GEN];
    int rc;
    int repeats;
} gen_job;

static int generate(er_model *m, int32_t first, int32_t *out) {
    er_session *s = NULL;
    int rc = er_session_new(m, &s);
    if (rc) return rc;
    int32_t prompt[6] = {1, first, first + 1, first + 2, first + 3, first + 4};
    rc = er_decode(s, prompt, 6, NULL);
    for (int i = 0; !rc && i < N_GEN; i++) {
        rc = er_sample(s, NULL, &out[i]);
        if (!rc) rc = er_decode(s, &out[i], 1, NULL);
    }
    er_session_free(s);
    return rc;
}

static void *gen_thread(void *arg) {
    gen_job *j = arg;
    int32_t got[N_GEN];
    for (int r = 0; r < j->repeats && !j->rc; r++) {
        j->rc = generate(j->m, j->first, got);
        if (!j->rc && memcmp(got, j->out, sizeof got) != 0) j->rc = -100;
    }
    return NULL;
}

typedef struct reader_job {
    er_model *m;
    atomic_int stop;
    int bad;
} reader_job;

static void *trace_reader(void *arg) {
    reader_job *r = arg;
    while (!atomic_load(&r->stop)) {
        int n = er_trace_count(r->m);
        er_trace_event e;
        if (n < 0 || (n > 0 && er_trace_get(r->m, n - 1, &e) != ER_OK)) r->bad++;
        else if (n > 0 && (e.op < 0 || e.op >= ER_OP_COUNT)) r->bad++;
    }
    return NULL;
}

static void two_sessions(const char *path) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 64;
    o.n_threads = 2;
    o.n_sessions = 2;
    o.trace_events = 4096;
    er_model *m = NULL;
    if (er_model_open(path, &o, &m) != ER_OK) {
        CHECK(0, "open %s: %s", path, er_last_error());
        return;
    }
    gen_job jobs[2] = {{.m = m, .first = 3, .repeats = 6}, {.m = m, .first = 7, .repeats = 6}};
    for (int k = 0; k < 2; k++) CHECK(generate(m, jobs[k].first, jobs[k].out) == ER_OK, "reference run: %s",
                                      er_last_error());
    reader_job rd = {.m = m, .bad = 0};
    atomic_init(&rd.stop, 0);
    pthread_t th[2], tr;
    int started = 0;
    int reader = pthread_create(&tr, NULL, trace_reader, &rd) == 0;
    for (; started < 2; started++)
        if (pthread_create(&th[started], NULL, gen_thread, &jobs[started]) != 0) break;
    CHECK(started == 2 && reader, "could not start the test threads");
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    atomic_store(&rd.stop, 1);
    if (reader) pthread_join(tr, NULL);
    for (int k = 0; k < started; k++)
        CHECK(jobs[k].rc == ER_OK, "session %d: %s", k,
              jobs[k].rc == -100 ? "tokens differ from the run made alone" : er_last_error());
    CHECK(rd.bad == 0, "%d bad trace reads while decoding", rd.bad);
    er_model_close(m);
}

/* ---- a decode step split over the pool -------------------------------------------- */

/* Past 256 cached positions, a model with fewer than 4 K/V heads per thread
 * splits each decode step's attention in two dispatches over the pool
 * (model.h, er_att_split): K rows scored into the threads' shared scratch,
 * then V summed by head ranges. The logits must equal one thread's bit for
 * bit; under TSan a missing hand-off between the two dispatches is a race. */
#define LONG_PROMPT 270
#define LONG_STEPS 8
#define LONG_VOCAB 16 /* the embedded model's */

static int long_decode(const char *path, int n_threads, float *logits) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = LONG_PROMPT + LONG_STEPS;
    o.n_threads = n_threads;
    er_model *m = NULL;
    er_session *s = NULL;
    int rc = er_model_open(path, &o, &m);
    if (!rc) rc = er_session_new(m, &s);
    int32_t ids[LONG_PROMPT + LONG_STEPS];
    for (int i = 0; i < LONG_PROMPT + LONG_STEPS; i++) ids[i] = 3 + (i * 7) % (LONG_VOCAB - 3);
    if (!rc) rc = er_decode(s, ids, LONG_PROMPT, NULL);
    for (int i = 0; !rc && i < LONG_STEPS; i++) {
        float *last = NULL;
        rc = er_decode(s, &ids[LONG_PROMPT + i], 1, &last);
        if (!rc) memcpy(logits + (size_t)i * LONG_VOCAB, last, LONG_VOCAB * sizeof(float));
    }
    er_session_free(s);
    er_model_close(m);
    return rc;
}

static void split_decode(const char *path) {
    static float one[LONG_STEPS * LONG_VOCAB], many[LONG_STEPS * LONG_VOCAB];
    CHECK(long_decode(path, 1, one) == ER_OK, "long decode, 1 thread: %s", er_last_error());
    for (int t = 2; t <= 3; t++) {
        CHECK(long_decode(path, t, many) == ER_OK, "long decode, %d threads: %s", t, er_last_error());
        CHECK(memcmp(one, many, sizeof one) == 0, "long decode: logits at %d threads differ from 1 thread's", t);
    }
}

int main(int argc, char **argv) {
    /* Rounds stay modest: under TSan every dispatch costs ~100x. */
    long joins = 0;
    for (int rep = 0; rep < 3; rep++) {
        hammer_pool(2, 3000, &joins);
        hammer_pool(3, 1000, &joins);
        hammer_pool(MAX_T, 300, &joins);
    }
    hammer_pool(1, 100, &joins);
    /* Without joins the races this test looks for could not happen. */
    CHECK(joins > 0, "no worker ever joined a dispatch in %d dispatches", 3 * 4300);
    printf("workers joined %ld dispatches\n", joins);
    if (argc > 1) {
        two_sessions(argv[1]);
        split_decode(argv[1]);
    } else {
        printf("no model given: skipping the two-session and split-decode parts\n");
    }
    return test_summary();
}
