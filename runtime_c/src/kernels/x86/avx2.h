/*
 * avx2.h — the AVX2+FMA+F16C kernels (internal).
 *
 * The .c files beside this one are compiled with -mavx2 -mfma -mf16c into a
 * separate static library, so their instructions exist only in functions the
 * dispatcher reaches after cpuid and XCR0 said the CPU and OS support them.
 * table_avx2.c (the table itself) is compiled for baseline x86-64 and only
 * takes these functions' addresses. Include this header only from files
 * built with those flags: its inline helpers use AVX2 intrinsics.
 *
 * A few of them (repack_avx2.c, q32_avx2.c, qk23_avx2.c,
 * repack_qk23_avx2.c, attention_avx2.c) are compiled a second time with
 * -DER_X86_VNNI=1 and the AVX-512 VL/BW/VNNI flags, as the "avx512vnni" table's
 * er_avx512vnni_* functions: their int8 dot products taking VPDPBUSD (four
 * u8 x s8 products summed into each int32 lane, exact, no int16 step), and
 * every body free to use the 16 further ymm registers of AVX-512VL.
 * qk23_avx2.c (Q2_K, Q3_K, IQ4_XS) is built both ways too: its matmul's 8
 * activation rows per tile give VPDPWSSD 8 independent chains, and Q2_K's
 * code * scale fits a byte for VPDPBUSD; their repacked kernels
 * (repack_qk23_avx2.c) take 512-bit vectors there, on a 16-row layout both
 * tables share. Q4_0, Q4_K, Q5_K, Q6_K, Q8_0 and the 32-element types
 * Q5_0, IQ4_NL, Q4_1 and Q5_1 have layouts of their own there, 16 rows per
 * record for 512-bit vectors (repack_avx2.c; repack_q4_k_q5_k_x16_avx512.c,
 * repack_q6_k_x16_avx512.c, repack_q8_0_x16_avx512.c and
 * repack_q32_x16_avx512.c, built only for that table; their 8-row
 * repack_q8_0_avx2.c and repack_q32_avx2.c only for avx2). ER_X86_FN names
 * a function of the variant being compiled.
 */
#ifndef ER_KERNELS_AVX2_H
#define ER_KERNELS_AVX2_H

#include <string.h>

#include "../kernels.h"

#ifndef ER_X86_VNNI
#define ER_X86_VNNI 0
#endif
#if ER_X86_VNNI
#define ER_X86_FN(name) er_avx512vnni_##name
#else
#define ER_X86_FN(name) er_avx2_##name
#endif

#if defined(__AVX2__)
#include <immintrin.h>

static inline float er_avx2_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t er_avx2_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Signed int8 x signed int8 products summed in pairs to int16, via the
 * unsigned x signed maddubs: |a| * (b with a's sign). No saturation while
 * |a| <= 128 and |b| <= 127 (2 * 128 * 127 < 32767); Q8 activations never
 * hold -128. */
static inline __m256i er_avx2_mul_i8_pairs(__m256i a, __m256i b) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/* The sum of 32 signed int8 products as eight int32 partial sums. */
static inline __m256i er_avx2_dot_i8(__m256i a, __m256i b) {
    return _mm256_madd_epi16(er_avx2_mul_i8_pairs(a, b), _mm256_set1_epi16(1));
}

/* acc + in each int32 lane the sum of its four u8 x s8 products, exactly
 * where maddubs does not saturate its int16 pairs (callers keep |pair| <=
 * 32767; VPDPBUSD never saturates). */
static inline __m256i er_x86_dot4_acc(__m256i acc, __m256i u, __m256i s) {
#if ER_X86_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

#if ER_X86_VNNI
/* acc + VPDPBUSD of u (unsigned bytes) with the 4 signed bytes at p in every
 * lane, the broadcast embedded in the instruction ({1to8}): one instruction
 * where a separate broadcast load made two, on the decode kernels' hottest
 * line (Q4_0 from cache 52 -> 58 GB/s on this project's Zen 4 VM). clang
 * folds the broadcast by itself; gcc 12 does not, hence the asm. */
static inline __m256i er_x86_dpbusd_bcast4(__m256i acc, __m256i u, const int8_t *p) {
#if defined(__clang__)
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_dpbusd_epi32(acc, u, _mm256_set1_epi32(v));
#else
    __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)(const void *)p));
    return acc;
