/*
 * float_avx2.c — F32/F16/BF16 weight dots and matmuls, AVX2+FMA+F16C.
 *
 * Four 8-lane FMA accumulators (32 elements per step) cover the FMA latency;
 * the result differs from generic's eight scalar partial sums by float
 * rounding only. matmul (prefill) works in register tiles of three weight
 * rows by four activation rows.
 */
#include "../matmul_tiles.h"
#include "avx2.h"
#include "../half.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_F32, T_F16, T_BF16 };

static ALWAYS_INLINE __m256 load8(const void *w, int i, const int t) {
    if (t == T_F32)
        return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)w + i));
    if (t == T_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static ALWAYS_INLINE float load1(const void *w, int i, const int t) {
    if (t == T_F32)
        return ((const float *)w)[i];
    if (t == T_F16)
        return _cvtsh_ss(((const uint16_t *)w)[i]);
    return er_bfloat_to_float(((const uint16_t *)w)[i]);
}

static ALWAYS_INLINE float dot_t(int n, const void *w, const float *x, const int t) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load8(w, i, t), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8(w, i + 8, t), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8(w, i + 16, t), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8(w, i + 24, t), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(load8(w, i, t), _mm256_loadu_ps(x + i), a0);
    float s = er_avx2_hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        s += load1(w, i, t) * x[i];
    return s;
}

float er_avx2_dot_f32(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F32); }
float er_avx2_dot_f16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_F16); }
float er_avx2_dot_bf16(int n, const void *w_row, const void *x_row) { return dot_t(n, w_row, x_row, T_BF16); }

/* hsum(acc) plus the scalar tail [i, n) of one weight row against one
 * activation row: the tile's epilogue for each of its outputs */
static ALWAYS_INLINE float finish(__m256 acc, const void *w, const float *x, int i, int n, const int t) {
    float s = er_avx2_hsum_ps(acc);
    for (; i < n; i++) s += load1(w, i, t) * x[i];
    return s;
}

/* R (1-3) weight rows against four activation rows: 4R accumulators in
 * named registers (GCC may keep an array of vectors on the stack and chain
 * the FMAs through it), plus R weight vectors and one activation vector:
 * the 16 ymm registers at R = 3. Each output is one accumulator over
 * 8-element steps, then the tail, whatever R: the tile shape never changes
 * a result. */
static ALWAYS_INLINE void rows_t(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int t) {
    const unsigned char *w0 = w, *w1 = w0 + rb, *w2 = w1 + rb;
    const float *x0 = (const float *)(const void *)x, *x1 = (const float *)(const void *)(x + xs);
    const float *x2 = (const float *)(const void *)(x + 2 * xs), *x3 = (const float *)(const void *)(x + 3 * xs);
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v0 = load8(w0, i, t), v1 = R > 1 ? load8(w1, i, t) : v0, v2 = R > 2 ? load8(w2, i, t) : v0;
#define COL(k)                                                                                                     \
    do {                                                                                                           \
        const __m256 xv = _mm256_loadu_ps(x##k + i);                                                               \
        a0##k = _mm256_fmadd_ps(v0, xv, a0##k);                                                                    \
        if (R > 1) a1##k = _mm256_fmadd_ps(v1, xv, a1##k);                                                         \
        if (R > 2) a2##k = _mm256_fmadd_ps(v2, xv, a2##k);                                                         \
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
#undef ROW
}

/* chunks of weight rows x tiles of 3 weight rows and four activation rows
 * (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, const int t) { ER_MATMUL_TILES(a, 3, rows_t, dot_t, t); }

void er_avx2_matmul_f32(const er_matmul_args *a) { matmul_t(a, T_F32); }
void er_avx2_matmul_f16(const er_matmul_args *a) { matmul_t(a, T_F16); }
void er_avx2_matmul_bf16(const er_matmul_args *a) { matmul_t(a, T_BF16); }

void er_avx2_f32_to_f16(const float *x, er_f16 *y, int n) {
    int i = 0;
    /* F16C rounds to nearest even and quiets NaNs keeping the top payload
     * bits, exactly er_f32_to_f16's rule, so the KV cache is bit-identical */
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++)
        y[i] = er_f32_to_f16(x[i]);
}

void er_avx2_f16_to_f32(const er_f16 *x, float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++)
        y[i] = _cvtsh_ss(x[i]);
}

void er_avx2_dequant_f16(const void *src, float *dst, int n) { er_avx2_f16_to_f32(src, dst, n); }
