/*
 * trace.h — the op-trace ring buffer (internal; public calls in edgerun.h).
 *
 * The ring lives in the arena's "trace" section, sized by er_options.
 * trace_events at open, so recording never allocates. Any pool thread may
 * record: a slot is claimed with one atomic increment, which keeps each
 * thread's events in its program order (the export relies on that for
 * monotonic per-thread timestamps).
 *
 * Cost when off: er_trace_begin is a relaxed load and one branch, and
 * er_trace_end a branch on the 0 it returned. Keep it that way: anything
 * heavier here is paid ~15 times per layer per step.
 */
#ifndef ER_TRACE_H
#define ER_TRACE_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "edgerun.h"

typedef struct er_trace {
    er_trace_event *ring;       /* cap events in the arena, NULL when cap == 0 */
    uint32_t cap;
    atomic_int on;
    _Atomic uint64_t next;      /* events ever recorded since the last reset */
    uint64_t t0_ns;             /* clock at open: event times are relative to it */
} er_trace;

/* Monotonic clock in ns; never 0 in practice (it counts from boot). */
static inline uint64_t er_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Arena bytes the ring of `events` needs. */
size_t er_trace_plan(uint32_t events);

/* Sets up the ring over `mem` (cap events) and starts recording when cap > 0. */
void er_trace_init(er_trace *t, er_trace_event *mem, uint32_t cap);

/* Appends one event (called only when er_trace_begin returned nonzero). */
void er_trace_push(er_trace *t, uint64_t t_start, int op, int layer, int thread, int s0, int s1, int s2);

/* Start time of an operation when recording, else 0. */
static inline uint64_t er_trace_begin(er_trace *t) {
    return atomic_load_explicit(&t->on, memory_order_relaxed) ? er_now_ns() : 0;
}

static inline void er_trace_end(er_trace *t, uint64_t t_start, int op, int layer, int thread, int s0, int s1,
                                int s2) {
    if (t_start) er_trace_push(t, t_start, op, layer, thread, s0, s1, s2);
}

#endif
