/*
 * repack_kx4_neon.h — what the K-quant kernels on the 4-row interleaved
 * layouts (repack_q4_k_q5_k_neon.c, repack_q6_k_neon.c) share: the loops
 * over row chunks, activation tiles and row groups, the per-tile-height
 * dispatch, and the sub-block-scale times activation-sum step (Q4_K/Q5_K's
 * mins, Q6_K's offset of 32). Include only from NEON kernel files.
 */
#ifndef ER_KERNELS_REPACK_KX4_NEON_H
#define ER_KERNELS_REPACK_KX4_NEON_H

#include <arm_neon.h>

#include "../kernels.h"

#define ER_KX4_MT 4 /* activation rows per tile */

/* sum over the 8 sub-blocks k of s01..s67's int16 [sub-block][row] halves
 * times lane k of bs, added to s (lane r = weight row r). |s_k| <= 128 and
 * |bs_k| <= 32 * 127, so each product and the sum fit int32. */
static inline __attribute__((always_inline)) int32x4_t er_neon_kx4_lanes8(int32x4_t s, int16x8_t s01, int16x8_t s23,
                                                                         int16x8_t s45, int16x8_t s67, int16x8_t bs) {
    s = vmlal_laneq_s16(s, vget_low_s16(s01), bs, 0);
    s = vmlal_laneq_s16(s, vget_high_s16(s01), bs, 1);
    s = vmlal_laneq_s16(s, vget_low_s16(s23), bs, 2);
    s = vmlal_laneq_s16(s, vget_high_s16(s23), bs, 3);
    s = vmlal_laneq_s16(s, vget_low_s16(s45), bs, 4);
    s = vmlal_laneq_s16(s, vget_high_s16(s45), bs, 5);
    s = vmlal_laneq_s16(s, vget_low_s16(s67), bs, 6);
    return vmlal_laneq_s16(s, vget_high_s16(s67), bs, 7);
}

/* kquant.h's er_kq_accum on 4 lanes, statement for statement: separate
 * IEEE mul/sub/add give a lane the scalar's bits (-std=c11: GCC does not
 * contract statements into FMA), which is what keeps the kernels
 * bit-identical to generic. Q6_K passes dmin 0 and imin 0, as generic does. */
static inline __attribute__((always_inline)) float32x4_t er_neon_kx4_accum(float32x4_t sum, float32x4_t dw,
                                                                          float32x4_t dmw, float dx, int32x4_t isum,
                                                                          int32x4_t imin) {
    const float32x4_t dd = vmulq_n_f32(dw, dx);
    const float32x4_t dm = vmulq_n_f32(dmw, dx);
    const float32x4_t a = vmulq_f32(dd, vcvtq_f32_s32(isum));
    const float32x4_t b = vmulq_f32(dm, vcvtq_f32_s32(imin));
    return vaddq_f32(sum, vsubq_f32(a, b));
}

/* One group of 4 weight rows (wg: its first record) against mt activation
 * rows xs bytes apart, over nb super-blocks; writes the mt x 4 outputs at
 * y, rows ys floats apart. */
typedef void (*er_neon_kx4_tile)(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y,
                                 size_t ys);

/* Defines static tile function `name` of type er_neon_kx4_tile over the
 * kernel's always-inline group_tile(wg, nb, x, xs, mt, acc): one inlined
 * copy per tile height, so each keeps its accumulators in registers (a
 * variable mt would leave them in a stack array). */
#define ER_NEON_KX4_TILE(name, group_tile)                                                                         \
    static void name(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {     \
        float32x4_t acc[ER_KX4_MT];                                                                                \
        for (int j = 0; j < ER_KX4_MT; j++) acc[j] = vdupq_n_f32(0.0f);                                            \
        switch (mt) {                                                                                              \
        case 1: group_tile(wg, nb, x, xs, 1, acc); break;                                                          \
        case 2: group_tile(wg, nb, x, xs, 2, acc); break;                                                          \
        case 3: group_tile(wg, nb, x, xs, 3, acc); break;                                                          \
        default: group_tile(wg, nb, x, xs, 4, acc); break;                                                         \
        }                                                                                                          \
        for (int j = 0; j < mt; j++) vst1q_f32(y + (size_t)j * ys, acc[j]);                                        \
    }

/* a->w: the repacked matrix of rec_bytes records (one per super-block and
 * row group); rows [r0, r1) with r0 and r1 - r0 multiples of 4 (forward.c
 * cuts repacked matrices only between row groups); outputs outside them
 * untouched. Rows go in passes of about 64 KiB of weights, read from memory
 * once and from L2 for every further tile of activation rows. The tile is
 * called through a pointer once per row group and tile, a whole row's
 * worth of work, so the indirect call costs nothing measurable. */
static inline void er_neon_kx4_matmul(const er_matmul_args *a, size_t rec_bytes, er_neon_kx4_tile tile) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * rec_bytes;
    const int chunk = 4 * (group_bytes < 65536 ? (int)(65536 / group_bytes) : 1);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += ER_KX4_MT) {
            const int mt = a->m - j0 < ER_KX4_MT ? a->m - j0 : ER_KX4_MT;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += 4)
                tile((const unsigned char *)a->w + (size_t)(r / 4) * group_bytes, nb, xj, a->x_stride, mt,
                     a->y + (size_t)j0 * a->y_stride + (size_t)r, a->y_stride);
        }
    }
}

#endif
