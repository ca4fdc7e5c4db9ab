/*
 * repack_q4_k_q5_k_sve.c — Q4_K and Q5_K matmuls on the G-row layouts
 * (repack_sve.h; neon/repack_neon.h's Q4_Kx4 / Q5_Kx4 with G = svcntw()
 * rows: d[G], dmin[G], sl[8][G], sh[4][G], [qh[4][2][G][4],] qs[4][8][G][4]),
 * decode and prefill, any vector length. One template (q5 = 0/1).
 *
 * Per super-block and G rows: the 6-bit scales and mins of all G rows come
 * from 2 loads and 7 byte operations per chunk of two sub-blocks and 2
 * widenings per sub-block (the row-wise kernel unpacks them per row with
 * scalar code), the mins of all G rows take 8 multiply-adds per activation
 * row, the 64 SDOT by element per activation row leave the rows in lanes,
 * and one float tail serves G rows. The unpacking (AND and shift per 4 bytes of G rows; Q5_K: two
 * shifts, an AND and an ORR more per nibble, plain SVE having no SRI/BSL)
 * is shared by the tile's activation rows (2 per tile: ER_SVE_KQ_MT).
 *
 * Arithmetic: per row and super-block isum = sum_j sc_j (q_j . x_j) and
 * imin = sum_j mn_j bs_j are generic's exact int32s, and the float tail is
 * er_kq_accum's statements lane by lane (er_sve_kq_accum), over
 * super-blocks in order: bit-identical to generic.
 */
#include "sve.h"
#include "repack_sve.h"

/* Sub-block j's G scales or mins as int32 lanes from a byte vector v
 * holding four sub-blocks' values [j & 3][G]: two widenings pick the
 * quarter (the lanes stay in row order). */
static ER_SVE_INLINE svint32_t lanes_of(svuint8_t v, const int j) {
    const svuint16_t h = (j & 2) ? svunpkhi_u16(v) : svunpklo_u16(v);
    return svreinterpret_s32_u32((j & 1) ? svunpkhi_u32(h) : svunpklo_u32(h));
}

/* A nibble with its fifth bit: Q5_K's qh byte holds the low nibble's bit at
 * bit gg and the high one's at 4 + gg (repack_neon.h), moved to bit 4. */
static ER_SVE_INLINE svint8_t lo5(svuint8_t u, svuint8_t h, const int gg, const int q5) {
    const svbool_t all8 = svptrue_b8();
    svuint8_t v = svand_n_u8_x(all8, u, 0x0f);
    if (q5) v = svorr_u8_x(all8, v, svand_n_u8_x(all8, svlsl_n_u8_x(all8, h, 4 - gg), 0x10));
    return svreinterpret_s8_u8(v);
}
static ER_SVE_INLINE svint8_t hi5(svuint8_t u, svuint8_t h, const int gg, const int q5) {
    const svbool_t all8 = svptrue_b8();
    svuint8_t v = svlsr_n_u8_x(all8, u, 4);
    if (q5) v = svorr_u8_x(all8, v, svand_n_u8_x(all8, svlsr_n_u8_x(all8, h, gg), 0x10));
    return svreinterpret_s8_u8(v);
}

static ER_SVE_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float *y, size_t ys, const int q5) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * (q5 ? sizeof(er_block_q5_k) : sizeof(er_block_q4_k));
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)i * rec;
        const uint8_t *sl = r + 4 * (size_t)G, *sh = sl + 8 * (size_t)G;
        const uint8_t *qh = sh + 4 * (size_t)G, *qs = sh + (q5 ? 36 : 4) * (size_t)G;
        ER_SVE_XBLOCKS(er_block_q8_k, x, xs, mt, i);
        svint32_t isum0 = zero, isum1 = zero, isum2 = zero, isum3 = zero;
        svint32_t imin0 = zero, imin1 = zero, imin2 = zero, imin3 = zero;
        /* chunk c holds sub-blocks 2c (low nibbles) and 2c + 1 (high) */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            svint32_t slo0 = zero, slo1 = zero, slo2 = zero, slo3 = zero;
            svint32_t shi0 = zero, shi1 = zero, shi2 = zero, shi3 = zero;
