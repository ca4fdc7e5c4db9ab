/*
 * arena.h — bump allocation inside the model's one arena (internal).
 *
 * The arena is cut into sections at open from the plan; each section is an
 * er_arena of its own, so a section that outgrows its plan fails loudly
 * (returns NULL) instead of eating a neighbour. Sizes are computed up front
 * by each part's *_plan function; tests check used <= planned.
 */
#ifndef ER_ARENA_H
#define ER_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define ER_ARENA_ALIGN 64   /* cache line; also enough for any SIMD load we use */

typedef struct er_arena {
    uint8_t *base;
    size_t size;
    size_t off;             /* next free byte */
    size_t high;            /* high-water mark (for er_section.used) */
} er_arena;

/* Rounds up to ER_ARENA_ALIGN. */
static inline size_t er_align_up(size_t n) {
    return (n + (ER_ARENA_ALIGN - 1)) & ~(size_t)(ER_ARENA_ALIGN - 1);
}

void er_arena_init(er_arena *a, void *base, size_t size);

/* ER_ARENA_ALIGN-aligned block of `bytes`, or NULL when the section is full. */
void *er_arena_alloc(er_arena *a, size_t bytes);

/* Asks the OS for transparent huge pages on the 2 MiB-aligned interior of
 * section a, before its first write (arena.c says when it pays); nothing
 * for a section under 2 MiB. Advice only: with THP "never", or no
 * MADV_HUGEPAGE, nothing changes. Call only
 * on memory open allocated: a caller's buffer is the caller's to advise. */
void er_arena_advise_huge(const er_arena *a);

/* Makes every page of section a resident and writable now, keeping its
 * bytes (each page's first byte is written back as it is): call before the
 * pool's threads start, while nothing else can write the section. */
void er_arena_fault_in(const er_arena *a);

/* Scratch discipline: remember a position and roll back to it. */
static inline size_t er_arena_mark(const er_arena *a) { return a->off; }
void er_arena_reset(er_arena *a, size_t mark);

#endif