#endif
}

/* er_x86_dpbusd_bcast4 on 512-bit vectors ({1to16}): the kernels that take
 * two row groups per instruction (repack_avx2.c's group_tile16) */
static inline __m512i er_x86_dpbusd512_bcast4(__m512i acc, __m512i u, const int8_t *p) {
#if defined(__clang__)
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(v));
#else
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)(const void *)p));
    return acc;
#endif
}
#endif

#endif

float er_avx2_dot_f32(int n, const void *w_row, const void *x_row);
float er_avx2_dot_f16(int n, const void *w_row, const void *x_row);
float er_avx2_dot_bf16(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q8_0(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q4_0(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q4_k(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q5_k(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q6_k(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q4_1(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q5_0(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q5_1(int n, const void *w_row, const void *x_row);
float er_avx2_dot_iq4_nl(int n, const void *w_row, const void *x_row);
float er_avx2_dot_iq4_xs(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q3_k(int n, const void *w_row, const void *x_row);
float er_avx2_dot_q2_k(int n, const void *w_row, const void *x_row);

void er_avx2_matmul_f32(const er_matmul_args *a);
void er_avx2_matmul_f16(const er_matmul_args *a);
void er_avx2_matmul_bf16(const er_matmul_args *a);
void er_avx2_matmul_q8_0(const er_matmul_args *a);
void er_avx2_matmul_q4_0(const er_matmul_args *a);
void er_avx2_matmul_q4_k(const er_matmul_args *a);
void er_avx2_matmul_q5_k(const er_matmul_args *a);
void er_avx2_matmul_q6_k(const er_matmul_args *a);
void er_avx2_matmul_q4_1(const er_matmul_args *a);
void er_avx2_matmul_q5_0(const er_matmul_args *a);
void er_avx2_matmul_q5_1(const er_matmul_args *a);
void er_avx2_matmul_iq4_nl(const er_matmul_args *a);
void er_avx2_matmul_iq4_xs(const er_matmul_args *a);
void er_avx2_matmul_q3_k(const er_matmul_args *a);
void er_avx2_matmul_q2_k(const er_matmul_args *a);

void er_avx2_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
/* The Q4_0 and Q8_0 8-row layout, for blocks of an f16 scale followed by
 * qs_bytes of quants: per group of 8 rows and block index, the 8 scales,
 * then slice c (bytes 4c..4c+3) of each row's quants side by side, rows
 * 0..7, for every slice c. Same bytes as the 8 source blocks. */
void er_avx2_interleave_x8(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int qs_bytes);
void er_avx2_matmul_q4_0x8(const er_matmul_args *a);
void er_avx2_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q4_kx8(const er_matmul_args *a);
void er_avx2_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q5_kx8(const er_matmul_args *a);
void er_avx2_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q6_kx8(const er_matmul_args *a);
void er_avx2_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q8_0x8(const er_matmul_args *a);
void er_avx2_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q5_0x8(const er_matmul_args *a);
void er_avx2_matmul_iq4_nlx8(const er_matmul_args *a);
void er_avx2_matmul_q4_1x8(const er_matmul_args *a);
void er_avx2_matmul_q5_1x8(const er_matmul_args *a);
/* Q3_K, Q2_K and IQ4_XS in 16-row records (repack_qk23_avx2.c) */
void er_avx2_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx2_matmul_q3_kx16(const er_matmul_args *a);
void er_avx2_matmul_q2_kx16(const er_matmul_args *a);
void er_avx2_matmul_iq4_xsx16(const er_matmul_args *a);
/* the same repacked kernels built with AVX-512 VL/BW/VNNI (ER_X86_VNNI builds) */
void er_avx512vnni_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q4_0x16(const er_matmul_args *a);
/* Q2_K's own layout in the avx512vnni table (repack_qk23_avx2.c) */
void er_avx512vnni_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
/* Q6_K's 16-row layout of the avx512vnni table (repack_q6_k_x16_avx512.c) */
void er_avx512vnni_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q6_kx16(const er_matmul_args *a);
/* Q4_K's and Q5_K's 16-row layouts of the avx512vnni table (repack_q4_k_q5_k_x16_avx512.c) */
void er_avx512vnni_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q4_kx16(const er_matmul_args *a);
void er_avx512vnni_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q5_kx16(const er_matmul_args *a);
void er_avx512vnni_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q8_0x16(const er_matmul_args *a);
/* Q5_0's, IQ4_NL's, Q4_1's and Q5_1's 16-row layouts of the avx512vnni table (repack_q32_x16_avx512.c) */
void er_avx512vnni_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_avx512vnni_matmul_q5_0x16(const er_matmul_args *a);
void er_avx512vnni_matmul_iq4_nlx16(const er_matmul_args *a);
void er_avx512vnni_matmul_q4_1x16(const er_matmul_args *a);
void er_avx512vnni_matmul_q5_1x16(const er_matmul_args *a);
void er_avx512vnni_matmul_q3_kx16(const er_matmul_args *a);
void er_avx512vnni_matmul_q2_kx16(const er_matmul_args *a);
void er_avx512vnni_matmul_iq4_xsx16(const er_matmul_args *a);
/* q32_avx2.c's VNNI build */
float er_avx512vnni_dot_q4_1(int n, const void *w_row, const void *x_row);
float er_avx512vnni_dot_q5_0(int n, const void *w_row, const void *x_row);
float er_avx512vnni_dot_q5_1(int n, const void *w_row, const void *x_row);
float er_avx512vnni_dot_iq4_nl(int n, const void *w_row, const void *x_row);
void er_avx512vnni_matmul_q4_1(const er_matmul_args *a);
void er_avx512vnni_matmul_q5_0(const er_matmul_args *a);
void er_avx512vnni_matmul_q5_1(const er_matmul_args *a);
void er_avx512vnni_matmul_iq4_nl(const er_matmul_args *a);
/* qk23_avx2.c's VNNI build (the 16 further ymm registers hold a tile) */
float er_avx512vnni_dot_q2_k(int n, const void *w_row, const void *x_row);
float er_avx512vnni_dot_q3_k(int n, const void *w_row, const void *x_row);
float er_avx512vnni_dot_iq4_xs(int n, const void *w_row, const void *x_row);
void er_avx512vnni_matmul_q2_k(const er_matmul_args *a);
void er_avx512vnni_matmul_q3_k(const er_matmul_args *a);
void er_avx512vnni_matmul_iq4_xs(const er_matmul_args *a);

void er_avx2_quantize_row_q8_0(const float *x, void *dst, int n);
void er_avx2_quantize_row_q8_k(const float *x, void *dst, int n);
void er_avx2_rmsnorm(float *y, const float *x, const float *w, int n, float eps);
void er_avx2_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox);
void er_avx2_softmax(float *x, int n);
void er_avx2_silu_mul(float *g, const float *u, int n);
void er_avx2_gelu_mul(float *g, const float *u, int n);
void er_avx2_add(float *y, const float *x, int n);
int32_t er_avx2_argmax(const float *x, int n);
void er_avx2_attention(float *out, const float *q, const void *k, const void *v, int kv_type, size_t kv_stride,
                       int n_kv, int head_dim, float scale, float *scores);
void er_avx2_attention_multi(float *const *out, const float *const *q, const int *n_kv, int nq, const void *k,
                             const void *v, int kv_type, size_t kv_stride, int head_dim, float scale, float *scratch);
void er_avx2_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                             size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch);
void er_avx2_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                              size_t kv_stride, int nkv, int group, int head_dim, float scale);
void er_avx2_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride, int nkv,
                            int group, int head_dim);
/* attention_avx2.c's VNNI build: a decode step's walk, 4 query heads of a K/V head in 32 registers */
void er_avx512vnni_attention_heads(float *out, const float *q, int n_kv, const void *k, const void *v, int kv_type,
                                   size_t kv_stride, int nkv, int group, int head_dim, float scale, float *scratch);
void er_avx512vnni_attention_scores(float *sc, const float *q, int n_kv, int t0, int t1, const void *k, int kv_type,
                                    size_t kv_stride, int nkv, int group, int head_dim, float scale);
void er_avx512vnni_attention_sums(float *out, float *sc, int n_kv, const void *v, int kv_type, size_t kv_stride,
                                  int nkv, int group, int head_dim);
void er_avx2_f32_to_f16(const float *x, er_f16 *y, int n);
void er_avx2_f16_to_f32(const er_f16 *x, float *y, int n);
void er_avx2_dequant_f16(const void *src, float *dst, int n);

#endif
