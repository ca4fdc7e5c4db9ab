/*
 * generic.h — the portable C kernels behind er_kernels_generic() (internal).
 *
 * ISA tables include this to reuse any entry they do not speed up, and the
 * tests call these directly as the reference the SIMD twins must match.
 */
#ifndef ER_KERNELS_GENERIC_H
#define ER_KERNELS_GENERIC_H

#include "../kernels.h"

float er_gen_dot_f32(int n, const void *w_row, const void *x_row);
float er_gen_dot_f16(int n, const void *w_row, const void *x_row);
float er_gen_dot_bf16(int n, const void *w_row, const void *x_row);
float er_gen_dot_q8_0(int n, const void *w_row, const void *x_row);
float er_gen_dot_q4_0(int n, const void *w_row, const void *x_row);
float er_gen_dot_q4_k(int n, const void *w_row, const void *x_row);
float er_gen_dot_q5_k(int n, const void *w_row, const void *x_row);
float er_gen_dot_q6_k(int n, const void *w_row, const void *x_row);
float er_gen_dot_q4_1(int n, const void *w_row, const void *x_row);
float er_gen_dot_q5_0(int n, const void *w_row, const void *x_row);
float er_gen_dot_q5_1(int n, const void *w_row, const void *x_row);
float er_gen_dot_iq4_nl(int n, const void *w_row, const void *x_row);
float er_gen_dot_iq4_xs(int n, const void *w_row, const void *x_row);
float er_gen_dot_q3_k(int n, const void *w_row, const void *x_row);
float er_gen_dot_q2_k(int n, const void *w_row, const void *x_row);

void er_gen_matmul_f32(const er_matmul_args *a);
void er_gen_matmul_f16(const er_matmul_args *a);
void er_gen_matmul_bf16(const er_matmul_args *a);
void er_gen_matmul_q8_0(const er_matmul_args *a);
void er_gen_matmul_q4_0(const er_matmul_args *a);
void er_gen_matmul_q4_k(const er_matmul_args *a);
void er_gen_matmul_q5_k(const er_matmul_args *a);
void er_gen_matmul_q6_k(const er_matmul_args *a);
void er_gen_matmul_q4_1(const er_matmul_args *a);
void er_gen_matmul_q5_0(const er_matmul_args *a);
void er_gen_matmul_q5_1(const er_matmul_args *a);
void er_gen_matmul_iq4_nl(const er_matmul_args *a);
void er_gen_matmul_iq4_xs(const er_matmul_args *a);
void er_gen_matmul_q3_k(const er_matmul_args *a);
void er_gen_matmul_q2_k(const er_matmul_args *a);

void er_gen_dequant_f32(const void *src, float *dst, int n);
void er_gen_dequant_f16(const void *src, float *dst, int n);
void er_gen_dequant_bf16(const void *src, float *dst, int n);
void er_gen_dequant_q8_0(const void *src, float *dst, int n);
void er_gen_dequant_q4_0(const void *src, float *dst, int n);
void er_gen_dequant_q4_k(const void *src, float *dst, int n);
void er_gen_dequant_q5_k(const void *src, float *dst, int n);
void er_gen_dequant_q6_k(const void *src, float *dst, int n);
void er_gen_dequant_q4_1(const void *src, float *dst, int n);
void er_gen_dequant_q5_0(const void *src, float *dst, int n);
void er_gen_dequant_q5_1(const void *src, float *dst, int n);
void er_gen_dequant_iq4_nl(const void *src, float *dst, int n);
void er_gen_dequant_iq4_xs(const void *src, float *dst, int n);
void er_gen_dequant_q3_k(const void *src, float *dst, int n);
void er_gen_dequant_q2_k(const void *src, float *dst, int n);

void er_gen_quantize_row_q8_0(const float *x, void *dst, int n);
void er_gen_quantize_row_q8_k(const float *x, void *dst, int n);
void er_gen_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
void er_gen_rope(float *x, int n_heads, int head_dim, int pos, float freq_base, int neox);
void er_gen_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox);
void er_gen_softmax(float *x, int n);
void er_gen_silu_mul(float *g, const float *u, int n);
void er_gen_gelu_mul(float *g, const float *u, int n);
void er_gen_shortconv(float *y, const float *bcx, float *ring, const float *w, int n, int lc, int pos);
void er_gen_add(float *y, const float *x, int n);
int32_t er_gen_argmax(const float *x, int n);
void er_gen_attention(float *out, const float *q, const void *k, const void *v, int kv_type,
                      size_t kv_stride, int n_kv, int head_dim, float scale, float *scores);
void er_gen_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                            const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch);
void er_gen_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                            size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch);
void er_gen_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale);
void er_gen_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                           int group, int head_dim);
void er_gen_f32_to_f16(const float *x, er_f16 *y, int n);
void er_gen_f16_to_f32(const er_f16 *x, float *y, int n);

#endif
