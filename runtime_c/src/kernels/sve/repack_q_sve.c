/*
 * repack_q_sve.c — Q8_0 and Q4_0 matmuls on the G-row layouts
 * (repack_sve.h: { f16 d[G]; i8 q[8][G][4] } and { f16 d[G]; u8 q[4][G][4] },
 * G = svcntw()), decode and prefill, any vector length; and the writers the
 * "sve" table names for all five layouts (the machine's G passed to
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
 * Arithmetic: each block's int32 dot per row is exact, converted and
 * FMA-accumulated with d_w * d_x: generic's integers, summed in another
 * float order (the tolerance of the row-wise kernels).
 */
#include "sve.h"
#include "repack_sve.h"
#include "../neon/repack_neon.h"

/* a Q4_0 nibble, low or high, as its signed value (q - 8) */
static ER_SVE_INLINE svint8_t lo4(svuint8_t u) {
    const svbool_t all8 = svptrue_b8();
    return svsub_n_s8_x(all8, svreinterpret_s8_u8(svand_n_u8_x(all8, u, 0x0f)), 8);
}
static ER_SVE_INLINE svint8_t hi4(svuint8_t u) {
    const svbool_t all8 = svptrue_b8();
    return svsub_n_s8_x(all8, svreinterpret_s8_u8(svlsr_n_u8_x(all8, u, 4)), 8);
}

static ER_SVE_INLINE void group_tile(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     float *y, size_t ys, const int q4) {
    const int G = (int)svcntw();
    const size_t rec = (size_t)G * (q4 ? sizeof(er_block_q4_0) : sizeof(er_block_q8_0));
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int b = 0; b < nb; b++) {
        const unsigned char *r = (const unsigned char *)wg + (size_t)b * rec;
        const svfloat32_t dw = er_sve_load_d((const er_f16 *)(const void *)r);
        const unsigned char *q = r + 2 * (size_t)G;
        /* w_e: elements 4e..4e+3 of every row (lane r = row r) */
        svint8_t w0, w1, w2, w3, w4, w5, w6, w7;
        if (q4) {
            /* Q4_0's byte c of a row: element 4c.. low, 16 + 4c.. high */
            const svuint8_t u0 = svld1_u8(all8, q), u1 = svld1_u8(all8, q + 4 * G);
            const svuint8_t u2 = svld1_u8(all8, q + 8 * G), u3 = svld1_u8(all8, q + 12 * G);
            w0 = lo4(u0), w1 = lo4(u1), w2 = lo4(u2), w3 = lo4(u3);
            w4 = hi4(u0), w5 = hi4(u1), w6 = hi4(u2), w7 = hi4(u3);
        } else {
            const int8_t *s = (const int8_t *)q;
            w0 = svld1_s8(all8, s), w1 = svld1_s8(all8, s + 4 * G), w2 = svld1_s8(all8, s + 8 * G);
            w3 = svld1_s8(all8, s + 12 * G), w4 = svld1_s8(all8, s + 16 * G), w5 = svld1_s8(all8, s + 20 * G);
            w6 = svld1_s8(all8, s + 24 * G), w7 = svld1_s8(all8, s + 28 * G);
        }
#define COL(j)                                                                                                     \
    do {                                                                                                           \
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)(j) * xs) + b;                 \
        svint32_t s = ER_SVE_DOT4(svdup_n_s32(0), w0, w1, w2, w3, er_sve_x16(xb->qs));                             \
        s = ER_SVE_DOT4(s, w4, w5, w6, w7, er_sve_x16(xb->qs + 16));                                               \
        acc##j = svmla_f32_x(all, acc##j, svcvt_f32_s32_x(all, s), svmul_n_f32_x(all, dw, er_sve_h2f(xb->d)));     \
    } while (0)
        ER_SVE_COLS(mt, COL);
#undef COL
    }
    ER_SVE_COLS(mt, ER_SVE_STORE);
}

static ER_SVE_INLINE void group_tile_q8(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    group_tile(wg, nb, x, xs, mt, y, ys, 0);
}
static ER_SVE_INLINE void group_tile_q4(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float *y, size_t ys) {
    group_tile(wg, nb, x, xs, mt, y, ys, 1);
}
ER_SVE_TILE(tile_q8, group_tile_q8)
ER_SVE_TILE(tile_q4, group_tile_q4)

void er_sve_matmul_q8_0xg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK8_0, svcntw() * sizeof(er_block_q8_0), tile_q8, ER_SVE_MT);
}
void er_sve_matmul_q4_0xg(const er_matmul_args *a) {
    er_sve_rows_matmul(a, a->n / ER_QK4_0, svcntw() * sizeof(er_block_q4_0), tile_q4, ER_SVE_MT);
}

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
