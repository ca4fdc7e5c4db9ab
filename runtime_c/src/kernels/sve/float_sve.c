/*
 * float_sve.c — F32/F16/BF16 weight dots and matmuls with SVE, any vector
 * length: svcntw() floats per step, the tail under a whilelt predicate (no
 * scalar remainder loop). Halves and bfloats are loaded zero-extended into
 * 32-bit lanes: an f16 there is the even half FCVT converts; a bfloat just
 * shifts up 16 bits. matmul (prefill) works in register tiles of four
 * weight rows by four activation rows, over weight chunks that stay in L2,
 * as the NEON and AVX2 tables do.
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

/* R (1-4) weight rows against four activation rows: 4R accumulators in
 * named registers (an array of vectors may live on the stack and chain the
 * FMAs through memory), R weight vectors and one activation vector, 21 of
 * the 32 registers at R = 4. The last partial vector runs under a whilelt
 * predicate: inactive lanes load as zero and keep the accumulators (_m).
 * Each output is one accumulator whatever R: the tile shape never changes a
 * result. */
static ALWAYS_INLINE void rows_t(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int t) {
    const unsigned char *w0 = w, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
    const float *x0 = (const float *)(const void *)x, *x1 = (const float *)(const void *)(x + xs);
    const float *x2 = (const float *)(const void *)(x + 2 * xs), *x3 = (const float *)(const void *)(x + 3 * xs);
    const int vl = (int)svcntw();
    const svbool_t all = svptrue_b32();
    svfloat32_t a00 = svdup_n_f32(0.0f), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    svfloat32_t a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
#define STEP(pg, MLA)                                                                                              \
    do {                                                                                                           \
        const svfloat32_t v0 = load(pg, w0, i, t), v1 = R > 1 ? load(pg, w1, i, t) : v0;                           \
        const svfloat32_t v2 = R > 2 ? load(pg, w2, i, t) : v0, v3 = R > 3 ? load(pg, w3, i, t) : v0;              \
        COL(pg, MLA, 0);                                                                                           \
        COL(pg, MLA, 1);                                                                                           \
        COL(pg, MLA, 2);                                                                                           \
        COL(pg, MLA, 3);                                                                                           \
    } while (0)
#define COL(pg, MLA, k)                                                                                            \
    do {                                                                                                           \
        const svfloat32_t xv = svld1_f32(pg, x##k + i);                                                            \
        a0##k = MLA(pg, a0##k, v0, xv);                                                                            \
        if (R > 1) a1##k = MLA(pg, a1##k, v1, xv);                                                                 \
        if (R > 2) a2##k = MLA(pg, a2##k, v2, xv);                                                                 \
        if (R > 3) a3##k = MLA(pg, a3##k, v3, xv);                                                                 \
    } while (0)
    int i = 0;
    for (; i + vl <= n; i += vl) STEP(all, svmla_f32_x);
    if (i < n) {
        const svbool_t pg = svwhilelt_b32(i, n);
        STEP(pg, svmla_f32_m);
    }
#undef COL
#undef STEP
#define ROW(j)                                                                                                     \
    do {                                                                                                           \
        out[4 * (j)] = svaddv_f32(all, a##j##0);                                                                   \
        out[4 * (j) + 1] = svaddv_f32(all, a##j##1);                                                               \
        out[4 * (j) + 2] = svaddv_f32(all, a##j##2);                                                               \
        out[4 * (j) + 3] = svaddv_f32(all, a##j##3);                                                               \
    } while (0)
    ROW(0);
    if (R > 1) ROW(1);
    if (R > 2) ROW(2);
    if (R > 3) ROW(3);
#undef ROW
}

/* chunks of weight rows x tiles of 4 weight rows and four activation rows
 * (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, const int t) { ER_MATMUL_TILES(a, 4, rows_t, dot_t, t); }

void er_sve_matmul_f32(const er_matmul_args *a) { matmul_t(a, T_F32); }
void er_sve_matmul_f16(const er_matmul_args *a) { matmul_t(a, T_F16); }
void er_sve_matmul_bf16(const er_matmul_args *a) { matmul_t(a, T_BF16); }
