/*
 * repack_q2_k_q3_k_sve.c — Q2_K and Q3_K matmuls on the G-row layouts
 * (repack_sve.h; neon/repack_k23_neon.h's Q2_Kx4 / Q3_Kx4 with G =
 * svcntw() rows), decode and prefill, any vector length; and the "sve"
 * table's writers of both (neon/repack_layout_k23_neon.c with the machine's
 * G).
 *
 * Per super-block and G rows, the quants of all G rows are unpacked once
 * for the tile's activation rows (2 per tile: ER_SVE_KQ_MT):
 *  - Q2_K: one AND (a shift for the top field) per 4 bytes of G rows; the
 *    field stays in place, so field f comes out times 4^f (f = 1, 2) and
 *    the sub-block's scale is taken times 16 / 4^f (field 3: 16): every
 *    sub-block adds 16 times its term to one sum, shifted down once per
 *    super-block (exact);
 *  - Q3_K: shift and AND for the low bits, and the complemented hmask bit
 *    (AND, compare) predicates the subtraction of 4 (plain SVE has no SLI);
 * then per activation row 64 SDOT by element leave the rows in lanes, the
 * sub-block scales (one byte-widening load each: Q2_K's mins from the same
 * load; Q3_K's 6-bit scales from 3 loads and a dozen byte operations per
 * record, two widenings per sub-block) weight them with one multiply-add
 * each, and one float tail serves G rows. The row-wise kernels (q_more_sve.c)
 * reduce every row across the vector and decode its scales with scalar
 * code.
 *
 * Counted under qemu (scripts/kernel_insns_qemu.sh, one 64 x 2048
 * product, file layout -> this one), 256 bits: Q2_K decode 119k -> 32.7k
 * instructions, 4 rows of prefill 473k -> 120k; Q3_K 139k -> 46.4k and
 * 551k -> 167k (512 bits about half of that, 128 bits about twice).
 *
 * Arithmetic: as neon/repack_q2_k_q3_k_neon.c: generic's exact int32 isum
 * (and Q2_K's imin) and er_kq_accum lane by lane (Q3_K: dmin 0, imin 0),
 * over super-blocks in order: bit-identical to generic.
 */
#include "sve.h"
#include "repack_sve.h"
#include "../neon/repack_k23_neon.h"

/* Q2_K field f of v, times 4^f for f = 1, 2 (the AND leaves it in place) */
static ER_SVE_INLINE svint8_t q2_field(svuint8_t v, const int f) {
    const svbool_t all8 = svptrue_b8();
    if (f == 3) return svreinterpret_s8_u8(svlsr_n_u8_x(all8, v, 6));
    return svreinterpret_s8_u8(svand_n_u8_x(all8, v, (uint8_t)(3u << (2 * f))));
}

static ER_SVE_INLINE void group_tile_q2(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * sizeof(er_block_q2_k);
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)i * rec;
        const uint8_t *sc = r + ER_Q2KX_SC(G), *qs = r + ER_Q2KX_QS(G);
        ER_SVE_XBLOCKS(er_block_q8_k, x, xs, mt, i);
        /* isum: 16 times generic's */
        svint32_t isum0 = zero, isum1 = zero, isum2 = zero, isum3 = zero;
        svint32_t imin0 = zero, imin1 = zero, imin2 = zero, imin3 = zero;
