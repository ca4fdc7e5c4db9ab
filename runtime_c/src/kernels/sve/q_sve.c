/*
 * q_sve.c — quantized dots and matmuls with SVE SDOT, any vector length.
 *
 * Every loop walks a block's bytes in steps of svcntb() under a whilelt
 * predicate: a 32-byte Q8_0 block is two vectors at 128 bits, one at 256,
 * and part of one (the rest predicated off, loading zeros) at 512 and
 * beyond. Inactive lanes load as zero, so they add nothing to the integer
 * sums. Q8_0/Q4_0 accumulate block products in float lanes (tolerance-
 * tested); K-quant sub-block scales are applied in int32 and reduced once
 * per super-block, then kquant.h's float tail: bit-identical to generic.
 */
#include "sve.h"
#include "../kquant.h"
#include "../matmul_tiles.h"

#include <arm_sve.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

unsigned er_sve_vector_bytes(void) { return (unsigned)svcntb(); }

static ALWAYS_INLINE float h2f(er_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int q4) {
    const er_block_q8_0 *x = x_row;
    const int nb = n / ER_QK8_0, vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    svfloat32_t acc = svdup_n_f32(0.0f);
    for (int i = 0; i < nb; i++) {
        svint32_t s = svdup_n_s32(0);
        float dw;
        if (q4) {
            const er_block_q4_0 *b = (const er_block_q4_0 *)w_row + i;
            dw = h2f(b->d);
            for (int j = 0; j < ER_QK4_0 / 2; j += vl) {
                const svbool_t pg = svwhilelt_b8(j, ER_QK4_0 / 2);
                const svuint8_t q = svld1_u8(pg, b->qs + j);
                /* the subtraction is unpredicated (_x) in inactive lanes,
                 * but the activations there load as 0, so they add 0 */
                const svint8_t lo = svsub_n_s8_x(pg, svreinterpret_s8_u8(svand_n_u8_x(pg, q, 0x0f)), 8);
                const svint8_t hi = svsub_n_s8_x(pg, svreinterpret_s8_u8(svlsr_n_u8_x(pg, q, 4)), 8);
                s = svdot_s32(s, lo, svld1_s8(pg, x[i].qs + j));
                s = svdot_s32(s, hi, svld1_s8(pg, x[i].qs + ER_QK4_0 / 2 + j));
            }
        } else {
            const er_block_q8_0 *b = (const er_block_q8_0 *)w_row + i;
            dw = h2f(b->d);
            for (int j = 0; j < ER_QK8_0; j += vl) {
                const svbool_t pg = svwhilelt_b8(j, ER_QK8_0);
                s = svdot_s32(s, svld1_s8(pg, b->qs + j), svld1_s8(pg, x[i].qs + j));
            }
        }
        acc = svmla_n_f32_x(all, acc, svcvt_f32_s32_x(all, s), dw * h2f(x[i].d));
    }
    return svaddv_f32(all, acc);
}

float er_sve_dot_q8_0(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 0); }
float er_sve_dot_q4_0(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 1); }

/* Q4_K (q5 = 0) or Q5_K (q5 = 1). */
static ALWAYS_INLINE float dot_q45k(int n, const void *w_row, const void *x_row, const int q5) {
    const er_block_q8_k *x = x_row;
    const int vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const uint8_t *scales, *qs, *qh = NULL;
        float d, dmin;
        if (q5) {
            const er_block_q5_k *b = (const er_block_q5_k *)w_row + i;
            scales = b->scales, qs = b->qs, qh = b->qh, d = h2f(b->d), dmin = h2f(b->dmin);
        } else {
            const er_block_q4_k *b = (const er_block_q4_k *)w_row + i;
            scales = b->scales, qs = b->qs, d = h2f(b->d), dmin = h2f(b->dmin);
        }
        uint8_t sc[8], mn[8];
        er_kq_scale_min(scales, sc, mn);
        svint32_t acc = svdup_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const int8_t *xl = x[i].qs + 64 * c;
            for (int j = 0; j < 32; j += vl) {
                const svbool_t pg = svwhilelt_b8(j, 32);
                const svuint8_t q = svld1_u8(pg, qs + 32 * c + j);
                svuint8_t lo = svand_n_u8_x(pg, q, 0x0f), hi = svlsr_n_u8_x(pg, q, 4);
                if (q5) {
                    const svuint8_t h = svld1_u8(pg, qh + j);
                    lo = svorr_u8_x(pg, lo, svlsl_n_u8_x(pg, svand_n_u8_x(pg, svlsr_n_u8_x(pg, h, (uint8_t)(2 * c)), 1), 4));
                    hi = svorr_u8_x(pg, hi,
                                    svlsl_n_u8_x(pg, svand_n_u8_x(pg, svlsr_n_u8_x(pg, h, (uint8_t)(2 * c + 1)), 1), 4));
                }
                const svint32_t sl = svdot_s32(svdup_n_s32(0), svreinterpret_s8_u8(lo), svld1_s8(pg, xl + j));
                const svint32_t sh = svdot_s32(svdup_n_s32(0), svreinterpret_s8_u8(hi), svld1_s8(pg, xl + 32 + j));
                acc = svmla_n_s32_x(all, acc, sl, sc[2 * c]);
                acc = svmla_n_s32_x(all, acc, sh, sc[2 * c + 1]);
            }
        }
        sum = er_kq_accum(sum, d, dmin, x[i].d, (int32_t)svaddv_s32(all, acc), er_kq_min_sum(mn, x[i].bsums));
    }
    return sum;
}

