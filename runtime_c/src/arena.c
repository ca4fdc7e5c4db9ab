/* arena.c — bump allocator; the only memory the runtime uses after open. */
#include "arena.h"

#include <sys/mman.h>

void er_arena_init(er_arena *a, void *base, size_t size) {
    a->base = (uint8_t *)base;
    a->size = size;
    a->off = 0;
    a->high = 0;
}

void *er_arena_alloc(er_arena *a, size_t bytes) {
    size_t need = er_align_up(bytes);
    /* Written as a subtraction so a huge request cannot wrap the sum. */
    if (need < bytes || need > a->size - a->off) return NULL;
    void *p = a->base + a->off;
    a->off += need;
    if (a->off > a->high) a->high = a->off;
    return p;
}

void er_arena_reset(er_arena *a, size_t mark) {
    if (mark <= a->off) a->off = mark;
}

/* Sections read in full every token (the repacked weights; the K/V cache,
 * every cached position of every layer) walk one page-table entry per 4 KiB
 * with small pages, and the hardware prefetchers stop at each page: see
 * repack.c and model.c for what 2 MiB pages measured. */
void er_arena_advise_huge(const er_arena *a) {
#if defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)a->base + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)a->base + a->size) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)a;
#endif
}

/* 4 KiB: the smallest page of our targets; on larger pages the extra writes
 * land in pages already resident. */
void er_arena_fault_in(const er_arena *a) {
    volatile uint8_t *p = a->base;
    for (size_t off = 0; off < a->size; off += 4096) p[off] = p[off];
    if (a->size) p[a->size - 1] = p[a->size - 1];
}