#pragma GCC unroll 4
        for (int hg = 0; hg < 4; hg++) {
            const int h = hg >> 1, gh = hg & 1; /* half h, weights g = 4gh.. */
            const uint8_t *q = qs + 4 * (size_t)G * (8 * h + 4 * gh);
            const svuint8_t v0 = svld1_u8(all8, q), v1 = svld1_u8(all8, q + 4 * G);
            const svuint8_t v2 = svld1_u8(all8, q + 8 * G), v3 = svld1_u8(all8, q + 12 * G);
#pragma GCC unroll 4
            for (int f = 0; f < 4; f++) {
                const svint8_t u0 = q2_field(v0, f), u1 = q2_field(v1, f), u2 = q2_field(v2, f),
                               u3 = q2_field(v3, f);
                const int sb = 8 * h + 2 * f + gh;
                const svint32_t raw = svreinterpret_s32_u32(svld1ub_u32(all, sc + (size_t)G * sb));
                /* the scale times 16 / 4^f (field 3: 16) */
                const svint32_t sc15 = svand_n_s32_x(all, raw, 15), m = svasr_n_s32_x(all, raw, 4);
                const svint32_t s = f == 2 ? sc15 : svlsl_n_s32_x(all, sc15, f == 1 ? 2 : 4);
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const svint32_t d = ER_SVE_DOT4(zero, u0, u1, u2, u3, er_sve_x16(xb##j->qs + 128 * h + 32 * f + 16 * gh)); \
        isum##j = svmla_s32_x(all, isum##j, d, s);                                                                 \
        imin##j = svmla_n_s32_x(all, imin##j, m, xb##j->bsums[sb]);                                                \
    } while (0)
                ER_SVE_COLS(mt, COL);
#undef COL
            }
        }
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t dmw = er_sve_load_d((const er_f16 *)(const void *)(r + ER_Q2KX_DMIN(G)));
#define COL(j) acc##j = er_sve_kq_accum(acc##j, dw, dmw, xb##j->d, svasr_n_s32_x(all, isum##j, 4), imin##j)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

/* Sub-block j's G signed scales as int32 lanes from a byte vector holding
 * four sub-blocks' [j & 3][G] */
static ER_SVE_INLINE svint32_t lanes_of(svint8_t v, const int j) {
    const svint16_t h = (j & 2) ? svunpkhi_s16(v) : svunpklo_s16(v);
    return (j & 1) ? svunpkhi_s32(h) : svunpklo_s32(h);
}

static ER_SVE_INLINE void group_tile_q3(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * sizeof(er_block_q3_k);
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)i * rec;
        const uint8_t *hm = r + ER_Q3KX_HM(G), *qs = r + ER_Q3KX_QS(G);
        ER_SVE_XBLOCKS(er_block_q8_k, x, xs, mt, i);
        /* the sixteen 6-bit scales of G rows, bytes [j][row], minus 32:
         * sv0 scales 0-3, sv1 4-7, sv2 8-11, sv3 12-15 */
        const svuint8_t l0 = svld1_u8(all8, r + ER_Q3KX_SL(G)), l1 = svld1_u8(all8, r + ER_Q3KX_SL(G) + 4 * (size_t)G);
        const svuint8_t hb = svld1_u8(all8, r + ER_Q3KX_SH(G));
#define SCALES(lo, top) svsub_n_s8_x(all8, svreinterpret_s8_u8(svorr_u8_x(all8, lo, svand_n_u8_x(all8, top, 0x30))), 32)
        const svint8_t sv0 = SCALES(svand_n_u8_x(all8, l0, 15), svlsl_n_u8_x(all8, hb, 4));
        const svint8_t sv1 = SCALES(svand_n_u8_x(all8, l1, 15), svlsl_n_u8_x(all8, hb, 2));
        const svint8_t sv2 = SCALES(svlsr_n_u8_x(all8, l0, 4), hb);
        const svint8_t sv3 = SCALES(svlsr_n_u8_x(all8, l1, 4), svlsr_n_u8_x(all8, hb, 2));
#undef SCALES
        svint32_t isum0 = zero, isum1 = zero, isum2 = zero, isum3 = zero;
#pragma GCC unroll 2
        for (int gh = 0; gh < 2; gh++) { /* weights g = 4gh.. */
            const uint8_t *t = hm + 4 * (size_t)G * (4 * gh);
            const svuint8_t h0 = svld1_u8(all8, t), h1 = svld1_u8(all8, t + 4 * G);
            const svuint8_t h2 = svld1_u8(all8, t + 8 * G), h3 = svld1_u8(all8, t + 12 * G);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const uint8_t *q = qs + 4 * (size_t)G * (8 * h + 4 * gh);
                const svuint8_t v0 = svld1_u8(all8, q), v1 = svld1_u8(all8, q + 4 * G);
                const svuint8_t v2 = svld1_u8(all8, q + 8 * G), v3 = svld1_u8(all8, q + 12 * G);
#pragma GCC unroll 4
                for (int f = 0; f < 4; f++) {
                    const uint8_t bit = (uint8_t)(1u << (4 * h + f));
                    /* low bits, minus 4 where the complemented hmask bit is set */
#define Q3(v, hh)                                                                                                  \
    svsub_n_s8_m(svcmpne_n_u8(all8, svand_n_u8_x(all8, hh, bit), 0),                                               \
                 svreinterpret_s8_u8(f == 3   ? svlsr_n_u8_x(all8, v, 6)                                           \
                                     : f == 0 ? svand_n_u8_x(all8, v, 3)                                           \
                                              : svand_n_u8_x(all8, svlsr_n_u8_x(all8, v, 2 * f), 3)),              \
                 4)
                    const svint8_t u0 = Q3(v0, h0), u1 = Q3(v1, h1), u2 = Q3(v2, h2), u3 = Q3(v3, h3);
#undef Q3
                    const int sb = 8 * h + 2 * f + gh;
                    const svint8_t svq = sb < 4 ? sv0 : sb < 8 ? sv1 : sb < 12 ? sv2 : sv3;
                    const svint32_t s = lanes_of(svq, sb & 3);
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const svint32_t d = ER_SVE_DOT4(zero, u0, u1, u2, u3, er_sve_x16(xb##j->qs + 128 * h + 32 * f + 16 * gh)); \
        isum##j = svmla_s32_x(all, isum##j, d, s);                                                                 \
    } while (0)
                    ER_SVE_COLS(mt, COL);
#undef COL
                }
            }
        }
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t fzero = svdup_n_f32(0.0f);
#define COL(j) acc##j = er_sve_kq_accum(acc##j, dw, fzero, xb##j->d, isum##j, zero)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

/* The tiles: er_sve_rows_matmul passes at most ER_SVE_KQ_MT = 2 rows, so
 * two inlined heights rather than ER_SVE_TILE's four (code the rpi5 CLI's
 * 1 MB budget would carry for nothing) */
static void tile_q2(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {
    if (mt == 1) group_tile_q2(wg, nb, x, xs, 1, y, ys);
    else group_tile_q2(wg, nb, x, xs, 2, y, ys);
}
static void tile_q3(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {
    if (mt == 1) group_tile_q3(wg, nb, x, xs, 1, y, ys);
    else group_tile_q3(wg, nb, x, xs, 2, y, ys);
}
_Static_assert(ER_SVE_KQ_MT == 2, "the tiles above have heights 1 and 2");

void er_sve_matmul_q2_kxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_q2_k), tile_q2, ER_SVE_KQ_MT);
}
void er_sve_matmul_q3_kxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_q3_k), tile_q3, ER_SVE_KQ_MT);
}

void er_sve_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q2_k(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q3_k(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
