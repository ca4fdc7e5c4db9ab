/*
 * cli_timings.c — the --timings file of edgerun-cli.
 *
 * Format (text, one record a line, read by pybind/edgerun/board_bench.py):
 *   # edgerun-cli timings v1 (microseconds)
 *   prompt_tokens N
 *   prefill_us X
 *   ttft_us X
 *   prefill_cpu_us X
 *   steps N
 *   step I WALL CPU     one line per decode step, I from 0: wall and thread CPU time
 * Plain text rather than JSON so that the reader needs no parser on a board
 * and a truncated file (a killed run) is still readable up to the cut.
 */
#include "cli_timings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double cli_thread_cpu_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int cli_timings_init(cli_timings *t, size_t cap)
{
    memset(t, 0, sizeof *t);
    t->step_us = malloc((cap ? cap : 1) * sizeof *t->step_us);
    t->step_cpu_us = malloc((cap ? cap : 1) * sizeof *t->step_cpu_us);
    if (!t->step_us || !t->step_cpu_us) {
        cli_timings_free(t);
        fprintf(stderr, "edgerun-cli: error: out of memory for --timings\n");
        return 1;
    }
    t->cap = cap;
    return 0;
}

void cli_timings_step(cli_timings *t, double wall_us, double cpu_us)
{
    if (t->n < t->cap) {
        t->step_us[t->n] = wall_us;
        t->step_cpu_us[t->n] = cpu_us;
    }
    t->n++;
}

int cli_timings_write(const cli_timings *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "edgerun-cli: error: --timings %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t stored = t->n < t->cap ? t->n : t->cap;
    fprintf(f, "# edgerun-cli timings v1 (microseconds)\n");
    fprintf(f, "prompt_tokens %zu\nprefill_us %.3f\nttft_us %.3f\nprefill_cpu_us %.3f\nsteps %zu\n",
            t->n_prompt, t->prefill_us, t->ttft_us, t->prefill_cpu_us, stored);
    for (size_t i = 0; i < stored; i++)
        fprintf(f, "step %zu %.3f %.3f\n", i, t->step_us[i], t->step_cpu_us[i]);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        fprintf(stderr, "edgerun-cli: error: --timings %s: write failed\n", path);
        return 1;
    }
    return 0;
}

void cli_timings_free(cli_timings *t)
{
    free(t->step_us);
    free(t->step_cpu_us);
    t->step_us = t->step_cpu_us = NULL;
    t->cap = t->n = 0;
}
