/*
 * repack_q_sve.c — the 32-element types' matmuls on the G-row layouts
 * (repack_sve.h; the fields of neon/repack_layout_neon.c's repack_q, G =
 * svcntw()): Q8_0, Q4_0 and the issue-25 fallbacks IQ4_NL, Q4_1, Q5_0 and
 * Q5_1, decode and prefill, any vector length; and the writers the "sve"
 * table names for all nine layouts (the machine's G passed to
 * neon/repack_layout_neon.c).
 *
 * Per block and G rows: 8 vector loads (Q8_0; Q4_0: 4 loads, and AND, shift
 * and two subtractions of 8 per load) shared by the tile's activation rows,
 * then per activation row 2 LD1RQ, 8 SDOT by element, one convert, one
 * scale product and one FMA. The row-wise kernel (q_sve.c) spends per row
 * and block the weight and activation loads, 1-2 SDOT, a convert and an FMA,
 * and a horizontal reduction per row at the end, with whole vectors only up
 * to 256 bits.
 *
 * The issue-25 types unpack like Q4_0 once per record for the tile: the
 * fifth bits by a shift and a mask of one more load, IQ4_NL's grid by TBL.
 *
 * Arithmetic: each block's int32 dot per row is exact. Q8_0/Q4_0 convert it
 * and FMA-accumulate with d_w * d_x: generic's integers, summed in another
 * float order (the tolerance of the row-wise kernels). The issue-25 types
 * run generic's float tail per lane: generic's bits.
 */
#include "sve.h"
#include "repack_sve.h"
#include "../neon/repack_neon.h"

