/*
 * repack_sve.h — the "sve" table's interleaved layouts and what their
 * kernels share (internal; include only from SVE kernel files).
 *
 * Layouts: the Arm ones (neon/repack_neon.h) with G = svcntw() rows per
 * group instead of 4 — one row per 32-bit lane of a vector, so G = 4 at 128
 * bits (the NEON tables' very bytes), 8 at 256 (Graviton3), 16 at 512
 * (A64FX), 64 at 2048. Written at open by er_arm_repack_* with the machine's
 * G: a layout that depends on the vector length is safe because the copy
 * lives only in this process's arena (nothing stores it) and the plan asks
 * the same table for repack_rows before it is written. A matrix whose row
 * count G does not divide keeps the file layout (repack.c), which the
 * row-wise kernels in q_sve.c handle.
 *
 * Why: one load gives 4 consecutive bytes of every row in the group, row r
 * in lane r; SDOT by element works within each 128-bit segment and LD1RQ
 * puts the activation's 16 bytes in every segment, so lane l of them meets
 * all G rows and the sums come out in lanes with no horizontal reduction,
 * one float tail serving G rows. The row-wise kernels reduce every row and
 * block (Q8_0/Q4_0) or super-block (K-quants) across the vector and run the
 * tail per row; at 512 bits and more their 32-byte blocks also leave half
 * of each vector predicated off, which G rows per vector never do.
 *
 * Vector values cannot live in arrays or structs (SVE types are sizeless),
 * so a tile keeps one variable per activation row and ER_SVE_COLS expands
 * the per-row step for the tile's mt rows.
 */
#ifndef ER_KERNELS_REPACK_SVE_H
#define ER_KERNELS_REPACK_SVE_H

#include <arm_sve.h>
#include <string.h>

#include "../kernels.h"

#define ER_SVE_INLINE inline __attribute__((always_inline))
#define ER_SVE_MT 4 /* activation rows per tile (the 32-element types) */
/* The K-quants' tiles: with 4 rows their per-row sums, decoded quants and
 * accumulators outgrow the 32 vector registers, and the spills made a tile
 * of 4 execute more instructions than 4 single rows (docs/PERFORMANCE.md). */
#define ER_SVE_KQ_MT 2

/* the tile's step X(j) for activation rows j < mt (a constant once the
 * tile is inlined for one height, so the rest folds away) */
#define ER_SVE_COLS(mt, X)                                                                                         \
    do {                                                                                                           \
        X(0);                                                                                                      \
        if ((mt) > 1) { X(1); }                                                                                    \
        if ((mt) > 2) { X(2); }                                                                                    \
        if ((mt) > 3) { X(3); }                                                                                    \
    } while (0)

/* s += four SDOT by element: w0..w3 meet 32-bit lanes 0..3 of every
 * 128-bit segment of x (the lane index must be a literal) */
#define ER_SVE_DOT4(s, w0, w1, w2, w3, x)                                                                          \
    svdot_lane_s32(svdot_lane_s32(svdot_lane_s32(svdot_lane_s32((s), (w0), (x), 0), (w1), (x), 1), (w2), (x), 2), \
                   (w3), (x), 3)

