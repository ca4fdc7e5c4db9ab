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

typedef struct cli_timings {
    double *step_us;      /* one entry per single-token forward pass */
    size_t cap, n;
    size_t n_prompt;
    double prefill_us;    /* the batched forward pass over the prompt */
    double ttft_us;       /* prefill + choosing the first token */
} cli_timings;

/* Room for cap decode steps (the context length bounds them). Returns 0, or 1
 * after printing an error. */
int cli_timings_init(cli_timings *t, size_t cap);

/* Records one step; steps past cap are counted in n but not stored, so a
 * wrong cap shows up as a mismatch in the file instead of a buffer overrun. */
void cli_timings_step(cli_timings *t, double us);

/* Writes the file (format in cli_timings.c). Returns 0, or 1 after printing
 * an error naming the path. */
int cli_timings_write(const cli_timings *t, const char *path);

void cli_timings_free(cli_timings *t);

#endif