#pragma GCC unroll 2
            for (int k = 0; k < 2; k++) { /* weights g = 4k..4k+3 */
                const uint8_t *q = qs + 4 * (size_t)G * (8 * c + 4 * k);
                const svuint8_t u0 = svld1_u8(all8, q), u1 = svld1_u8(all8, q + 4 * G);
                const svuint8_t u2 = svld1_u8(all8, q + 8 * G), u3 = svld1_u8(all8, q + 12 * G);
                const svuint8_t h = q5 ? svld1_u8(all8, qh + 4 * (size_t)G * (2 * c + k)) : svdup_n_u8(0);
                const svint8_t l0 = lo5(u0, h, 0, q5), l1 = lo5(u1, h, 1, q5), l2 = lo5(u2, h, 2, q5),
                               l3 = lo5(u3, h, 3, q5);
                const svint8_t h0 = hi5(u0, h, 0, q5), h1 = hi5(u1, h, 1, q5), h2 = hi5(u2, h, 2, q5),
                               h3 = hi5(u3, h, 3, q5);
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const int8_t *xq = xb##j->qs + 64 * c + 16 * k;                                                            \
        slo##j = ER_SVE_DOT4(slo##j, l0, l1, l2, l3, er_sve_x16(xq));                                              \
        shi##j = ER_SVE_DOT4(shi##j, h0, h1, h2, h3, er_sve_x16(xq + 32));                                         \
    } while (0)
                ER_SVE_COLS(mt, COL);
#undef COL
            }
            /* the G rows' 6-bit scales and mins of sub-blocks 4(c/2) .. +3 as
             * bytes [sub-block][row]: sl holds their low nibbles, sh their
             * top two bits (bits 0-1 sc, 2-3 mn for sub-blocks 0-3; 4-5,
             * 6-7 for 4-7). Made per chunk rather than once per record, so
             * they are not live through the SDOT loops, where the tile's
             * sums and decoded quants already fill the registers. */
            const svuint8_t lv = svld1_u8(all8, sl + 4 * (size_t)G * (c >> 1)), hb = svld1_u8(all8, sh);
            const svuint8_t hs = c < 2 ? svlsl_n_u8_x(all8, hb, 4) : hb; /* sc's top bits at 4-5 */
            const svuint8_t hm = c < 2 ? svlsl_n_u8_x(all8, hb, 2) : svlsr_n_u8_x(all8, hb, 2); /* mn's */
            const svuint8_t scv = svorr_u8_x(all8, svand_n_u8_x(all8, lv, 15), svand_n_u8_x(all8, hs, 0x30));
            const svuint8_t mnv = svorr_u8_x(all8, svlsr_n_u8_x(all8, lv, 4), svand_n_u8_x(all8, hm, 0x30));
            const svint32_t sc_lo = lanes_of(scv, 2 * c), sc_hi = lanes_of(scv, 2 * c + 1);
            const svint32_t mn_lo = lanes_of(mnv, 2 * c), mn_hi = lanes_of(mnv, 2 * c + 1);
            /* bs_j = bsums_2j + bsums_2j+1: sub-block j's activation sum (|bs_j| <= 32 * 127) */
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const int16_t *bs = xb##j->bsums + 4 * c;                                                                  \
        isum##j = svmla_s32_x(all, svmla_s32_x(all, isum##j, slo##j, sc_lo), shi##j, sc_hi);                       \
        imin##j = svmla_n_s32_x(all, imin##j, mn_lo, (int32_t)bs[0] + bs[1]);                                      \
        imin##j = svmla_n_s32_x(all, imin##j, mn_hi, (int32_t)bs[2] + bs[3]);                                      \
    } while (0)
            ER_SVE_COLS(mt, COL);
#undef COL
        }
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t dmw = er_sve_load_d((const er_f16 *)(const void *)r + G);
#define COL(j) acc##j = er_sve_kq_accum(acc##j, dw, dmw, xb##j->d, isum##j, imin##j)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

static ER_SVE_INLINE void group_tile_q4(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    group_tile(wg, nb, x, xs, mt, y, ys, 0);
}
static ER_SVE_INLINE void group_tile_q5(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    group_tile(wg, nb, x, xs, mt, y, ys, 1);
}
ER_SVE_TILE(tile_q4, group_tile_q4)
ER_SVE_TILE(tile_q5, group_tile_q5)

void er_sve_matmul_q4_kxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_q4_k), tile_q4, ER_SVE_KQ_MT);
}
void er_sve_matmul_q5_kxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_q5_k), tile_q5, ER_SVE_KQ_MT);
}
