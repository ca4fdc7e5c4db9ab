/*
 * attention_paths.h — which path the SIMD tables' attention_multi takes for
 * a call (internal; attention_avx2.c, attention_neon.c). All three give
 * each query the one-query kernel's result bit for bit; they differ in how
 * often a K/V row is converted from the cache's type.
 *
 *   ER_ATT_COPY  8 or more queries (prefill tokens, a large group such as
 *                TinyLlama's 8 heads): each block of ER_ATT_BLOCK rows
 *                converted once into floats, every query run over the copy.
 *   ER_ATT_FEW   2-7 queries at one position (a decode step's group of
 *                query heads): up to 3 at a time in registers, each K and V
 *                vector converted once for them.
 *   ER_ATT_ONE   anything else: the one-query kernel per query.
 *
 * Why 8: the copy costs a load, a conversion and a store per element, which
 * only many queries repay. On the AVX2 table (Zen 4), 3 queries per K/V head
 * over 1,600 cold positions ran at 0.7x the one-query kernel, 16 queries
 * at 1.4x; warm, the copy broke even at about 4. FEW took 110M with 4 K/V
 * heads at 1,600 positions from 192 to 233 decode tok/s (1 thread).
 */
#ifndef ER_KERNELS_ATTENTION_PATHS_H
#define ER_KERNELS_ATTENTION_PATHS_H

enum { ER_ATT_ONE, ER_ATT_FEW, ER_ATT_COPY };

#define ER_ATT_COPY_MIN 8

/* lanes: the table's float vector width; its blocked kernels need head_dim
 * a multiple of it */
static inline int er_att_path(const int *n_kv, int nq, int head_dim, int lanes) {
    if (head_dim <= 0 || head_dim % lanes) return ER_ATT_ONE;
    if (nq >= ER_ATT_COPY_MIN) return ER_ATT_COPY;
    if (nq < 2) return ER_ATT_ONE;
    for (int i = 1; i < nq; i++)
        if (n_kv[i] != n_kv[0]) return ER_ATT_ONE;
    return ER_ATT_FEW;
}

#endif
