/*
 * repack_iq4_xs_neon.c — IQ4_XS matmul on the 4-row interleaved layout
 * (repack_k23_neon.h), decode and prefill, with SDOT (the "neon-dotprod"
 * and "neon-i8mm" tables; kernels/meson.build compiles it only there).
 * Without SDOT the layout does not pay: the widening multiplies' 4 rows in
 * lanes take 5 operations per 16 weights where the row-wise kernel's dot
 * takes 3 (dotlane_neon.h), and under qemu (kernel_insns, 64 x 2048) that
 * twin executed 97.2k instructions against the file layout's 98.4k for
 * decode and 635k against 389k for 4 rows of prefill, so the "neon" table
 * keeps the file layout for IQ4_XS.
 *
 * Why it pays (per super-block and 4 weight rows): the row-wise kernel
 * (q_more_neon.c) decodes each row's eight 6-bit scales with scalar code
 * (er_iq4xs_scales), multiplies every sub-block sum by a scalar scale,
 * reduces each row horizontally and runs the float tail per row. Here one
 * TBL, a shift, and a dozen vector operations give the 4 rows' scales from
 * the file's own bytes (the layout only interleaves them), each 16-byte
 * load gives 4 rows' nibbles for the grid's two TBLs, the 64 SDOT leave the
 * rows in lanes and one float tail serves 4 rows. A prefill tile of up to 4
 * activation rows shares the unpacking.
 *
 * Counted under qemu (scripts/kernel_insns_qemu.sh, one 64 x 2048
 * product, gcc 12 -O3), neon-dotprod: decode 79.9k -> 39.8k instructions,
 * 4 rows of prefill 315k -> 109k (file layout -> this one).
 *
 * Arithmetic: per row and super-block isum = sum_j (ls_j - 32) (grid_j .
 * x_j) is generic's exact int32, and the float tail is er_kq_accum(sum, d,
 * 0, x.d, isum, 0) statement for statement per lane, over super-blocks in
 * order: bit-identical to generic.
 */
#include "neon.h"
#include "repack_k23_neon.h"
#include "repack_load_neon.h"
#include "repack_k23_tile_neon.h"
#include "dotlane_neon.h"

#if ER_NEON_DOTPROD
#define FN(name) er_neondp_##name

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define MT ER_KX4_MT

static ALWAYS_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float32x4_t acc[MT]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30), b32 = vdupq_n_u8(32);
    const int8x16_t grid = vld1q_s8(er_iq4nl_values);
    /* byte [k][r] of the scales_h bytes: row r's byte k / 2 (sh[r] is
     * bytes 2r, 2r + 1), shifted right by 4 (k & 1): bits 0-1 then hold the
     * top of ls_2k, bits 2-3 that of ls_2k+1 */
    static const uint8_t pick[16] = {0, 2, 4, 6, 0, 2, 4, 6, 1, 3, 5, 7, 1, 3, 5, 7};
    static const int8_t down[16] = {0, 0, 0, 0, -4, -4, -4, -4, 0, 0, 0, 0, -4, -4, -4, -4};
    const uint8x16_t pk = vld1q_u8(pick);
    const int8x16_t dn = vld1q_s8(down);
    for (int i = 0; i < nb; i++) {
        const er_blk_iq4_xsx4 *w = (const er_blk_iq4_xsx4 *)wg + i;
        const uint8x8_t h8 = vld1_u8((const uint8_t *)w->sh);
        const uint8x16_t e = vshlq_u8(vqtbl1q_u8(vcombine_u8(h8, h8), pk), dn);
        const uint8x16_t sl = vld1q_u8(w->sl); /* [k][r]: ls_2k low nibble, ls_2k+1 high */
        const uint8x16_t ev = vorrq_u8(vandq_u8(sl, m4), vandq_u8(vshlq_n_u8(e, 4), m30));
        const uint8x16_t od = vorrq_u8(vshrq_n_u8(sl, 4), vandq_u8(vshlq_n_u8(e, 2), m30));
        const int8x16_t se = vreinterpretq_s8_u8(vsubq_u8(ev, b32)), so = vreinterpretq_s8_u8(vsubq_u8(od, b32));
        /* s16[q]: int16 [sub-block][row] of sub-blocks 4(q/2) + (q & 1) and 2 more */
        const int16x8_t s16[4] = {vmovl_s8(vget_low_s8(se)), vmovl_s8(vget_low_s8(so)), vmovl_high_s8(se),
                                  vmovl_high_s8(so)};
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            int8x16_t lo[4], hi[4];
            for (int c = 0; c < 4; c++) {
                const uint8x16_t q = vld1q_u8(w->qs + 64 * sb + 16 * c);
                lo[c] = vqtbl1q_s8(grid, vandq_u8(q, m4));
                hi[c] = vqtbl1q_s8(grid, vshrq_n_u8(q, 4));
            }
            /* sub-block sb = 2k + odd: half (k & 1) of s16[2 (k >> 1) + odd] */
            const int16x8_t sv = s16[2 * (sb >> 2) + (sb & 1)];
            const int32x4_t s = (sb >> 1) & 1 ? vmovl_high_s16(sv) : vmovl_s16(vget_low_s16(sv));
#pragma GCC unroll 4
            for (int j = 0; j < mt; j++) {
                const int8_t *xq = xb[j]->qs + 32 * sb;
                er_dacc d = ER_DOT4(er_dacc_zero(), lo[0], lo[1], lo[2], lo[3], vld1q_s8(xq));
                d = ER_DOT4(d, hi[0], hi[1], hi[2], hi[3], vld1q_s8(xq + 16));
                isum[j] = vmlaq_s32(isum[j], er_dacc_rows(d), s);
            }
        }
        /* er_kq_accum(sum, d, 0, x.d, isum, 0) on 4 lanes */
        const float32x4_t dw = er_neon_load_d4(w->d);
        for (int j = 0; j < mt; j++)
            acc[j] = er_neon_kx4_accum(acc[j], dw, vdupq_n_f32(0.0f), xb[j]->d, isum[j], vdupq_n_s32(0));
    }
}

ER_NEON_K23_TILE(tile_iq4_xs, group_tile, 4)

/* a->w: the repacked matrix; rows [r0, r1) as er_neon_kx4_matmul says */
void FN(matmul_iq4_xsx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_iq4_xsx4), tile_iq4_xs); }

#endif /* ER_NEON_DOTPROD */
