/*
 * corelat.c — edgerun-corelat: how long a cache line takes to go from one
 * CPU to another and back, for the first two CPUs this process may run on.
 *
 *   edgerun-corelat [round trips]        default: 200000
 *
 * Two threads, each pinned to one of the CPUs, hand a counter back and forth
 * through one cache line, for the round trips given or one second, whichever
 * ends first (on a loaded machine each hand-over can wait for a time slice);
 * the figure is wall time over round trips done, printed as one JSON line:
 *   {"cpus": [0, 1], "pinned": true, "round_trips": 200000, "round_trip_ns": 62.1}
 * Why `edgerun bench` runs it: what the threads of a step share costs this
 * much at every hand-over (a dispatch, a claim, an activation row written by
 * one thread and read by another). Cores that share a last-level cache answer
 * in tens of nanoseconds, cores that do not (another CCD or cluster) in
 * hundreds; a cloud VM's two vCPUs can be moved between the two cases from
 * one minute to the next, and the memory bandwidth the bench measures moves
 * with them. Exit status 2 with one line on stderr when fewer than two CPUs
 * are available, a thread cannot start, or the second CPU does not answer.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* sched_getaffinity, pthread_setaffinity_np */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct pingpong {
    _Alignas(64) atomic_long turn; /* odd: the answerer's move, even: the starter's; -1: stop */
    int cpu;
    int pinned;
} pingpong;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* pins the calling thread to cpu; 0 where that is not possible here */
static int pin_self(int cpu) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
#else
    (void)cpu;
    return 0;
#endif
}

static void *answerer(void *arg) {
    pingpong *p = arg;
    p->pinned &= pin_self(p->cpu);
    for (long v;;) {
        while ((v = atomic_load_explicit(&p->turn, memory_order_acquire)) >= 0 && !(v & 1)) {
        }
        if (v < 0) return NULL;
        atomic_store_explicit(&p->turn, v + 1, memory_order_release);
    }
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    if (rounds < 1000 || rounds > 100000000) {
        fprintf(stderr, "usage: edgerun-corelat [round trips 1000..100000000]\n");
        return 2;
    }
    int cpus[2] = {-1, -1}, n = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &set)) cpus[n++] = c;
#endif
    if (n < 2) {
        fprintf(stderr, "edgerun-corelat: needs two CPUs; this process may run on %d\n", n);
        return 2;
    }
    static pingpong p;
    atomic_init(&p.turn, 0);
    p.cpu = cpus[1];
    p.pinned = pin_self(cpus[0]);
    pthread_t t;
    if (pthread_create(&t, NULL, answerer, &p) != 0) {
        fprintf(stderr, "edgerun-corelat: cannot start the second thread\n");
        return 2;
    }
    const double t0 = now_s();
    long done = 0;
    while (done < rounds) {
        atomic_store_explicit(&p.turn, 2 * done + 1, memory_order_release);
        /* a second CPU that never answers (taken by higher-priority work)
         * must not hang the caller: give up after 2 s in one hand-over */
        for (long spins = 1; atomic_load_explicit(&p.turn, memory_order_acquire) != 2 * done + 2; spins++)
            if (spins % (1L << 20) == 0 && now_s() - t0 > 2.0) {
                fprintf(stderr, "edgerun-corelat: CPU %d did not answer within 2 s\n", cpus[1]);
                return 2;
            }
        done++;
        if (done % 1024 == 0 && now_s() - t0 > 1.0) break;
    }
    const double t1 = now_s();
    atomic_store_explicit(&p.turn, -1, memory_order_release);
    pthread_join(t, NULL);
    printf("{\"cpus\": [%d, %d], \"pinned\": %s, \"round_trips\": %ld, \"round_trip_ns\": %.1f}\n", cpus[0],
           cpus[1], p.pinned ? "true" : "false", done, (t1 - t0) * 1e9 / (double)done);
    return 0;
}
