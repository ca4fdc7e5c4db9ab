/*
 * repack_q6_k_sve.c — Q6_K matmul on the G-row layout (repack_sve.h;
 * neon/repack_neon.h's Q6_Kx4 with G = svcntw() rows: d[G], sc[16][G],
 * ql[4][8][G][4], qh[2][8][G][4]), decode and prefill, any vector length.
 *
 * Per super-block and G rows: each 4 bytes of G rows' quants become
 * unsigned 6-bit values (0..63) with an AND or shift of ql and an AND and
 * shift of qh merged by ORR (plain SVE has no SRI/BSL), shared by the
 * tile's activation rows; per activation row 64 SDOT by element leave the
 * rows in lanes, the sub-block scales (16 byte-widening loads for all G
 * rows) weight them with 16 multiply-adds, and the offset of 32 is taken
 * off once per super-block as 32 * sum_j scale_j * bsums_j (16
 * multiply-adds for all G rows). One float tail serves G rows.
 *
 * Arithmetic: as neon/repack_q6_k_neon.c: generic's int32 isum
 * (|isum| < 2^28 at every step) and er_kq_accum(sum, d, 0, x.d, isum, 0)
 * lane by lane, over super-blocks in order: bit-identical to generic.
 */
#include "sve.h"
#include "repack_sve.h"

/* Quarter (p, high) of 4 bytes of G rows: p = 0 takes ql[2h] (quarters 0,
 * 2), p = 1 ql[2h + 1] (quarters 1, 3); the low nibble is quarter p with qh
 * bits 2p..2p+1, the high nibble quarter 2 + p with bits 4 + 2p..5 + 2p;
 * each 2-bit field lands at bits 4-5. */
static ER_SVE_INLINE svint8_t q6(svuint8_t l, svuint8_t qh, const int p, const int high) {
    const svbool_t all8 = svptrue_b8();
    const svuint8_t nib = high ? svlsr_n_u8_x(all8, l, 4) : svand_n_u8_x(all8, l, 0x0f);
    const int at = 2 * p + 4 * high; /* the field's lowest bit in qh */
    const svuint8_t top = at < 4 ? svlsl_n_u8_x(all8, qh, 4 - at) : svlsr_n_u8_x(all8, qh, at - 4);
    return svreinterpret_s8_u8(svorr_u8_x(all8, nib, svand_n_u8_x(all8, top, 0x30)));
}

static ER_SVE_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float *y, size_t ys) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * sizeof(er_block_q6_k);
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)i * rec;
        const int8_t *sc = (const int8_t *)(const void *)(r + 2 * (size_t)G);
        const uint8_t *ql = r + 18 * (size_t)G, *qh = ql + 128 * (size_t)G;
        ER_SVE_XBLOCKS(er_block_q8_k, x, xs, mt, i);
        svint32_t isum0 = zero, isum1 = zero, isum2 = zero, isum3 = zero;
        /* half h, weights g = 4gh..4gh+3, quarters p and 2 + p */
#pragma GCC unroll 8
        for (int hgp = 0; hgp < 8; hgp++) {
            const int h = hgp >> 2, gh = (hgp >> 1) & 1, p = hgp & 1;
            const uint8_t *l = ql + 4 * (size_t)G * (8 * (2 * h + p) + 4 * gh);
            const uint8_t *t = qh + 4 * (size_t)G * (8 * h + 4 * gh);
            svint8_t a0, a1, a2, a3, b0, b1, b2, b3; /* quarter p, quarter 2 + p */
#define UNPACK(gg)                                                                                                 \
    do {                                                                                                           \
        const svuint8_t lv = svld1_u8(all8, l + 4 * G * (gg)), tv = svld1_u8(all8, t + 4 * G * (gg));              \
        a##gg = q6(lv, tv, p, 0);                                                                                  \
        b##gg = q6(lv, tv, p, 1);                                                                                  \
    } while (0)
            UNPACK(0);
            UNPACK(1);
            UNPACK(2);
            UNPACK(3);
#undef UNPACK
            /* sub-block of quarter q: 8h + 2q + gh */
            const svint32_t sa = svld1sb_s32(all, sc + (size_t)G * (8 * h + 2 * p + gh));
            const svint32_t sb = svld1sb_s32(all, sc + (size_t)G * (8 * h + 2 * (2 + p) + gh));
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const int8_t *xq = xb##j->qs + 128 * h + 16 * gh;                                                          \
        const svint32_t da = ER_SVE_DOT4(zero, a0, a1, a2, a3, er_sve_x16(xq + 32 * p));                           \
        const svint32_t db = ER_SVE_DOT4(zero, b0, b1, b2, b3, er_sve_x16(xq + 32 * (2 + p)));                     \
        isum##j = svmla_s32_x(all, svmla_s32_x(all, isum##j, da, sa), db, sb);                                     \
    } while (0)
            ER_SVE_COLS(mt, COL);
#undef COL
        }
        /* the offset: 32 * sum_j scale_j * bsums_j, then er_kq_accum(sum, d, 0, x.d, isum, 0) */
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t fzero = svdup_n_f32(0.0f);
        svint32_t off0 = zero, off1 = zero, off2 = zero, off3 = zero;
        for (int j = 0; j < 16; j++) {
            const svint32_t s = svld1sb_s32(all, sc + (size_t)G * j);
#define COL(jj) off##jj = svmla_n_s32_x(all, off##jj, s, xb##jj->bsums[j])
            ER_SVE_COLS(mt, COL);
#undef COL
        }
#define COL(j)                                                                                                     \
    acc##j = er_sve_kq_accum(acc##j, dw, fzero, xb##j->d, svsub_s32_x(all, isum##j, svlsl_n_s32_x(all, off##j, 5)), \
                             zero)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

ER_SVE_TILE(tile_q6, group_tile)

void er_sve_matmul_q6_kxg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK_K, svcntw() * sizeof(er_block_q6_k), tile_q6, ER_SVE_KQ_MT);
}
