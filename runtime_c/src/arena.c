/* arena.c — bump allocator; the only memory the runtime uses after open. */
#include "arena.h"

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
