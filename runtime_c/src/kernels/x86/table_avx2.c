/*
 * table_avx2.c — the "avx2" and "avx512vnni" kernel tables. Compiled for
 * baseline x86-64 (it only stores addresses), so merely linking the AVX2 or
 * VNNI library never executes an AVX instruction on a CPU without it. The
 * two differ only in the repacked integer matmuls, the row-wise dots of
 * the 32-element types of issue 25 (avx2.h, x86/q32_avx2.c), a decode
 * step's attention walk (x86/attention_avx2.c: 4 query heads of a K/V head
 * at a time in 32 registers, 2 in 16; prefill's copy path and the one-query
 * kernel are avx2's in both), the Q2_K,
 * Q3_K and IQ4_XS kernels (x86/qk23_avx2.c, repack_qk23_avx2.c: the
 * VNNI build takes their 16-row slots as 512-bit vectors), and in the
 * layouts of Q4_0, Q4_K, Q5_K, Q6_K, Q8_0, Q5_0, IQ4_NL, Q4_1 and Q5_1
 * (8 rows per record, 16 for avx512vnni's 512-bit kernels:
 * x86/repack_avx2.c, x86/repack_q4_k_q5_k_x16_avx512.c,
 * x86/repack_q6_k_x16_avx512.c, x86/repack_q8_0_x16_avx512.c,
 * x86/repack_q32_x16_avx512.c) and of Q2_K (16 rows in both, its codes
 * regrouped for avx512vnni's VPDPWSSD: x86/repack_qk23_avx2.c); every
 * result is bit-identical between them (the same exact integer sums, the
 * same float order). rope (angles computed inside) stays generic: the
 * forward pass uses rope_cs, whose angles come precomputed.
 */
#include "avx2.h"
#include "../generic/generic.h"

/* p: the prefix of the functions that differ between the tables (er_avx2,
 * er_avx512vnni); rows: the rows per record of the layouts that the
 * avx512vnni table widens to 512-bit vectors (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K,
 * Q5_0, IQ4_NL, Q4_1 and Q5_1: 8 for avx2, 16 for avx512vnni), and x their
 * repacked matmuls' name suffix (x8, x16). Q3_K, Q2_K and IQ4_XS have 16
 * rows in both; Q2_K's repacking is p's (its codes regrouped for
 * VPDPWSSD), Q3_K's and IQ4_XS's the same function in both. */
