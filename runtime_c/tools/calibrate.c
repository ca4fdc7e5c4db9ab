/*
 * calibrate.c — edgerun-calibrate: a fixed reference workload for benchmarks
 * that run under emulation.
 *
 * Under qemu-user the time a board build takes depends on the host running the
 * emulator (its CPU, its load, the qemu version), not on the board. `edgerun
 * bench --board` runs this program under the same qemu and -cpu model in the
 * same job and divides the model's tokens/s by this program's rate, so that a
 * stored baseline stays comparable across hosts. The workload mixes what a
 * decode step does under emulation: float multiply-adds over arrays (the
 * matmuls), a dependent walk through a buffer (indexing) and integer mixing
 * (control). Its size is fixed:
 * changing any constant here invalidates every stored baseline
 * (benchmarks/baselines/), which is why the version is printed.
 *
 * Each round is timed by the thread's CPU time (what the emulator spent on it;
 * time descheduled on a busy host is not the workload's) and by wall time.
 * Output, one line on stdout (mops_per_s from the median CPU time):
 *   calibrate v4 rounds R ops N cpu_best_ms B cpu_median_ms M wall_median_ms W
 *     mops_per_s X wall_mops_per_s Y checksum C
 * The checksum keeps the compiler from discarding the work and lets a reader
 * check that two builds computed the same thing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAL_VERSION 4
/* 64 KiB: the walk stays in the host's caches. Version 3 walked 4 MiB, which
 * timed the host's memory rather than the emulation: on one idle Zen 4 host
 * the walk took 19-55 ms of a 12-round run from one run to the next, while
 * the rest took 149-154 ms. There (and in CI) v3's rate came out 45-60%
 * above the baseline host's while the model ran 11% faster, so the gate
 * failed on unchanged code. The benched model's weights and arena fit in
 * cache too; under emulation its time goes to translated code, not memory. */
#define WALK_WORDS (1u << 14)
#define WALK_STEPS (1u << 16)
#define VEC_LEN 4096u
#define VEC_PASSES 256u
#define MIX_STEPS (1u << 18)

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint32_t xorshift32(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* A single cycle through all words (Sattolo's shuffle), so the walk never
 * falls into a short loop that would stay in cache. */
static void make_cycle(uint32_t *next, uint32_t n)
{
    uint32_t s = 0x9e3779b9u;
    for (uint32_t i = 0; i < n; i++) next[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = xorshift32(&s) % i;
        uint32_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
}

static uint64_t one_round(const uint32_t *next, float *y, const float *x)
{
    uint32_t p = 0;
    for (uint32_t i = 0; i < WALK_STEPS; i++) p = next[p];

    for (uint32_t k = 0; k < VEC_PASSES; k++) {
        float a = 1.0f / (float)(k + 2);
        for (uint32_t i = 0; i < VEC_LEN; i++) y[i] = y[i] * 0.5f + a * x[i];
    }

    uint32_t s = p | 1u, acc = 0;
    for (uint32_t i = 0; i < MIX_STEPS; i++) acc += xorshift32(&s) >> (i & 7u);

    uint32_t fy;
    memcpy(&fy, &y[p % VEC_LEN], sizeof fy);
    return (uint64_t)p ^ acc ^ fy;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long rounds = 5;
    if (argc > 1) {
        char *end = NULL;
        rounds = strtol(argv[1], &end, 10);
        if (!end || *end || rounds < 1 || rounds > 1000) {
            fprintf(stderr, "edgerun-calibrate: usage: edgerun-calibrate [ROUNDS 1..1000]\n");
            return 2;
        }
    }
    uint32_t *next = malloc(WALK_WORDS * sizeof *next);
    float *x = malloc(VEC_LEN * sizeof *x), *y = malloc(VEC_LEN * sizeof *y);
    double *ms = malloc((size_t)rounds * sizeof *ms);
    double *wall = malloc((size_t)rounds * sizeof *wall);
    if (!next || !x || !y || !ms || !wall) {
        fprintf(stderr, "edgerun-calibrate: error: out of memory\n");
        free(next); free(x); free(y); free(ms); free(wall);
        return 1;
    }
    make_cycle(next, WALK_WORDS);
    for (uint32_t i = 0; i < VEC_LEN; i++) { x[i] = (float)(i % 97) / 97.0f; y[i] = 0.0f; }

    uint64_t checksum = one_round(next, y, x);      /* warm-up: page faults, translation */
    for (long r = 0; r < rounds; r++) {
        double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        checksum = checksum * 31u + one_round(next, y, x);
        ms[r] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[r] = clock_ms(CLOCK_MONOTONIC) - w0;
    }
    qsort(ms, (size_t)rounds, sizeof *ms, cmp_double);
    qsort(wall, (size_t)rounds, sizeof *wall, cmp_double);
    const double ops = (double)WALK_STEPS + (double)VEC_PASSES * VEC_LEN + (double)MIX_STEPS;
    double median = ms[rounds / 2], wmedian = wall[rounds / 2];
    printf("calibrate v%d rounds %ld ops %.0f cpu_best_ms %.3f cpu_median_ms %.3f wall_median_ms %.3f "
           "mops_per_s %.3f wall_mops_per_s %.3f checksum %llu\n",
           CAL_VERSION, rounds, ops, ms[0], median, wmedian, median > 0 ? ops / (median * 1e3) : 0.0,
           wmedian > 0 ? ops / (wmedian * 1e3) : 0.0, (unsigned long long)checksum);
    free(next); free(x); free(y); free(ms); free(wall);
    return 0;
}