float er_sve_dot_q4_k(int n, const void *w_row, const void *x_row) { return dot_q45k(n, w_row, x_row, 0); }
float er_sve_dot_q5_k(int n, const void *w_row, const void *x_row) { return dot_q45k(n, w_row, x_row, 1); }

/* acc + scale * ((u - 32) . x) for one Q6_K quarter's lanes; lanes in
 * `first` take scale a, the rest scale b. */
static ALWAYS_INLINE svint32_t q6_quarter(svint32_t acc, svbool_t pg, svbool_t first, svuint8_t u, const int8_t *x,
                                          int a, int b) {
    const svint8_t s = svsub_n_s8_x(pg, svreinterpret_s8_u8(u), 32);
    const svint32_t dp = svdot_s32(svdup_n_s32(0), s, svld1_s8(pg, x));
    return svmla_s32_x(svptrue_b32(), acc, dp, svsel_s32(first, svdup_n_s32(a), svdup_n_s32(b)));
}

float er_sve_dot_q6_k(int n, const void *w_row, const void *x_row) {
    const er_block_q6_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const int vl = (int)svcntb();
    const svbool_t all = svptrue_b32();
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        svint32_t acc = svdup_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *sc = w[i].scales + 8 * h;
            const int8_t *xq = x[i].qs + 128 * h;
            for (int j = 0; j < 32; j += vl) {
                const svbool_t pg = svwhilelt_b8(j, 32);
                /* int32 lane k sums elements j+4k..j+4k+3 of a quarter:
                 * those before element 16 take the quarter's first scale */
                const svbool_t first = svwhilelt_b32(j / 4, 4);
                const svuint8_t a = svld1_u8(pg, ql + j), b = svld1_u8(pg, ql + 32 + j);
                const svuint8_t hb = svld1_u8(pg, qh + j);
                const svuint8_t u0 =
                    svorr_u8_x(pg, svand_n_u8_x(pg, a, 0x0f), svlsl_n_u8_x(pg, svand_n_u8_x(pg, hb, 3), 4));
                const svuint8_t u1 = svorr_u8_x(pg, svand_n_u8_x(pg, b, 0x0f),
                                                svlsl_n_u8_x(pg, svand_n_u8_x(pg, svlsr_n_u8_x(pg, hb, 2), 3), 4));
                const svuint8_t u2 = svorr_u8_x(pg, svlsr_n_u8_x(pg, a, 4),
                                                svlsl_n_u8_x(pg, svand_n_u8_x(pg, svlsr_n_u8_x(pg, hb, 4), 3), 4));
                const svuint8_t u3 =
                    svorr_u8_x(pg, svlsr_n_u8_x(pg, b, 4), svlsl_n_u8_x(pg, svlsr_n_u8_x(pg, hb, 6), 4));
                acc = q6_quarter(acc, pg, first, u0, xq + j, sc[0], sc[1]);
                acc = q6_quarter(acc, pg, first, u1, xq + 32 + j, sc[2], sc[3]);
                acc = q6_quarter(acc, pg, first, u2, xq + 64 + j, sc[4], sc[5]);
                acc = q6_quarter(acc, pg, first, u3, xq + 96 + j, sc[6], sc[7]);
            }
        }
        sum = er_kq_accum(sum, h2f(w[i].d), 0.0f, x[i].d, (int32_t)svaddv_s32(all, acc), 0);
    }
    return sum;
}

void er_sve_matmul_q8_0(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q8_0); }
void er_sve_matmul_q4_0(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q4_0); }
void er_sve_matmul_q4_k(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q4_k); }
void er_sve_matmul_q5_k(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q5_k); }
void er_sve_matmul_q6_k(const er_matmul_args *a) { er_matmul_rows(a, er_sve_dot_q6_k); }
