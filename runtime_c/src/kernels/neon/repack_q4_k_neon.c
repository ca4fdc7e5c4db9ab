/*
 * repack_q4_k_neon.c — Q4_K matmul on the 4-row interleaved layout
 * (repack_neon.h), decode and prefill. Compiled twice like q_neon.c (SDOT
 * by element / widening multiplies).
 *
 * Why it pays (per super-block and 4 weight rows, SDOT twin): the row-wise
 * kernel (q_neon.c) unpacks each row's 6-bit scales with scalar code
 * (er_kq_scale_min, ~30 operations), sums the mins with 8 scalar multiplies,
 * reduces each row horizontally and runs the float tail per row; here a
 * dozen vector operations give the 4 rows' scales and mins, 8
 * vmlal_laneq_s16 the mins of all 4 rows, the 64 SDOT leave the rows in
 * lanes, and one float tail serves 4 rows. Prefill tiles of up to 4
 * activation rows share the scale decode and the nibble unpacking.
 * Speed on real Arm cores is unmeasured (developed under qemu).
 *
 * Arithmetic: per row and super-block isum = sum_j sc_j (q_j . x_j) and
 * imin = sum_j mn_j bs_j are generic's exact int32s, and the float tail is
 * er_kq_accum's statements lane by lane (IEEE mul/sub/add per lane; the
 * library is built with -std=c11, where GCC does not contract separate
 * statements into FMA), over super-blocks in order: bit-identical to
 * generic.
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
#define MT 4 /* activation rows per tile */

/* imin for the 4 rows: mins as int16 [sub-block j][row], activation
 * sub-block sums bs_j = bsums_2j + bsums_2j+1 (|bs_j| <= 32 * 127). */
static ALWAYS_INLINE int32x4_t mins4(int16x8_t m01, int16x8_t m23, int16x8_t m45, int16x8_t m67,
                                     const er_block_q8_k *xb) {
    const int16x8_t bs = vpaddq_s16(vld1q_s16(xb->bsums), vld1q_s16(xb->bsums + 8));
    int32x4_t s = vmull_laneq_s16(vget_low_s16(m01), bs, 0);
    s = vmlal_laneq_s16(s, vget_high_s16(m01), bs, 1);
    s = vmlal_laneq_s16(s, vget_low_s16(m23), bs, 2);
    s = vmlal_laneq_s16(s, vget_high_s16(m23), bs, 3);
    s = vmlal_laneq_s16(s, vget_low_s16(m45), bs, 4);
    s = vmlal_laneq_s16(s, vget_high_s16(m45), bs, 5);
    s = vmlal_laneq_s16(s, vget_low_s16(m67), bs, 6);
    return vmlal_laneq_s16(s, vget_high_s16(m67), bs, 7);
}

/* Sub-block scale j's 4 rows as int32 (bytes [j][row] in sc). */
static ALWAYS_INLINE int32x4_t sc32(uint8x16_t sc, const int j4) {
    const uint16x8_t h = (j4 & 2) ? vmovl_high_u8(sc) : vmovl_u8(vget_low_u8(sc));
    return vreinterpretq_s32_u32((j4 & 1) ? vmovl_high_u16(h) : vmovl_u16(vget_low_u16(h)));
}

