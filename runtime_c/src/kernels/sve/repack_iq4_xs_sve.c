/*
 * repack_iq4_xs_sve.c — IQ4_XS matmul on the G-row layout (repack_sve.h;
 * neon/repack_k23_neon.h's IQ4_XSx4 with G = svcntw() rows: d[G],
 * scales_h[G], scales_l[4][G], qs[8][4][G][4]), decode and prefill, any
 * vector length; and the "sve" table's writer of it.
 *
 * Per super-block and G rows: each 4 bytes of G rows' nibbles become the
 * grid's values by an AND or a shift and one TBL, shared by the tile's
 * activation rows (2 per tile: ER_SVE_KQ_MT); each sub-block's G scales
 * come from two widening loads and a few operations; per activation row 64
 * SDOT by element leave the rows in lanes, 8 multiply-adds weight them, and
 * one float tail serves G rows. The row-wise kernel (q_more_sve.c) decodes
 * each row's scales with scalar code and reduces every row across the
 * vector.
 *
 * Counted under qemu (scripts/kernel_insns_qemu.sh, one 64 x 2048
 * product, file layout -> this one), 256 bits: decode 143k -> 30.1k
 * instructions, 4 rows of prefill 567k -> 91.8k.
 *
 * Arithmetic: as neon/repack_iq4_xs_neon.c: generic's exact int32 isum and
 * er_kq_accum(sum, d, 0, x.d, isum, 0) lane by lane, over super-blocks in
 * order: bit-identical to generic.
 */
#include "sve.h"
#include "repack_sve.h"
#include "../neon/repack_k23_neon.h"

static ER_SVE_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float *y, size_t ys) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * sizeof(er_block_iq4_xs);
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    const svint8_t grid = svld1rq_s8(all8, er_iq4nl_values);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)i * rec;
        const uint8_t *sl = r + ER_IQ4XSX_SL(G), *qs = r + ER_IQ4XSX_QS(G);
        ER_SVE_XBLOCKS(er_block_q8_k, x, xs, mt, i);
        const svuint32_t sh = svld1uh_u32(all, (const uint16_t *)(const void *)(r + ER_IQ4XSX_SH(G)));
        svint32_t isum0 = zero, isum1 = zero, isum2 = zero, isum3 = zero;
#pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            svint8_t lo0, lo1, lo2, lo3, hi0, hi1, hi2, hi3;
#define NIB(c)                                                                                                     \
    do {                                                                                                           \
        const svuint8_t u = svld1_u8(all8, qs + 4 * (size_t)G * (4 * sb + (c)));                                   \
        lo##c = svtbl_s8(grid, svand_n_u8_x(all8, u, 0x0f));                                                       \
        hi##c = svtbl_s8(grid, svlsr_n_u8_x(all8, u, 4));                                                          \
    } while (0)
            NIB(0);
            NIB(1);
            NIB(2);
            NIB(3);
#undef NIB
            /* ls = scales_l[sb / 2] nibble sb % 2 | scales_h bits 2sb..2sb+1 at 4-5, minus 32 */
            const svuint32_t l = svld1ub_u32(all, sl + (size_t)G * (sb >> 1));
            const svuint32_t lv = sb & 1 ? svlsr_n_u32_x(all, l, 4) : svand_n_u32_x(all, l, 15);
            const svuint32_t top = sb <= 2 ? svlsl_n_u32_x(all, sh, 4 - 2 * sb) : svlsr_n_u32_x(all, sh, 2 * sb - 4);
            const svint32_t s = svsub_n_s32_x(all, svreinterpret_s32_u32(svorr_u32_x(all, lv, svand_n_u32_x(all, top, 0x30))), 32);
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const int8_t *xq = xb##j->qs + 32 * sb;                                                                    \
        const svint32_t d = ER_SVE_DOT4(ER_SVE_DOT4(zero, lo0, lo1, lo2, lo3, er_sve_x16(xq)), hi0, hi1, hi2, hi3, \
                                        er_sve_x16(xq + 16));                                                      \
        isum##j = svmla_s32_x(all, isum##j, d, s);                                                                 \
    } while (0)
            ER_SVE_COLS(mt, COL);
#undef COL
        }
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t fzero = svdup_n_f32(0.0f);
#define COL(j) acc##j = er_sve_kq_accum(acc##j, dw, fzero, xb##j->d, isum##j, zero)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

/* heights 1 and 2 only: er_sve_rows_matmul passes at most ER_SVE_KQ_MT = 2
 * rows (repack_q2_k_q3_k_sve.c) */
static void tile_iq4_xs(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {
    if (mt == 1) group_tile(wg, nb, x, xs, 1, y, ys);
    else group_tile(wg, nb, x, xs, 2, y, ys);
}
_Static_assert(ER_SVE_KQ_MT == 2, "tile_iq4_xs has heights 1 and 2");

void er_sve_matmul_iq4_xsxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_iq4_xs), tile_iq4_xs, ER_SVE_KQ_MT);
}

void er_sve_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_iq4_xs(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
