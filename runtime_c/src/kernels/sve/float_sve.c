/*
 * float_sve.c — F32/F16/BF16 weight dots and matmuls with SVE, any vector
 * length: svcntw() floats per step, the tail under a whilelt predicate (no
 * scalar remainder loop). Halves and bfloats are loaded zero-extended into
 * 32-bit lanes: an f16 there is the even half FCVT converts; a bfloat just
 * shifts up 16 bits. matmul (prefill) shares each loaded and converted
 * weight vector between four activation rows, over weight chunks that stay
 * in L2, as the NEON and AVX2 tables do; until 2026-11-29 it called the dot
 * once per weight row and activation row.
 */
#include "../matmul_tiles.h"
#include "sve.h"

#include <arm_sve.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_F32, T_F16, T_BF16 };

static ALWAYS_INLINE svfloat32_t load(svbool_t pg, const void *w, int i, const int t) {
    if (t == T_F32)
        return svld1_f32(pg, (const float *)w + i);
    const svuint32_t h = svld1uh_u32(pg, (const uint16_t *)w + i);
    if (t == T_F16)
        return svcvt_f32_f16_x(pg, svreinterpret_f16_u32(h));
    return svreinterpret_f32_u32(svlsl_n_u32_x(pg, h, 16));
}

static ALWAYS_INLINE float dot_t(int n, const void *w, const float *x, const int t) {
    const int vl = (int)svcntw();
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = svdup_n_f32(0.0f);
    int i = 0;
    const svbool_t all = svptrue_b32();
    for (; i + 2 * vl <= n; i += 2 * vl) {
        a0 = svmla_f32_x(all, a0, load(all, w, i, t), svld1_f32(all, x + i));
        a1 = svmla_f32_x(all, a1, load(all, w, i + vl, t), svld1_f32(all, x + i + vl));
    }
    for (; i < n; i += vl) {
        const svbool_t pg = svwhilelt_b32(i, n);
        a0 = svmla_f32_m(pg, a0, load(pg, w, i, t), svld1_f32(pg, x + i));
    }
    return svaddv_f32(all, svadd_f32_x(all, a0, a1));
}

float er_sve_dot_f32(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F32); }
float er_sve_dot_f16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F16); }
float er_sve_dot_bf16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_BF16); }

/* Four activation rows against one weight row: each weight vector is loaded
 * and converted once for all four (the float prefill's register tile). */
static ALWAYS_INLINE void rows4_t(int n, const void *w, const unsigned char *x, size_t xs, float *out, const int t) {
    const float *x0 = (const float *)(const void *)x, *x1 = (const float *)(const void *)(x + xs);
    const float *x2 = (const float *)(const void *)(x + 2 * xs), *x3 = (const float *)(const void *)(x + 3 * xs);
    const int vl = (int)svcntw();
    const svbool_t all = svptrue_b32();
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + vl <= n; i += vl) {
        const svfloat32_t wv = load(all, w, i, t);
        a0 = svmla_f32_x(all, a0, wv, svld1_f32(all, x0 + i));
        a1 = svmla_f32_x(all, a1, wv, svld1_f32(all, x1 + i));
        a2 = svmla_f32_x(all, a2, wv, svld1_f32(all, x2 + i));
        a3 = svmla_f32_x(all, a3, wv, svld1_f32(all, x3 + i));
    }
    if (i < n) {
        /* inactive lanes load as zero and keep the accumulators (_m) */
        const svbool_t pg = svwhilelt_b32(i, n);
        const svfloat32_t wv = load(pg, w, i, t);
        a0 = svmla_f32_m(pg, a0, wv, svld1_f32(pg, x0 + i));
        a1 = svmla_f32_m(pg, a1, wv, svld1_f32(pg, x1 + i));
        a2 = svmla_f32_m(pg, a2, wv, svld1_f32(pg, x2 + i));
        a3 = svmla_f32_m(pg, a3, wv, svld1_f32(pg, x3 + i));
    }
    out[0] = svaddv_f32(all, a0);
    out[1] = svaddv_f32(all, a1);
    out[2] = svaddv_f32(all, a2);
    out[3] = svaddv_f32(all, a3);
}

/* chunks of weight rows x tiles of four activation rows (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, const int t) { ER_MATMUL_TILES4(a, rows4_t, dot_t, t); }

void er_sve_matmul_f32(const er_matmul_args *a) { matmul_t(a, T_F32); }
void er_sve_matmul_f16(const er_matmul_args *a) { matmul_t(a, T_F16); }
void er_sve_matmul_bf16(const er_matmul_args *a) { matmul_t(a, T_BF16); }
