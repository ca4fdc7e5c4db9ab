/*
 * q_more_sve.c — the types of issue 25 with SVE SDOT, any vector length:
 * Q4_1, Q5_0, Q5_1, IQ4_NL against Q8_0 activations and Q2_K, Q3_K,
 * IQ4_XS against Q8_K.
 *
 * As q_sve.c: loops walk a block's bytes in steps of svcntb() under a
 * whilelt predicate, inactive lanes load zeros and add nothing. Weights
 * become signed int8 in element order (the fifth bit of Q5_0/Q5_1 picked
 * from qh by a table look-up of its byte and a per-lane bit; the IQ4 grid
 * by TBL; Q3_K as low - 4 where the hmask bit is clear). The 32-element
 * types accumulate block products in float lanes (tolerance-tested); the
 * 256-element ones apply their sub-block scales in int32 and end each
 * super-block in kquant.h's float tail: bit-identical to generic.
 */
#include "sve.h"
#include "../kquant.h"
#include "../matmul_tiles.h"

#include <arm_sve.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_Q4_1, T_Q5_0, T_Q5_1, T_IQ4_NL };

static ALWAYS_INLINE float h2f(er_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

/* 16 where bit (j + lane) of the 32-bit little-endian qh is set, 0 else */
static ALWAYS_INLINE svuint8_t fifth_bits(svbool_t pg, const uint8_t qh[4], int j) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const svuint8_t bytes = svreinterpret_u8_u32(svdup_n_u32(h)); /* lanes 0..3 hold qh[0..3] */
    const svuint8_t idx = svindex_u8((uint8_t)j, 1);
    const svuint8_t sel = svtbl_u8(bytes, svlsr_n_u8_x(pg, idx, 3));
    const svuint8_t bit = svlsl_u8_x(pg, svdup_n_u8(1), svand_n_u8_x(pg, idx, 7));
    return svdup_n_u8_z(svcmpne_n_u8(pg, svand_u8_x(pg, sel, bit), 0), 16);
}

static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int t) {
    const er_block_q8_0 *x = x_row;
    const int nb = n / ER_QK8_0, vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    const svint8_t grid = svld1_s8(svwhilelt_b8(0, 16), er_iq4nl_values);
    svfloat32_t acc = svdup_n_f32(0.0f);
    float mins = 0.0f;
    for (int i = 0; i < nb; i++) {
        const uint8_t *qs, *qh = NULL;
        float dw, mw = 0.0f;
        if (t == T_Q4_1) {
            const er_block_q4_1 *b = (const er_block_q4_1 *)w_row + i;
            qs = b->qs, dw = h2f(b->d), mw = h2f(b->m);
        } else if (t == T_Q5_0) {
            const er_block_q5_0 *b = (const er_block_q5_0 *)w_row + i;
            qs = b->qs, qh = b->qh, dw = h2f(b->d);
        } else if (t == T_Q5_1) {
            const er_block_q5_1 *b = (const er_block_q5_1 *)w_row + i;
            qs = b->qs, qh = b->qh, dw = h2f(b->d), mw = h2f(b->m);
        } else {
            const er_block_iq4_nl *b = (const er_block_iq4_nl *)w_row + i;
            qs = b->qs, dw = h2f(b->d);
        }
        svint32_t s = svdup_n_s32(0);
        int64_t xsum = 0;
        for (int j = 0; j < 16; j += vl) {
            const svbool_t pg = svwhilelt_b8(j, 16);
            const svuint8_t q = svld1_u8(pg, qs + j);
            svuint8_t lo = svand_n_u8_x(pg, q, 0x0f), hi = svlsr_n_u8_x(pg, q, 4);
            svint8_t a, b;
            if (t == T_IQ4_NL) {
                a = svtbl_s8(grid, lo);
                b = svtbl_s8(grid, hi);
            } else {
                if (qh) {
                    lo = svorr_u8_x(pg, lo, fifth_bits(pg, qh, j));
                    hi = svorr_u8_x(pg, hi, fifth_bits(pg, qh, 16 + j));
                }
                a = svreinterpret_s8_u8(lo);
                b = svreinterpret_s8_u8(hi);
                if (t == T_Q5_0) { /* inactive lanes meet zero activations */
                    a = svsub_n_s8_x(pg, a, 16);
                    b = svsub_n_s8_x(pg, b, 16);
                }
            }
            const svint8_t x0 = svld1_s8(pg, x[i].qs + j), x1 = svld1_s8(pg, x[i].qs + 16 + j);
            s = svdot_s32(svdot_s32(s, a, x0), b, x1);
            if (t == T_Q4_1 || t == T_Q5_1) xsum += svaddv_s8(pg, x0) + svaddv_s8(pg, x1);
        }
        const float dx = h2f(x[i].d);
        acc = svmla_n_f32_x(all, acc, svcvt_f32_s32_x(all, s), dw * dx);
        if (t == T_Q4_1 || t == T_Q5_1) mins += (float)xsum * (mw * dx);
    }
    return svaddv_f32(all, acc) + mins;
}

