/*
 * repack_q6_k_neon.c — Q6_K matmul on the 4-row interleaved layout
 * (repack_neon.h), decode and prefill. Compiled twice like q_neon.c (SDOT
 * by element / widening multiplies).
 *
 * Why it pays (per super-block and 4 weight rows, SDOT twin): the row-wise
 * kernel (q_neon.c) rebuilds each row's 6-bit quants with ~5.5 operations
 * per 16 weights (the offset of 32 included), multiplies every sub-block
 * sum by a scalar scale it loads and broadcasts, and reduces each row
 * horizontally with its own float tail; here 2.25 operations per 16
 * weights (one AND or shift isolates each 2-bit field where SRI or BSL
 * merges it with the nibble) give the unsigned quants (0..63) of 4 rows,
 * the 64 SDOT leave the rows in lanes, the 4 rows' sub-block scales are
 * widened once per record, and the offset of 32 is taken off once per
 * super-block as 32 * sum_j scale_j * bsums_j (16 vmlal_laneq_s16 for all
 * 4 rows). Prefill tiles of up to 4 activation rows share the unpacking
 * and the scale widening.
 *
 * Counted in the compiled decode loop (m = 1), one super-block of 4 rows,
 * against 4 x q_neon.c's dot loop, gcc 12 -O3: SDOT twin (-mcpu=cortex-a76)
 * 408 instructions vs 4 x 210 (clang 14: 464 vs 4 x 196); widening twin
 * (-mcpu=cortex-a72) 787 vs 4 x 243. llvm-mca 14 -mcpu=cortex-a76
 * estimates 189 vs 4 x 84 cycles for the SDOT loops. Estimates, not timed
 * on hardware (developed under qemu).
 *
 * Arithmetic: generic sums (q - 32) x; here isum = sum_j scale_j (q_j . x_j)
 * - 32 sum_j scale_j bsums_j, the same int32 (bsums_j is exactly the sum of
 * sub-block j's 16 activation quants; |isum| < 2^28 at every step). The
 * float tail is er_kq_accum(sum, d, 0, x.d, isum, 0) statement for
 * statement per lane (er_neon_kx4_accum with dmin and imin 0), over
 * super-blocks in order: bit-identical to generic. Its b = (0 * x.d) * 0 is
 * a signed zero that cannot change a sum starting at +0 (round-to-nearest
 * makes -0 only of -0 + -0), so the tests cannot see it; it stays (a few
 * instructions per super-block and activation row) so the tail remains
 * generic's word for word, whatever the start.
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

/* Half h's weights g = 4gh..4gh+3 of 4 rows as unsigned quants (0..63):
 * u[q][g & 3] quarter q, elements 128h + 32q + 4g.. (sub-block 8h + 2q +
 * gh); er_neon_q6x4_unpack says how. */
static ALWAYS_INLINE void unpack_quad(const er_blk_q6_kx4 *w, const int h, const int gh, int8x16_t u[4][4]) {
#pragma GCC unroll 4
    for (int gg = 0; gg < 4; gg++) {
        const int g = 4 * gh + gg;
        const uint8x16_t a = vld1q_u8(w->ql + 128 * (2 * h) + 16 * g);     /* quarters 0 (low), 2 (high) */
        const uint8x16_t b = vld1q_u8(w->ql + 128 * (2 * h + 1) + 16 * g); /* quarters 1, 3 */
        int8x16_t v[4];
        er_neon_q6x4_unpack(a, b, vld1q_u8(w->qh + 128 * h + 16 * g), v);
        for (int q = 0; q < 4; q++) u[q][gg] = v[q];
    }
}

/* One group of 4 weight rows against mt (1..4) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float32x4_t acc[MT]) {
    for (int i = 0; i < nb; i++) {
        const er_blk_q6_kx4 *w = (const er_blk_q6_kx4 *)wg + i;
        /* s16[k]: int16 [sub-block][row] of sub-blocks 2k (low half) and 2k + 1 */
        int16x8_t s16[8];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int8x16_t v = vld1q_s8(w->sc + 16 * k);
            s16[2 * k] = vmovl_s8(vget_low_s8(v));
            s16[2 * k + 1] = vmovl_high_s8(v);
        }
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
#pragma GCC unroll 4
        for (int hg = 0; hg < 4; hg++) {
            const int h = hg >> 1, gh = hg & 1; /* half h, weights g = 4gh.. */
            int8x16_t u[4][4];
            unpack_quad(w, h, gh, u);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                /* sub-block 8h + 2q + gh: half gh of s16[4h + q] */
                const int16x8_t sv = s16[4 * h + q];
                const int32x4_t s = gh ? vmovl_high_s16(sv) : vmovl_s16(vget_low_s16(sv));
#pragma GCC unroll 4
                for (int j = 0; j < mt; j++) {
                    const int8x16_t xv = vld1q_s8(xb[j]->qs + 128 * h + 32 * q + 16 * gh);
                    const er_dacc d = ER_DOT4(er_dacc_zero(), u[q][0], u[q][1], u[q][2], u[q][3], xv);
                    isum[j] = vmlaq_s32(isum[j], er_dacc_rows(d), s);
                }
            }
        }
        /* the offset, then er_kq_accum(sum, d, 0, x.d, isum, 0) on 4 lanes */
        const float32x4_t dw = er_neon_load_d4(w->d);
        for (int j = 0; j < mt; j++) {
            int32x4_t off = er_neon_kx4_lanes8(vdupq_n_s32(0), s16[0], s16[1], s16[2], s16[3], vld1q_s16(xb[j]->bsums));
            off = er_neon_kx4_lanes8(off, s16[4], s16[5], s16[6], s16[7], vld1q_s16(xb[j]->bsums + 8));
            const int32x4_t is = vsubq_s32(isum[j], vshlq_n_s32(off, 5));
            acc[j] = er_neon_kx4_accum(acc[j], dw, vdupq_n_f32(0.0f), xb[j]->d, is, vdupq_n_s32(0));
        }
    }
}

ER_NEON_KX4_TILE(tile_q6, group_tile)

/* a->w: the repacked matrix; rows [r0, r1) as er_neon_kx4_matmul says */
void FN(matmul_q6_kx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_q6_kx4), tile_q6); }
