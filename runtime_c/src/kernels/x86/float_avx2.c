/*
 * float_avx2.c — F32/F16/BF16 weight dots and matmuls, AVX2+FMA+F16C.
 *
 * Four 8-lane FMA accumulators (32 elements per step) cover the FMA latency;
 * the result differs from generic's eight scalar partial sums by float
 * rounding only. matmul shares each converted weight vector between up to
 * four activation rows.
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

/* Four activation rows against one weight row. */
static ALWAYS_INLINE void rows4_t(int n, const void *w, const unsigned char *x, size_t xs, float *out, const int t) {
    const float *x0 = (const float *)(const void *)x, *x1 = (const float *)(const void *)(x + xs);
    const float *x2 = (const float *)(const void *)(x + 2 * xs), *x3 = (const float *)(const void *)(x + 3 * xs);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = load8(w, i, t);
        a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + i), a0);
        a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + i), a1);
        a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + i), a2);
        a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + i), a3);
    }
    float s0 = er_avx2_hsum_ps(a0), s1 = er_avx2_hsum_ps(a1), s2 = er_avx2_hsum_ps(a2), s3 = er_avx2_hsum_ps(a3);
    for (; i < n; i++) {
        const float wv = load1(w, i, t);
        s0 += wv * x0[i];
        s1 += wv * x1[i];
        s2 += wv * x2[i];
        s3 += wv * x3[i];
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}

/* chunks of weight rows x tiles of four activation rows (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, const int t) { ER_MATMUL_TILES4(a, rows4_t, dot_t, t); }

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