float er_sve_dot_q4_1(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q4_1); }
float er_sve_dot_q5_0(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_0); }
float er_sve_dot_q5_1(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_1); }
float er_sve_dot_iq4_nl(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_IQ4_NL); }

/* Q2_K (q3 = 0) or Q3_K (q3 = 1): 2-bit fields of 32-byte runs, scales per
 * 16 elements: int32 lanes before element 16 of a run take scale a. */
static ALWAYS_INLINE float dot_q23k(int n, const void *w_row, const void *x_row, const int q3) {
    const er_block_q8_k *x = x_row;
    const int vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const uint8_t *qs, *hmask = NULL;
        int8_t sc[16];
        float d, dmin = 0.0f;
        int32_t imin = 0;
        if (q3) {
            const er_block_q3_k *b = (const er_block_q3_k *)w_row + i;
            qs = b->qs, hmask = b->hmask, d = h2f(b->d);
            er_q3k_scales(b->scales, sc);
        } else {
            const er_block_q2_k *b = (const er_block_q2_k *)w_row + i;
            qs = b->qs, d = h2f(b->d), dmin = h2f(b->dmin);
            int8_t mn[16];
            for (int j = 0; j < 16; j++) {
                sc[j] = (int8_t)(b->scales[j] & 15);
                mn[j] = (int8_t)(b->scales[j] >> 4);
            }
            imin = er_kq_bsum16(mn, x[i].bsums);
        }
        svint32_t acc = svdup_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const int8_t *xq = x[i].qs + 128 * h;
            for (int j = 0; j < 32; j += vl) {
                const svbool_t pg = svwhilelt_b8(j, 32);
                const svbool_t first = svwhilelt_b32(j / 4, 4);
                const svuint8_t q = svld1_u8(pg, qs + 32 * h + j);
                const svuint8_t hm = q3 ? svld1_u8(pg, hmask + j) : svdup_n_u8(0);
                for (int jj = 0; jj < 4; jj++) {
                    svuint8_t u = svand_n_u8_x(pg, svlsr_n_u8_x(pg, q, (uint8_t)(2 * jj)), 3);
                    svint8_t v;
                    if (q3) {
                        const svuint8_t hb = svand_n_u8_x(pg, svlsr_n_u8_x(pg, hm, (uint8_t)(4 * h + jj)), 1);
                        u = svorr_u8_x(pg, u, svlsl_n_u8_x(pg, hb, 2));
                        v = svsub_n_s8_x(pg, svreinterpret_s8_u8(u), 4);
                    } else {
                        v = svreinterpret_s8_u8(u);
                    }
                    const svint32_t dp = svdot_s32(svdup_n_s32(0), v, svld1_s8(pg, xq + 32 * jj + j));
                    const int a = sc[8 * h + 2 * jj], b = sc[8 * h + 2 * jj + 1];
                    acc = svmla_s32_x(all, acc, dp, svsel_s32(first, svdup_n_s32(a), svdup_n_s32(b)));
                }
            }
        }
        sum = er_kq_accum(sum, d, dmin, x[i].d, (int32_t)svaddv_s32(all, acc), imin);
    }
    return sum;
}

float er_sve_dot_q2_k(int n, const void *w_row, const void *x_row) { return dot_q23k(n, w_row, x_row, 0); }
float er_sve_dot_q3_k(int n, const void *w_row, const void *x_row) { return dot_q23k(n, w_row, x_row, 1); }

float er_sve_dot_iq4_xs(int n, const void *w_row, const void *x_row) {
    const er_block_iq4_xs *w = w_row;
    const er_block_q8_k *x = x_row;
    const int vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    const svint8_t grid = svld1_s8(svwhilelt_b8(0, 16), er_iq4nl_values);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t ls[8];
        er_iq4xs_scales(&w[i], ls);
        svint32_t acc = svdup_n_s32(0);
        for (int j = 0; j < 8; j++) {
            svint32_t s = svdup_n_s32(0);
            for (int k = 0; k < 16; k += vl) {
                const svbool_t pg = svwhilelt_b8(k, 16);
                const svuint8_t q = svld1_u8(pg, w[i].qs + 16 * j + k);
                s = svdot_s32(s, svtbl_s8(grid, svand_n_u8_x(pg, q, 0x0f)), svld1_s8(pg, x[i].qs + 32 * j + k));
                s = svdot_s32(s, svtbl_s8(grid, svlsr_n_u8_x(pg, q, 4)), svld1_s8(pg, x[i].qs + 32 * j + 16 + k));
            }
            acc = svmla_n_s32_x(all, acc, s, ls[j]);
        }
        sum = er_kq_accum(sum, h2f(w[i].d), 0.0f, x[i].d, (int32_t)svaddv_s32(all, acc), 0);
    }
    return sum;
}

void er_sve_matmul_q4_1(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q4_1); }
void er_sve_matmul_q5_0(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q5_0); }
void er_sve_matmul_q5_1(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q5_1); }
void er_sve_matmul_iq4_nl(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_iq4_nl); }
void er_sve_matmul_q2_k(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q2_k); }
void er_sve_matmul_q3_k(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q3_k); }
void er_sve_matmul_iq4_xs(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_iq4_xs); }
