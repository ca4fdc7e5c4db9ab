/*
 * float_neon.c — F32/F16/BF16 weight dots and matmuls and f16 row
 * conversions, baseline NEON (FCVTL/FCVTN convert halves without +fp16).
 *
 * Four 4-lane FMA accumulators (16 elements per step); the result differs
 * from generic's eight partial sums by float rounding only. matmul (prefill)
 * works in register tiles of four weight rows by four activation rows.
 */
#include "../matmul_tiles.h"
#include "neon.h"
#include "../half.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_F32, T_F16, T_BF16 };

static ALWAYS_INLINE float32x4_t load4(const void *w, int i, const int t) {
    if (t == T_F32)
        return vld1q_f32((const float *)w + i);
    const uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (t == T_F16)
        return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

static ALWAYS_INLINE float load1(const void *w, int i, const int t) {
    if (t == T_F32)
        return ((const float *)w)[i];
    if (t == T_F16)
        return er_neon_h2f(((const uint16_t *)w)[i]);
    return er_bfloat_to_float(((const uint16_t *)w)[i]);
}

static ALWAYS_INLINE float dot_t(int n, const void *w, const float *x, const int t) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load4(w, i, t), vld1q_f32(x + i));
        a1 = vfmaq_f32(a1, load4(w, i + 4, t), vld1q_f32(x + i + 4));
        a2 = vfmaq_f32(a2, load4(w, i + 8, t), vld1q_f32(x + i + 8));
        a3 = vfmaq_f32(a3, load4(w, i + 12, t), vld1q_f32(x + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        a0 = vfmaq_f32(a0, load4(w, i, t), vld1q_f32(x + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++)
        s += load1(w, i, t) * x[i];
    return s;
}

float er_neon_dot_f32(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F32); }
float er_neon_dot_f16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F16); }
float er_neon_dot_bf16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_BF16); }

/* vaddvq(acc) plus the scalar tail [i, n) of one weight row against one
 * activation row: the tile's epilogue for each of its outputs */
static ALWAYS_INLINE float finish(float32x4_t acc, const void *w, const float *x, int i, int n, const int t) {
    float s = vaddvq_f32(acc);
    for (; i < n; i++) s += load1(w, i, t) * x[i];
    return s;
}

/* R (1-4) weight rows against four activation rows: 4R accumulators in
 * named registers (an array of vectors may live on the stack and chain the
 * FMAs through memory), R weight vectors and one activation vector, 21 of
 * the 32 registers at R = 4. Each output is one accumulator over 4-element
 * steps, then the tail, whatever R: the tile shape never changes a result. */
static ALWAYS_INLINE void rows_t(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int t) {
    const unsigned char *w0 = w, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
    const float *x0 = (const float *)(const void *)x, *x1 = (const float *)(const void *)(x + xs);
    const float *x2 = (const float *)(const void *)(x + 2 * xs), *x3 = (const float *)(const void *)(x + 3 * xs);
    float32x4_t a00 = vdupq_n_f32(0.0f), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    float32x4_t a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v0 = load4(w0, i, t), v1 = R > 1 ? load4(w1, i, t) : v0;
        const float32x4_t v2 = R > 2 ? load4(w2, i, t) : v0, v3 = R > 3 ? load4(w3, i, t) : v0;
#define COL(k)                                                                                                     \
    do {                                                                                                           \
        const float32x4_t xv = vld1q_f32(x##k + i);                                                                \
        a0##k = vfmaq_f32(a0##k, v0, xv);                                                                          \
        if (R > 1) a1##k = vfmaq_f32(a1##k, v1, xv);                                                               \
        if (R > 2) a2##k = vfmaq_f32(a2##k, v2, xv);                                                               \
        if (R > 3) a3##k = vfmaq_f32(a3##k, v3, xv);                                                               \
    } while (0)
        COL(0);
        COL(1);
        COL(2);
        COL(3);
#undef COL
    }
#define ROW(j)                                                                                                     \
    do {                                                                                                           \
        out[4 * (j)] = finish(a##j##0, w##j, x0, i, n, t);                                                         \
        out[4 * (j) + 1] = finish(a##j##1, w##j, x1, i, n, t);                                                     \
        out[4 * (j) + 2] = finish(a##j##2, w##j, x2, i, n, t);                                                     \
        out[4 * (j) + 3] = finish(a##j##3, w##j, x3, i, n, t);                                                     \
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

void er_neon_matmul_f32(const er_matmul_args *a) { matmul_t(a, T_F32); }
void er_neon_matmul_f16(const er_matmul_args *a) { matmul_t(a, T_F16); }
void er_neon_matmul_bf16(const er_matmul_args *a) { matmul_t(a, T_BF16); }

void er_neon_f32_to_f16(const float *x, er_f16 *y, int n) {
    int i = 0;
    /* FCVTN rounds to nearest even (the FPCR default) and quiets NaNs
     * keeping the top payload bits: er_f32_to_f16's rule, bit for bit.
     * Conversions ignore FZ16, so FTZ workers still produce subnormals. */
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++)
        y[i] = er_f32_to_f16(x[i]);
}

void er_neon_f16_to_f32(const er_f16 *x, float *y, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++)
        y[i] = er_neon_h2f(x[i]);
}

void er_neon_dequant_f16(const void *src, float *dst, int n) { er_neon_f16_to_f32(src, dst, n); }

void er_neon_dequant_bf16(const void *src, float *dst, int n) {
    const uint16_t *s = src;
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(s + i), 16)));
    for (; i < n; i++)
        dst[i] = er_bfloat_to_float(s[i]);
}
