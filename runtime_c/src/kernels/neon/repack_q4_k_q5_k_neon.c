/*
 * repack_q4_k_q5_k_neon.c — Q4_K and Q5_K matmuls on the 4-row interleaved
 * layouts (repack_neon.h), decode and prefill. One template (q5 = 0/1):
 * Q5_K is Q4_K's record plus a fifth bit per element. Compiled twice like
 * q_neon.c (SDOT by element / widening multiplies).
 *
 * Why it pays (per super-block and 4 weight rows, SDOT twin): the row-wise
 * kernel (q_neon.c) unpacks each row's 6-bit scales with scalar code
 * (er_kq_scale_min, ~30 operations), sums the mins with 8 scalar multiplies,
 * reduces each row horizontally and runs the float tail per row; here a
 * dozen vector operations give the 4 rows' scales and mins, 8
 * vmlal_laneq_s16 the mins of all 4 rows, the 64 SDOT leave the rows in
 * lanes, and one float tail serves 4 rows. Q5_K's fifth bits: the layout
 * groups them per chunk so that one AND or shift (two for some) puts each
 * where SRI (high nibbles) or BSL (low) merges it as they extract the
 * nibble, 2.6 operations per 16 weights where the row-wise kernel spends 4
 * (AND or shift, CMTST, AND, ORR). Prefill tiles of up to 4 activation rows
 * share the scale decode and the unpacking.
 *
 * Counted in the compiled decode loop (m = 1), one super-block of 4 rows,
 * against 4 x q_neon.c's dot loop, gcc 12 -O3: SDOT twin (-mcpu=cortex-a76)
 * Q4_K 255 instructions vs 4 x 175, Q5_K 390 vs 4 x 223 (clang 14: 237 vs
 * 4 x 165, 406 vs 4 x 215); widening twin (-mcpu=cortex-a72) Q4_K 648 vs
 * 4 x 206, Q5_K 781 vs 4 x 259 (its 4-rows-in-lanes step takes 5
 * operations per 16 weights where a row-wise dot takes 3, dotlane_neon.h).
 * llvm-mca 14 -mcpu=cortex-a76 estimates for the SDOT loops: Q4_K 110 vs
 * 4 x 67 cycles, Q5_K 182 vs 4 x 82. Estimates, not timed on hardware
 * (developed under qemu).
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
#include "repack_kx4_neon.h"
#include "dotlane_neon.h"

#if ER_NEON_DOTPROD
#define FN(name) er_neondp_##name
#else
#define FN(name) er_neon_##name
#endif

/* no pre-RA scheduling under GCC: i8mm_kq_neon.c says why. Here it cut
 * the stack accesses (gcc 12 -O3, +dotprod) from 1451 to 193 (Q4_K/Q5_K)
 * and 799 to 102 (Q6_K), and the instructions of a 64 x 2048 product
 * (scripts/kernel_insns_qemu.sh) by 5-14% at m = 1 and 40% at m = 4. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define MT ER_KX4_MT

/* One group of 4 weight rows against mt (1..4) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float32x4_t acc[MT], const int q5) {
    for (int i = 0; i < nb; i++) {
        const er_kx4_rec w = er_kx4_rec_at(wg, i, q5);
        uint8x16_t scs[2], mns[2]; /* bytes [j][row] of sub-blocks 0-3 and 4-7 */
        er_neon_kx4_scales(&w, scs, mns);
        const uint8x16_t sca = scs[0], scb = scs[1], mna = mns[0], mnb = mns[1];
        const int16x8_t m01 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mna)));
        const int16x8_t m23 = vreinterpretq_s16_u16(vmovl_high_u8(mna));
        const int16x8_t m45 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mnb)));
        const int16x8_t m67 = vreinterpretq_s16_u16(vmovl_high_u8(mnb));
        const float32x4_t dw = er_neon_load_d4(w.d), dmw = er_neon_load_d4(w.dmin);
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
        /* chunk c holds sub-blocks 2c (low nibbles) and 2c + 1 (high) */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            int8x16_t u[2][8];
            er_neon_kx4_unpack_chunk(&w, c, q5, u[0], u[1]);
            const uint8x16_t scv = c < 2 ? sca : scb;
#pragma GCC unroll 2
            for (int hh = 0; hh < 2; hh++) {
                const int32x4_t s = er_neon_kx4_sc32(scv, 2 * (c & 1) + hh);
#pragma GCC unroll 4
                for (int j = 0; j < mt; j++) {
                    const int8_t *xq = xb[j]->qs + 64 * c + 32 * hh;
                    const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
                    /* one sub-block: both halves into one accumulator */
                    er_dacc d = ER_DOT4(er_dacc_zero(), u[hh][0], u[hh][1], u[hh][2], u[hh][3], x0);
                    d = ER_DOT4(d, u[hh][4], u[hh][5], u[hh][6], u[hh][7], x1);
                    isum[j] = vmlaq_s32(isum[j], er_dacc_rows(d), s);
                }
            }
        }
        /* er_kq_accum, statement for statement, on 4 lanes; imin over the
         * sub-blocks of 32: bs_j = bsums_2j + bsums_2j+1 (|bs_j| <= 32 * 127) */
        for (int j = 0; j < mt; j++) {
            const float dx = xb[j]->d;
            const int16x8_t bs = vpaddq_s16(vld1q_s16(xb[j]->bsums), vld1q_s16(xb[j]->bsums + 8));
            const int32x4_t imin = er_neon_kx4_lanes8(vdupq_n_s32(0), m01, m23, m45, m67, bs);
            acc[j] = er_neon_kx4_accum(acc[j], dw, dmw, dx, isum[j], imin);
        }
    }
}

static ALWAYS_INLINE void group_tile_q4(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float32x4_t acc[MT]) {
    group_tile(wg, nb, x, xs, mt, acc, 0);
}
static ALWAYS_INLINE void group_tile_q5(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float32x4_t acc[MT]) {
    group_tile(wg, nb, x, xs, mt, acc, 1);
}
ER_NEON_KX4_TILE(tile_q4, group_tile_q4)
ER_NEON_KX4_TILE(tile_q5, group_tile_q5)

/* a->w: the repacked matrix; rows [r0, r1) as er_neon_kx4_matmul says */
void FN(matmul_q4_kx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_q4_kx4), tile_q4); }
void FN(matmul_q5_kx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_q5_kx4), tile_q5); }