static ER_SVE_INLINE float er_sve_h2f(er_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

/* 16 activation bytes in every 128-bit segment */
static ER_SVE_INLINE svint8_t er_sve_x16(const int8_t *p) { return svld1rq_s8(svptrue_b8(), p); }

/* the G rows' f16 scales (d[0..G)) as float lanes: FCVT reads the low half
 * of each 32-bit container, where LD1H zero-extended them */
static ER_SVE_INLINE svfloat32_t er_sve_load_d(const er_f16 *d) {
    const svbool_t all = svptrue_b32();
    return svcvt_f32_f16_x(all, svreinterpret_f16_u32(svld1uh_u32(all, d)));
}

/* kquant.h's er_kq_accum lane by lane, statement for statement (separate
 * IEEE operations; -std=c11 keeps GCC from contracting them): the lane's
 * bits equal the scalar tail's, which keeps the K-quant kernels
 * bit-identical to generic. */
static ER_SVE_INLINE svfloat32_t er_sve_kq_accum(svfloat32_t sum, svfloat32_t dw, svfloat32_t dmw, float dx,
                                                 svint32_t isum, svint32_t imin) {
    const svbool_t all = svptrue_b32();
    const svfloat32_t dd = svmul_n_f32_x(all, dw, dx);
    const svfloat32_t dm = svmul_n_f32_x(all, dmw, dx);
    const svfloat32_t a = svmul_f32_x(all, dd, svcvt_f32_s32_x(all, isum));
    const svfloat32_t b = svmul_f32_x(all, dm, svcvt_f32_s32_x(all, imin));
    return svadd_f32_x(all, sum, svsub_f32_x(all, a, b));
}

/* One group of G weight rows (wg: its first record) against mt activation
 * rows xs bytes apart over nb blocks; writes the mt x G outputs at y, rows
 * ys floats apart. */
typedef void (*er_sve_tile)(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys);

/* Defines static tile function `name` over the kernel's always-inline
 * group_tile(wg, nb, x, xs, mt, y, ys): one inlined copy per tile height,
 * so each keeps its accumulators in registers. */
#define ER_SVE_TILE(name, group_tile)                                                                              \
    static void name(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {     \
        switch (mt) {                                                                                              \
        case 1: group_tile(wg, nb, x, xs, 1, y, ys); break;                                                        \
        case 2: group_tile(wg, nb, x, xs, 2, y, ys); break;                                                        \
        case 3: group_tile(wg, nb, x, xs, 3, y, ys); break;                                                        \
        default: group_tile(wg, nb, x, xs, 4, y, ys); break;                                                       \
        }                                                                                                          \
    }

/* xb0..xb3: block i of the tile's activation rows (type T, rows xs bytes
 * apart from x); those past mt alias row 0 and are never read. */
#define ER_SVE_XBLOCKS(T, x, xs, mt, i)                                                                            \
    const T *xb0 = (const T *)(const void *)(x) + (i);                                                             \
    const T *xb1 = (mt) > 1 ? (const T *)(const void *)((x) + (xs)) + (i) : xb0;                                   \
    const T *xb2 = (mt) > 2 ? (const T *)(const void *)((x) + 2 * (xs)) + (i) : xb0;                               \
    const T *xb3 = (mt) > 3 ? (const T *)(const void *)((x) + 3 * (xs)) + (i) : xb0

/* Stores tile row j's G outputs. */
#define ER_SVE_STORE(j) svst1_f32(svptrue_b32(), y + (size_t)(j) * ys, acc##j)

/* a->w: the repacked matrix, records of rec_bytes (one per block and row
 * group), nb blocks per row; rows [r0, r1) with r0 and r1 - r0 multiples of
 * G (forward.c cuts repacked matrices only between row groups); outputs
 * outside them untouched. Rows go in passes of about 64 KiB of weights, read
 * from memory once and from L2 for every further tile of up to mt_max
 * activation rows: the blocked matmul of prefill; decode is the m = 1 case
 * of the same loop. */
static inline void er_sve_rows_matmul(const er_matmul_args *a, int nb, size_t rec_bytes, er_sve_tile tile,
                                      const int mt_max) {
    const int G = (int)svcntw();
    const size_t group_bytes = (size_t)nb * rec_bytes;
    const int chunk = G * (group_bytes < 65536 ? (int)(65536 / group_bytes) : 1);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += mt_max) {
            const int mt = a->m - j0 < mt_max ? a->m - j0 : mt_max;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += G)
                tile((const unsigned char *)a->w + (size_t)(r / G) * group_bytes, nb, xj, a->x_stride, mt,
                     a->y + (size_t)j0 * a->y_stride + (size_t)r, a->y_stride);
        }
    }
}

#endif