#define AVX2_TABLE(tname, p, rows, x)                                                                                 \
    {                                                                                                                 \
        .name = tname,                                                                                                \
        .act_kind = ER_ACT_KINDS,                                                                                     \
        .vec_dot = {                                                                                                  \
            [ER_W_F32] = er_avx2_dot_f32,                                                                             \
            [ER_W_F16] = er_avx2_dot_f16,                                                                             \
            [ER_W_BF16] = er_avx2_dot_bf16,                                                                           \
            [ER_W_Q8_0] = er_avx2_dot_q8_0,                                                                           \
            [ER_W_Q4_0] = er_avx2_dot_q4_0,                                                                           \
            [ER_W_Q4_K] = er_avx2_dot_q4_k,                                                                           \
            [ER_W_Q5_K] = er_avx2_dot_q5_k,                                                                           \
            [ER_W_Q6_K] = er_avx2_dot_q6_k,                                                                           \
            [ER_W_Q4_1] = p##_dot_q4_1,                                                                               \
            [ER_W_Q5_0] = p##_dot_q5_0,                                                                               \
            [ER_W_Q5_1] = p##_dot_q5_1,                                                                               \
            [ER_W_IQ4_NL] = p##_dot_iq4_nl,                                                                           \
            [ER_W_IQ4_XS] = p##_dot_iq4_xs,                                                                           \
            [ER_W_Q3_K] = p##_dot_q3_k,                                                                               \
            [ER_W_Q2_K] = p##_dot_q2_k,                                                                               \
        },                                                                                                            \
        .matmul = {                                                                                                   \
            [ER_W_F32] = er_avx2_matmul_f32,                                                                          \
            [ER_W_F16] = er_avx2_matmul_f16,                                                                          \
            [ER_W_BF16] = er_avx2_matmul_bf16,                                                                        \
            [ER_W_Q8_0] = er_avx2_matmul_q8_0,                                                                        \
            [ER_W_Q4_0] = er_avx2_matmul_q4_0,                                                                        \
            [ER_W_Q4_K] = er_avx2_matmul_q4_k,                                                                        \
            [ER_W_Q5_K] = er_avx2_matmul_q5_k,                                                                        \
            [ER_W_Q6_K] = er_avx2_matmul_q6_k,                                                                        \
            [ER_W_Q4_1] = p##_matmul_q4_1,                                                                            \
            [ER_W_Q5_0] = p##_matmul_q5_0,                                                                            \
            [ER_W_Q5_1] = p##_matmul_q5_1,                                                                            \
            [ER_W_IQ4_NL] = p##_matmul_iq4_nl,                                                                        \
            [ER_W_IQ4_XS] = p##_matmul_iq4_xs,                                                                        \
            [ER_W_Q3_K] = p##_matmul_q3_k,                                                                            \
            [ER_W_Q2_K] = p##_matmul_q2_k,                                                                            \
        },                                                                                                            \
        .dequant_row = {                                                                                              \
            [ER_W_F32] = er_gen_dequant_f32,                                                                          \
            [ER_W_F16] = er_avx2_dequant_f16,                                                                         \
            [ER_W_BF16] = er_gen_dequant_bf16,                                                                        \
            [ER_W_Q8_0] = er_gen_dequant_q8_0,                                                                        \
            [ER_W_Q4_0] = er_gen_dequant_q4_0,                                                                        \
            [ER_W_Q4_K] = er_gen_dequant_q4_k,                                                                        \
            [ER_W_Q5_K] = er_gen_dequant_q5_k,                                                                        \
            [ER_W_Q6_K] = er_gen_dequant_q6_k,                                                                        \
            [ER_W_Q4_1] = er_gen_dequant_q4_1,                                                                        \
            [ER_W_Q5_0] = er_gen_dequant_q5_0,                                                                        \
            [ER_W_Q5_1] = er_gen_dequant_q5_1,                                                                        \
            [ER_W_IQ4_NL] = er_gen_dequant_iq4_nl,                                                                    \
            [ER_W_IQ4_XS] = er_gen_dequant_iq4_xs,                                                                    \
            [ER_W_Q3_K] = er_gen_dequant_q3_k,                                                                        \
            [ER_W_Q2_K] = er_gen_dequant_q2_k,                                                                        \
        },                                                                                                            \
        .quantize_row_q8_0 = er_avx2_quantize_row_q8_0,                                                               \
        .quantize_row_q8_k = er_avx2_quantize_row_q8_k,                                                               \
        .rmsnorm = er_avx2_rmsnorm,                                                                                   \
        .rope = er_gen_rope,                                                                                          \
        .rope_cs = er_avx2_rope_cs,                                                                                   \
        .softmax = er_avx2_softmax,                                                                                   \
        .silu_mul = er_avx2_silu_mul,                                                                                 \
        .gelu_mul = er_avx2_gelu_mul,                                                                                 \
        .add = er_avx2_add,                                                                                           \
        .argmax = er_avx2_argmax,                                                                                     \
        .attention = er_avx2_attention,                                                                               \
        .attention_multi = er_avx2_attention_multi,                                                                   \
        .attention_heads = p##_attention_heads,                                                                       \
        .attention_scores = p##_attention_scores,                                                                     \
        .attention_sums = p##_attention_sums,                                                                         \
        .f32_to_f16 = er_avx2_f32_to_f16,                                                                             \
        .f16_to_f32 = er_avx2_f16_to_f32,                                                                             \
        /* 8- and 16-row interleaved layouts: kernels/x86/repack_*.c say why each pays */                             \
        .repack_rows = {[ER_W_Q8_0] = rows, [ER_W_Q4_0] = rows, [ER_W_Q4_K] = rows, [ER_W_Q5_K] = rows,               \
                        [ER_W_Q6_K] = rows, [ER_W_Q5_0] = rows, [ER_W_IQ4_NL] = rows, [ER_W_Q4_1] = rows,             \
                        [ER_W_Q5_1] = rows, [ER_W_Q3_K] = 16, [ER_W_Q2_K] = 16, [ER_W_IQ4_XS] = 16},                  \
        .repack = {[ER_W_Q8_0] = p##_repack_q8_0, [ER_W_Q4_0] = p##_repack_q4_0,                                      \
                   [ER_W_Q4_K] = p##_repack_q4_k, [ER_W_Q5_K] = p##_repack_q5_k,                                      \
                   [ER_W_Q6_K] = p##_repack_q6_k, [ER_W_Q5_0] = p##_repack_q5_0,                                      \
                   [ER_W_IQ4_NL] = p##_repack_iq4_nl, [ER_W_Q4_1] = p##_repack_q4_1,                                  \
                   [ER_W_Q5_1] = p##_repack_q5_1, [ER_W_Q3_K] = er_avx2_repack_q3_k,                                  \
                   [ER_W_Q2_K] = p##_repack_q2_k, [ER_W_IQ4_XS] = er_avx2_repack_iq4_xs},                             \
        .matmul_repacked = {[ER_W_Q8_0] = p##_matmul_q8_0##x, [ER_W_Q4_0] = p##_matmul_q4_0##x,                       \
                            [ER_W_Q4_K] = p##_matmul_q4_k##x, [ER_W_Q5_K] = p##_matmul_q5_k##x,                       \
                            [ER_W_Q6_K] = p##_matmul_q6_k##x, [ER_W_Q5_0] = p##_matmul_q5_0##x,                       \
                            [ER_W_IQ4_NL] = p##_matmul_iq4_nl##x, [ER_W_Q4_1] = p##_matmul_q4_1##x,                   \
                            [ER_W_Q5_1] = p##_matmul_q5_1##x, [ER_W_Q3_K] = p##_matmul_q3_kx16,                       \
                            [ER_W_Q2_K] = p##_matmul_q2_kx16, [ER_W_IQ4_XS] = p##_matmul_iq4_xsx16},                  \
    }

static const er_kernels k_avx2 = AVX2_TABLE("avx2", er_avx2, 8, x8);
static const er_kernels k_avx512vnni = AVX2_TABLE("avx512vnni", er_avx512vnni, 16, x16);

const er_kernels *er_kernels_avx2(void) { return &k_avx2; }
const er_kernels *er_kernels_avx512vnni(void) { return &k_avx512vnni; }
