/*
 * neon.h — the NEON kernels (internal): "neon" for baseline armv8-a and
 * "neon-dotprod" for armv8.2-a+dotprod.
 *
 * q_neon.c is compiled twice: once for the baseline (widening multiplies,
 * er_neon_* names, -DER_NEON_DOTPROD=0) and once with -march=armv8.2-a+dotprod
 * (SDOT, er_neondp_* names, -DER_NEON_DOTPROD=1), so both tables share one
 * source. The macro, not __ARM_FEATURE_DOTPROD, picks the twin: a board's
 * -mcpu may enable dotprod for the baseline compilation as well.
 * The float and element-wise kernels need only baseline NEON and are shared
 * by both tables (and by "sve").
 */
#ifndef ER_KERNELS_NEON_H
#define ER_KERNELS_NEON_H

#include "../kernels.h"

#define ER_NEON_Q_DECL(p)                                                                                          \
    float p##_dot_q8_0(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q4_0(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q4_k(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q5_k(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q6_k(int n, const void *w_row, const void *x_row);                                               \
    void p##_matmul_q8_0(const er_matmul_args *a);                                                                 \
    void p##_matmul_q4_0(const er_matmul_args *a);                                                                 \
    void p##_matmul_q4_k(const er_matmul_args *a);                                                                 \
    void p##_matmul_q5_k(const er_matmul_args *a);                                                                 \
    void p##_matmul_q6_k(const er_matmul_args *a);                                                                 \
    /* the types of issue 25 (q_more_neon.c) */                                                                    \
    float p##_dot_q4_1(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q5_0(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q5_1(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_iq4_nl(int n, const void *w_row, const void *x_row);                                             \
    float p##_dot_iq4_xs(int n, const void *w_row, const void *x_row);                                             \
    float p##_dot_q3_k(int n, const void *w_row, const void *x_row);                                               \
    float p##_dot_q2_k(int n, const void *w_row, const void *x_row);                                               \
    void p##_matmul_q4_1(const er_matmul_args *a);                                                                 \
    void p##_matmul_q5_0(const er_matmul_args *a);                                                                 \
    void p##_matmul_q5_1(const er_matmul_args *a);                                                                 \
    void p##_matmul_iq4_nl(const er_matmul_args *a);                                                               \
    void p##_matmul_iq4_xs(const er_matmul_args *a);                                                               \
    void p##_matmul_q3_k(const er_matmul_args *a);                                                                 \
    void p##_matmul_q2_k(const er_matmul_args *a);                                                                 

ER_NEON_Q_DECL(er_neon)
ER_NEON_Q_DECL(er_neondp)

float er_neon_dot_f32(int n, const void *w_row, const void *x_row);
float er_neon_dot_f16(int n, const void *w_row, const void *x_row);
float er_neon_dot_bf16(int n, const void *w_row, const void *x_row);
void er_neon_matmul_f32(const er_matmul_args *a);
void er_neon_matmul_f16(const er_matmul_args *a);
void er_neon_matmul_bf16(const er_matmul_args *a);
void er_neon_dequant_f16(const void *src, float *dst, int n);
void er_neon_dequant_bf16(const void *src, float *dst, int n);
void er_neon_f32_to_f16(const float *x, er_f16 *y, int n);
void er_neon_f16_to_f32(const er_f16 *x, float *y, int n);

void er_neon_quantize_row_q8_0(const float *x, void *dst, int n);
void er_neon_quantize_row_q8_k(const float *x, void *dst, int n);
void er_neon_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
void er_neon_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox);
void er_neon_softmax(float *x, int n);
void er_neon_silu_mul(float *g, const float *u, int n);
void er_neon_gelu_mul(float *g, const float *u, int n);
void er_neon_add(float *y, const float *x, int n);
int32_t er_neon_argmax(const float *x, int n);
void er_neon_attention(float *out, const float *q, const void *k, const void *v, int kv_type, size_t kv_stride,
                       int n_kv, int head_dim, float scale, float *scores);
void er_neon_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                             const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch);
void er_neon_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch);
void er_neon_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                              size_t kv_stride, int nkv, int group, int head_dim, float scale);
void er_neon_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                            int group, int head_dim);

#if defined(__ARM_NEON)
#include <arm_neon.h>
#include <string.h>

/* The largest |x| of x[0..n), n a multiple of 4, 0 for none: compare-and-
 * select, not FMAX, so that a NaN leaves the running max alone, as the
 * generic quantizers' `a > amax` does (FMAX would return the NaN). */
static inline float er_neon_absmax(const float *x, int n) {
    float32x4_t am = vdupq_n_f32(0.0f);
    for (int k = 0; k < n; k += 4) {
        const float32x4_t a = vabsq_f32(vld1q_f32(x + k));
        am = vbslq_f32(vcgtq_f32(a, am), a, am);
    }
    return vmaxvq_f32(am);
}

/* IEEE half -> float with one FCVT (no +fp16 needed for conversions). */
static inline float er_neon_h2f(er_f16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}
#endif

#endif
