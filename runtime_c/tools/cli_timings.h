/*
 * cli_timings.h — per-step latencies for `edgerun-cli run --timings FILE`.
 *
 * The board benchmark (edgerun bench --board) needs each decode step's latency
 * to compute p50/p90/p99; the statistics line only has averages. The buffer is
 * allocated once before the generation loop and the file is written after it,
 * so recording adds no allocation and no I/O to the timed steps.
 */
#ifndef ER_CLI_TIMINGS_H
#define ER_CLI_TIMINGS_H

#include <stddef.h>

/* Wall time is what a user waits; the calling thread's CPU time is what the
 * step cost to compute. Under emulation on a shared host the two differ by
 * the time the emulator was descheduled, which says nothing about the board,
 * so the benchmark gates on CPU time (single-threaded runs) and reports both. */
typedef struct cli_timings {
    double *step_us;      /* wall time of each single-token forward pass */
    double *step_cpu_us;  /* the calling thread's CPU time for the same step */
    size_t cap, n;
    size_t n_prompt;
    double prefill_us;    /* the batched forward pass over the prompt */
    double prefill_cpu_us;
    double ttft_us;       /* prefill + choosing the first token */
} cli_timings;

/* CPU time of the calling thread, in microseconds. */
double cli_thread_cpu_us(void);

/* Room for cap decode steps (the context length bounds them). Returns 0, or 1
 * after printing an error. */
int cli_timings_init(cli_timings *t, size_t cap);

/* Records one step; steps past cap are counted in n but not stored, so a
 * wrong cap shows up as a mismatch in the file instead of a buffer overrun. */
void cli_timings_step(cli_timings *t, double wall_us, double cpu_us);

/* Writes the file (format in cli_timings.c). Returns 0, or 1 after printing
 * an error naming the path. */
int cli_timings_write(const cli_timings *t, const char *path);

void cli_timings_free(cli_timings *t);

#endif