static ER_SVE_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float *y, size_t ys, const int t) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * er_x4_block_bytes(t);
    const size_t off_h = (er_x4_has_m(t) ? 4 : 2) * (size_t)G, off_q = off_h + (er_x4_has_h(t) ? 4 * (size_t)G : 0);
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32(), vl16 = svptrue_pat_b8(SV_VL16);
    const svint8_t grid = svld1rq_s8(all8, er_iq4nl_values);
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int b = 0; b < nb; b++) {
        const unsigned char *r = (const unsigned char *)wg + (size_t)b * rec;
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const svfloat32_t mw = er_x4_has_m(t) ? er_sve_load_d((const er_f16 *)(const void *)(r + 2 * (size_t)G)) : dw;
        const unsigned char *q = r + off_q;
        /* w_e: elements 4e..4e+3 of every row (lane r = row r) */
        svint8_t w0, w1, w2, w3, w4, w5, w6, w7;
        if (t == ER_X4_Q8_0) {
            const int8_t *s = (const int8_t *)q;
            w0 = svld1_s8(all8, s), w1 = svld1_s8(all8, s + 4 * G), w2 = svld1_s8(all8, s + 8 * G);
            w3 = svld1_s8(all8, s + 12 * G), w4 = svld1_s8(all8, s + 16 * G), w5 = svld1_s8(all8, s + 20 * G);
            w6 = svld1_s8(all8, s + 24 * G), w7 = svld1_s8(all8, s + 28 * G);
        } else {
            /* byte c of a row: element 4c.. low, 16 + 4c.. high; the fifth
             * bits at bit c and 4 + c of the regrouped h (q5_regroup.h) */
            const svuint8_t h = er_x4_has_h(t) ? svld1_u8(all8, r + off_h) : svdup_n_u8(0);
#define NIB(c, lo, hi)                                                                                             \
    do {                                                                                                           \
        const svuint8_t u = svld1_u8(all8, q + 4 * (size_t)G * (c));                                               \
        svuint8_t l = svand_n_u8_x(all8, u, 0x0f), m = svlsr_n_u8_x(all8, u, 4);                                   \
        if (er_x4_has_h(t)) {                                                                                      \
            l = svorr_u8_x(all8, l, svand_n_u8_x(all8, svlsl_n_u8_x(all8, h, 4 - (c)), 0x10));                     \
            m = svorr_u8_x(all8, m, svand_n_u8_x(all8, svlsr_n_u8_x(all8, h, (c)), 0x10));                         \
        }                                                                                                          \
        if (t == ER_X4_IQ4_NL) {                                                                                   \
            lo = svtbl_s8(grid, l), hi = svtbl_s8(grid, m);                                                        \
        } else {                                                                                                   \
            /* Q4_0, Q5_0 signed (q - 8, q - 16); Q4_1, Q5_1 unsigned */                                           \
            lo = svsub_n_s8_x(all8, svreinterpret_s8_u8(l), (int8_t)er_x4_off(t));                                 \
            hi = svsub_n_s8_x(all8, svreinterpret_s8_u8(m), (int8_t)er_x4_off(t));                                 \
        }                                                                                                          \
    } while (0)
            NIB(0, w0, w4);
            NIB(1, w1, w5);
            NIB(2, w2, w6);
            NIB(3, w3, w7);
#undef NIB
        }
        /* Q8_0/Q4_0 one FMA per block; the issue-25 types generic's float
         * tail lane by lane (dot_q4_1_q5.c, dot_iq4.c: separate IEEE
         * operations, so generic's bits): sum + isum (d_w d_x), or
         * sum + (isum (d_w d_x) + Σx (m_w d_x)) */
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)(j) * xs) + b;                 \
        const svint8_t xl = er_sve_x16(xb->qs), xh = er_sve_x16(xb->qs + 16);                                      \
        const float dx = er_sve_h2f(xb->d);                                                                        \
        const svint32_t s = ER_SVE_DOT4(ER_SVE_DOT4(svdup_n_s32(0), w0, w1, w2, w3, xl), w4, w5, w6, w7, xh);      \
        if (!er_x4_exact(t)) {                                                                                     \
            acc##j = svmla_f32_x(all, acc##j, svcvt_f32_s32_x(all, s), svmul_n_f32_x(all, dw, dx));                \
        } else {                                                                                                   \
            const svfloat32_t p = svmul_f32_x(all, svcvt_f32_s32_x(all, s), svmul_n_f32_x(all, dw, dx));           \
            if (er_x4_has_m(t)) {                                                                                  \
                const float xsum = (float)(svaddv_s8(vl16, xl) + svaddv_s8(vl16, xh));                             \
                const svfloat32_t q = svmul_n_f32_x(all, svmul_n_f32_x(all, mw, dx), xsum);                        \
                acc##j = svadd_f32_x(all, acc##j, svadd_f32_x(all, p, q));                                         \
            } else {                                                                                               \
                acc##j = svadd_f32_x(all, acc##j, p);                                                              \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

/* one tile function per type (ER_SVE_TILE: one inlined copy per height) */
#define TYPE_TILE(name, T)                                                                                         \
    static ER_SVE_INLINE void group_tile_##name(const void *wg, int nb, const unsigned char *x, size_t xs,         \
                                                const int mt, float *y, size_t ys) {                               \
        group_tile(wg, nb, x, xs, mt, y, ys, T);                                                                   \
    }                                                                                                              \
    ER_SVE_TILE(tile_##name, group_tile_##name)                                                                    \
    void er_sve_matmul_##name##xg(const er_matmul_args *a) {                                                       \
        er_sve_rows_matmul(a, a->n / 32, svcntw() * er_x4_block_bytes(T), tile_##name, ER_SVE_MT);                 \
    }
TYPE_TILE(q8_0, ER_X4_Q8_0)
TYPE_TILE(q4_0, ER_X4_Q4_0)
TYPE_TILE(iq4_nl, ER_X4_IQ4_NL)
TYPE_TILE(q4_1, ER_X4_Q4_1)
TYPE_TILE(q5_0, ER_X4_Q5_0)
TYPE_TILE(q5_1, ER_X4_Q5_1)

int er_sve_group_rows(void) { return (int)svcntw(); }

void er_sve_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q8_0(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_0(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_k(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_k(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q6_k(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_iq4_nl(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_1(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_0(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
void er_sve_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_1(src, dst, row_bytes, n_in, n_out, (int)svcntw());
}
