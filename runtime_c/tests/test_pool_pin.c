/*
 * test_pool_pin.c — er_options.cpu_mask (pinning the worker threads to a
 * board's big cores) and oversubscription.
 *
 *  - a mask of the CPUs this process may use: every worker's affinity is
 *    exactly that set, and greedy tokens equal an unpinned run;
 *  - a one-CPU mask: workers confined to that CPU, tokens still equal;
 *  - a mask naming no CPU we may use: er_model_open fails with ER_EINVAL and
 *    a message naming the mask, and leaks nothing (the next open works);
 *  - 8 threads on however many CPUs there are: tokens equal. Decode speed at
 *    1, 2 and 8 threads is printed (a figure to read, not a timed check: the
 *    pool must not collapse when threads outnumber cores).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "edgerun.h"
#include "model.h"
#include "test_util.h"

#define N_GEN 32

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_model(const char *path, int n_threads, uint64_t mask, er_model **m) {
    er_options o;
    er_options_default(&o);
    o.n_ctx = 128;
    o.n_threads = n_threads;
    o.cpu_mask = mask;
    return er_model_open(path, &o, m);
}

/* Greedy tokens after a fixed prompt; decode tokens/s through *tps. */
static int generate(er_model *m, int32_t *out, double *tps) {
    er_session *s = NULL;
    int rc = er_session_new(m, &s);
    if (rc) return rc;
    int32_t prompt[5] = {1, 5, 9, 4, 11};
    rc = er_decode(s, prompt, 5, NULL);
    double t0 = now_s();
    for (int i = 0; !rc && i < N_GEN; i++) {
        rc = er_sample(s, NULL, &out[i]);
        if (!rc) rc = er_decode(s, &out[i], 1, NULL);
    }
    if (tps) *tps = N_GEN / (now_s() - t0);
    er_session_free(s);
    return rc;
}

static int affinity_is(er_model *m, const cpu_set_t *want) {
    for (int i = 0; i < m->pool.n_started; i++) {
        cpu_set_t got;
        if (pthread_getaffinity_np(m->pool.workers[i].tid, sizeof got, &got) != 0) return 0;
        if (!CPU_EQUAL(&got, want)) return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        printf("usage: test_pool_pin MODEL.gguf\n");
        return 2;
    }
    const char *path = argv[1];
    int32_t want[N_GEN], got[N_GEN];
    er_model *m = NULL;
    CHECK(open_model(path, 1, 0, &m) == ER_OK, "open: %s", er_last_error());
    if (!m) return test_summary();
    CHECK(generate(m, want, NULL) == ER_OK, "reference run: %s", er_last_error());
    er_model_close(m);

    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    uint64_t all = 0;
    int first = -1;
    for (int c = 0; c < 64; c++)
        if (CPU_ISSET(c, &allowed)) {
            all |= 1ull << c;
            if (first < 0) first = c;
        }
    cpu_set_t all_set, one_set;
    CPU_ZERO(&all_set);
    CPU_ZERO(&one_set);
    for (int c = 0; c < 64; c++)
        if (all >> c & 1) CPU_SET(c, &all_set);
    CPU_SET(first, &one_set);

    /* the whole allowed set, then one CPU */
    const uint64_t masks[2] = {all, 1ull << first};
    const cpu_set_t *sets[2] = {&all_set, &one_set};
    for (int k = 0; k < 2; k++) {
        m = NULL;
        int rc = open_model(path, 3, masks[k], &m);
        CHECK(rc == ER_OK, "open with cpu_mask 0x%llx: %s", (unsigned long long)masks[k], er_last_error());
        if (!m) continue;
        CHECK(m->pool.n_started == 2, "2 workers started, got %d", m->pool.n_started);
        CHECK(affinity_is(m, sets[k]), "workers' affinity is not cpu_mask 0x%llx", (unsigned long long)masks[k]);
        memset(got, 0, sizeof got);
        CHECK(generate(m, got, NULL) == ER_OK && memcmp(got, want, sizeof got) == 0,
              "pinned (0x%llx) tokens differ from the unpinned run", (unsigned long long)masks[k]);
        er_model_close(m);
    }

    /* a CPU we may not use (or that does not exist) */
    int absent = -1;
    for (int c = 63; c >= 0 && absent < 0; c--)
        if (!CPU_ISSET(c, &allowed)) absent = c;
    if (absent >= 0) {
        m = NULL;
        int rc = open_model(path, 2, 1ull << absent, &m);
        CHECK(rc == ER_EINVAL && m == NULL, "cpu_mask of absent CPU %d: got %s", absent, er_status_name(rc));
        CHECK(strstr(er_last_error(), "cpu_mask") != NULL, "message names the mask: %s", er_last_error());
        CHECK(open_model(path, 2, 0, &m) == ER_OK, "open after a refused mask: %s", er_last_error());
        if (m) er_model_close(m);
    }

    /* oversubscription: tokens equal; speed printed */
    double tps[3] = {0, 0, 0};
    const int nt[3] = {1, 2, 8};
    for (int k = 0; k < 3; k++) {
        m = NULL;
        CHECK(open_model(path, nt[k], 0, &m) == ER_OK, "open %d threads: %s", nt[k], er_last_error());
        if (!m) continue;
        double best = 0;
        for (int r = 0; r < 5; r++) {
            double t;
            memset(got, 0, sizeof got);
            CHECK(generate(m, got, &t) == ER_OK && memcmp(got, want, sizeof got) == 0,
                  "%d threads: tokens differ from 1 thread", nt[k]);
            if (t > best) best = t;
        }
        tps[k] = best;
        er_model_close(m);
    }
    double load[3] = {0, 0, 0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(f);
    }
    printf("decode tok/s (embedded model, best of 5): 1 thread %.0f, 2 threads %.0f, 8 threads %.0f "
           "(%d CPUs, load average %.2f)\n", tps[0], tps[1], tps[2], CPU_COUNT(&allowed), load[0]);
    return test_summary();
}