/* One group of 4 weight rows against mt (1..4) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const er_blk_q4_kx4 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float32x4_t acc[MT]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    for (int i = 0; i < nb; i++) {
        const er_blk_q4_kx4 *w = wg + i;
        const uint8x16_t l0 = vld1q_u8(w->sl), l1 = vld1q_u8(w->sl + 16), h = vld1q_u8(w->sh);
        /* bytes [j][row]: sc/mn of sub-blocks 0-3 (a) and 4-7 (b) */
        const uint8x16_t sca = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h, 4), m30));
        const uint8x16_t scb = vorrq_u8(vandq_u8(l1, m4), vandq_u8(h, m30));
        const uint8x16_t mna = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(vshlq_n_u8(h, 2), m30));
        const uint8x16_t mnb = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), m30));
        const int16x8_t m01 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mna)));
        const int16x8_t m23 = vreinterpretq_s16_u16(vmovl_high_u8(mna));
        const int16x8_t m45 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mnb)));
        const int16x8_t m67 = vreinterpretq_s16_u16(vmovl_high_u8(mnb));
        const float32x4_t dw = er_neon_load_d4(w->d), dmw = er_neon_load_d4(w->dmin);
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
        /* chunk c holds sub-blocks 2c (low nibbles) and 2c + 1 (high) */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = w->qs + 128 * c;
            const uint8x16_t scv = c < 2 ? sca : scb;
#pragma GCC unroll 2
            for (int hh = 0; hh < 2; hh++) {
                int8x16_t u[8];
                for (int g = 0; g < 8; g++) {
                    const uint8x16_t v = vld1q_u8(q + 16 * g);
                    u[g] = vreinterpretq_s8_u8(hh ? vshrq_n_u8(v, 4) : vandq_u8(v, m4));
                }
                const int32x4_t s = sc32(scv, 2 * (c & 1) + hh);
#pragma GCC unroll 4
                for (int j = 0; j < mt; j++) {
                    const int8_t *xq = xb[j]->qs + 64 * c + 32 * hh;
                    const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
                    const er_dacc d0 = ER_DOT4(er_dacc_zero(), u[0], u[1], u[2], u[3], x0);
                    const er_dacc d1 = ER_DOT4(er_dacc_zero(), u[4], u[5], u[6], u[7], x1);
                    isum[j] = vmlaq_s32(isum[j], vaddq_s32(er_dacc_rows(d0), er_dacc_rows(d1)), s);
                }
            }
        }
        /* er_kq_accum, statement for statement, on 4 lanes */
        for (int j = 0; j < mt; j++) {
            const float dx = xb[j]->d;
            const float32x4_t dd = vmulq_n_f32(dw, dx);
            const float32x4_t dm = vmulq_n_f32(dmw, dx);
            const float32x4_t fa = vmulq_f32(dd, vcvtq_f32_s32(isum[j]));
            const float32x4_t fb = vmulq_f32(dm, vcvtq_f32_s32(mins4(m01, m23, m45, m67, xb[j])));
            acc[j] = vaddq_f32(acc[j], vsubq_f32(fa, fb));
        }
    }
}

/* Rows per pass over the activation tiles: about 64 KiB of weights, read
 * from memory once and from L2 for every further tile. */
static ALWAYS_INLINE int row_chunk(size_t group_bytes) {
    const int groups = group_bytes < 65536 ? (int)(65536 / group_bytes) : 1;
    return 4 * groups;
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 4 (forward.c cuts repacked matrices only between row groups). */
void FN(matmul_q4_kx4)(const er_matmul_args *a) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * sizeof(er_blk_q4_kx4);
    const int chunk = row_chunk(group_bytes);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += 4) {
                const er_blk_q4_kx4 *wg =
                    (const er_blk_q4_kx4 *)(const void *)((const unsigned char *)a->w + (size_t)(r / 4) * group_bytes);
                float32x4_t acc[MT];
                for (int j = 0; j < MT; j++) acc[j] = vdupq_n_f32(0.0f);
                switch (mt) {
                case 1: group_tile(wg, nb, xj, a->x_stride, 1, acc); break;
                case 2: group_tile(wg, nb, xj, a->x_stride, 2, acc); break;
                case 3: group_tile(wg, nb, xj, a->x_stride, 3, acc); break;
                default: group_tile(wg, nb, xj, a->x_stride, 4, acc); break;
                }
                for (int j = 0; j < mt; j++) vst1q_f32(a->y + (size_t)(j0 + j) * a->y_stride + (size_t)r, acc[j]);
            }
        }
    }
}
