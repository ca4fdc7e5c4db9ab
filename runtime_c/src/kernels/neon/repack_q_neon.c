/*
 * repack_q_neon.c — the 32-element types' matmuls on the 4-row interleaved
 * layouts (repack_neon.h): Q8_0, Q4_0 and the issue-25 fallbacks IQ4_NL,
 * Q4_1, Q5_0, Q5_1, decode (m = 1) and prefill. Compiled twice like
 * q_neon.c: SDOT by element with ER_NEON_DOTPROD=1 (er_neondp_*), widening
 * multiplies with 0 (er_neon_*).
 *
 * Why it pays (counted per block of 32 and 4 weight rows, SDOT twin): the
 * row-wise kernel (q_neon.c) spends per row 2 activation loads, 2 SDOT, an
 * int->float convert, the scale product and an FMA, plus a horizontal sum
 * per row at the end; here 8 SDOT serve all 4 rows, and one convert, one
 * scale multiply and one FMA cover 4 rows. Q4_0 keeps the nibbles unsigned
 * (AND / shift only) and takes 8 * sum(x) off once per block. Prefill tiles
 * of up to 4 activation rows load and unpack each weight block once.
 * Speed on real Arm cores is unmeasured (developed under qemu).
 *
 * The issue-25 types unpack once per record for the tile (fifth bits by
 * one shift and mask, IQ4_NL's grid by TBL); Q5_0 and Q4_0 keep their
 * quants unsigned and take off 16 or 8 times Σx per block.
 *
 * Arithmetic: each block's int32 dot per row is exact (as generic's).
 * Q8_0/Q4_0 FMA-accumulate it with d_w * d_x in block order per lane:
 * generic's integers, another float rounding (FMA), the tolerance of the
 * row-wise kernels. The issue-25 types run generic's float tail lane by
 * lane, statement for statement (separate multiplies and adds; -std=c11
 * keeps GCC from contracting them), so they return generic's bits.
 */
#include "neon.h"
#include "repack_neon.h"
#include "repack_load_neon.h"
#include "dotlane_neon.h"

#if ER_NEON_DOTPROD
#define FN(name) er_neondp_##name
#else
#define FN(name) er_neon_##name
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

#define KB 256 /* activation blocks per stack slice (8192 elements) */
#define MT 4   /* activation rows per tile */

typedef struct {
    float d;
    int32_t off; /* er_x4_off(t) * sum of the block's quants */
    int32_t sum; /* the sum itself (the min term's) */
} act_blk;

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, act_blk a[MT][KB],
                               const int t) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            a[j][b - b0].d = er_neon_h2f(xb[b].d);
            if (er_x4_off(t) || er_x4_has_m(t)) {
                const int32_t sum = (int32_t)vaddlvq_s8(vld1q_s8(xb[b].qs)) + vaddlvq_s8(vld1q_s8(xb[b].qs + 16));
                a[j][b - b0].off = er_x4_off(t) * sum;
                a[j][b - b0].sum = sum;
            }
        }
    }
}

/* One group of 4 weight rows against mt (1..4) activation rows over blocks
 * [b0, b1): acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const void *wg, const unsigned char *x, size_t xs, const int mt, int b0, int b1,
                                     act_blk a[MT][KB], float32x4_t acc[MT], const int t) {
    for (int b = b0; b < b1; b++) {
        int8x16_t w[8];
        float32x4_t mw = vdupq_n_f32(0.0f);
        const float32x4_t dw = er_neon_load_x4(wg, b, w, t, &mw);
        for (int j = 0; j < mt; j++) {
            const act_blk *ab = &a[j][b - b0];
            const int8_t *xq = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
            /* w[0..3] are elements 0..15 (Q8_0) or the low nibbles (the
             * rest), w[4..7] elements 16..31 or the high nibbles */
            const er_dacc s0 = ER_DOT4(er_dacc_zero(), w[0], w[1], w[2], w[3], x0);
            const er_dacc s1 = ER_DOT4(er_dacc_zero(), w[4], w[5], w[6], w[7], x1);
            int32x4_t isum = vaddq_s32(er_dacc_rows(s0), er_dacc_rows(s1));
            if (er_x4_off(t)) isum = vsubq_s32(isum, vdupq_n_s32(ab->off));
            if (!er_x4_exact(t)) {
                acc[j] = vfmaq_f32(acc[j], vcvtq_f32_s32(isum), vmulq_n_f32(dw, ab->d));
                continue;
            }
            /* generic's tail (dot_q4_1_q5.c, dot_iq4.c), one IEEE operation
             * per statement there and here: sum + isum (d_w d_x), or
             * sum + (isum (d_w d_x) + Σx (m_w d_x)) */
            const float32x4_t p = vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dw, ab->d));
            if (er_x4_has_m(t)) {
                const float32x4_t q = vmulq_f32(vdupq_n_f32((float)ab->sum), vmulq_n_f32(mw, ab->d));
                acc[j] = vaddq_f32(acc[j], vaddq_f32(p, q));
            } else {
                acc[j] = vaddq_f32(acc[j], p);
            }
        }
    }
}

/* Rows per pass over the activation tiles: row groups of about 64 KiB of
 * weights, so a prefill reads them from memory once and from L2 for every
 * further tile of activation rows. */
static ALWAYS_INLINE int row_chunk(size_t group_bytes) {
    const int groups = group_bytes < 65536 ? (int)(65536 / group_bytes) : 1;
    return 4 * groups;
}

/* A later stack slice of blocks continues each output from y, so every lane
 * sums its blocks in generic's order. */
static ALWAYS_INLINE void matmul_x4(const er_matmul_args *a, const int t) {
    const int nb = a->n / ER_QK8_0;
    const size_t group_bytes = (size_t)nb * 4 * er_x4_block_bytes(t);
    const int chunk = row_chunk(group_bytes);
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
                prep(xj, a->x_stride, mt, b0, b1, ab, t);
                for (int r = c0; r < c1; r += 4) {
                    const void *wg = (const unsigned char *)a->w + (size_t)(r / 4) * group_bytes;
                    float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                    float32x4_t acc[MT];
                    for (int j = 0; j < MT; j++)
                        acc[j] = b0 && j < mt ? vld1q_f32(y + (size_t)j * a->y_stride) : vdupq_n_f32(0.0f);
                    /* one call per tile height, so each inlined copy keeps
                     * its accumulators in registers */
                    switch (mt) {
                    case 1: group_tile(wg, xj, a->x_stride, 1, b0, b1, ab, acc, t); break;
                    case 2: group_tile(wg, xj, a->x_stride, 2, b0, b1, ab, acc, t); break;
                    case 3: group_tile(wg, xj, a->x_stride, 3, b0, b1, ab, acc, t); break;
                    default: group_tile(wg, xj, a->x_stride, 4, b0, b1, ab, acc, t); break;
                    }
                    for (int j = 0; j < mt; j++) vst1q_f32(y + (size_t)j * a->y_stride, acc[j]);
                }
            }
        }
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 4 (forward.c cuts repacked matrices only between row groups). */
void FN(matmul_q8_0x4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_Q8_0); }
void FN(matmul_q4_0x4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_Q4_0); }
void FN(matmul_iq4_nlx4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_IQ4_NL); }
void FN(matmul_q4_1x4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_Q4_1); }
void FN(matmul_q5_0x4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_Q5_0); }
void FN(matmul_q5_1x4)(const er_matmul_args *a) { matmul_x4(a, ER_X4_Q5_1); }
