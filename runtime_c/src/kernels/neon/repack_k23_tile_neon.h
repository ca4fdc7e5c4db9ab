/*
 * repack_k23_tile_neon.h — the tile function of the Q2_K, Q3_K and IQ4_XS
 * kernels on the 4-row layouts (repack_q2_k_q3_k_neon.c,
 * repack_iq4_xs_neon.c): ER_NEON_KX4_TILE's job (repack_kx4_neon.h) with a
 * tile height of its own. Include only from NEON kernel files.
 *
 * Why a height per kernel: ER_NEON_KX4_TILE inlines the kernel for every
 * height 1..4, and where a tile of 4 activation rows does not pay (the
 * sums, scales and quants of 4 rows outgrow the registers and the spills
 * cost more than unpacking again, as in the widening twins, which keep two
 * registers per row's sums) the rows go in sub-tiles of at most `step`
 * rows: one inlined copy per height up to step, a fifth of the code of
 * four copies at step 1 (the stripped rpi5 CLI has a 1 MB budget).
 */
#ifndef ER_KERNELS_REPACK_K23_TILE_NEON_H
#define ER_KERNELS_REPACK_K23_TILE_NEON_H

#include "repack_kx4_neon.h"

/* Defines static er_neon_kx4_tile `name` over the kernel's always-inline
 * group_tile(wg, nb, x, xs, mt, acc) (acc: mt float32x4_t), for step 1..4. */
#define ER_NEON_K23_TILE(name, group_tile, step)                                                                   \
    static void name(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {     \
        for (int j0 = 0; j0 < mt; j0 += (step)) {                                                                  \
            const int m = mt - j0 < (step) ? mt - j0 : (step);                                                     \
            const unsigned char *xj = x + (size_t)j0 * xs;                                                         \
            float32x4_t acc[ER_KX4_MT];                                                                            \
            for (int j = 0; j < ER_KX4_MT; j++) acc[j] = vdupq_n_f32(0.0f);                                        \
            if ((step) == 1 || m == 1) group_tile(wg, nb, xj, xs, 1, acc);                                         \
            else if ((step) == 2 || m == 2) group_tile(wg, nb, xj, xs, 2, acc);                                    \
            else if ((step) == 3 || m == 3) group_tile(wg, nb, xj, xs, 3, acc);                                    \
            else group_tile(wg, nb, xj, xs, 4, acc);                                                               \
            for (int j = 0; j < m; j++) vst1q_f32(y + (size_t)(j0 + j) * ys, acc[j]);                              \
        }                                                                                                          \
    }

#endif
