/*
 * float_sve.c — F32/F16/BF16 weight dots and matmuls with SVE, any vector
 * length: svcntw() floats per step, the tail under a whilelt predicate (no
 * scalar remainder loop). Halves and bfloats are loaded zero-extended into
 * 32-bit lanes: an f16 there is the even half FCVT converts; a bfloat just
 * shifts up 16 bits.
 */
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

static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, const int t) {
    const unsigned char *w = a->w, *x = a->x;
    for (int r = a->r0; r < a->r1; r++) {
        const void *wr = w + (size_t)r * a->w_row_bytes;
        for (int b = 0; b < a->m; b++)
            a->y[(size_t)b * a->y_stride + (size_t)r] =
                dot_t(a->n, wr, (const float *)(const void *)(x + (size_t)b * a->x_stride), t);
    }
}

void er_sve_matmul_f32(const er_matmul_args *a) { matmul_t(a, T_F32); }
void er_sve_matmul_f16(const er_matmul_args *a) { matmul_t(a, T_F16); }
void er_sve_matmul_bf16(const er_matmul_args *a) { matmul_t(a, T_BF16); }
