/*
 * table_neon.c — the "neon" (baseline armv8-a), "neon-dotprod" and
 * "neon-i8mm" tables. Compiled for the baseline: it only stores addresses,
 * so linking the dotprod or i8mm library never executes SDOT or SMMLA on a
 * core without it. They differ only in the quantized dots (widening
 * multiplies vs SDOT) and, for neon-i8mm, in the prefill of the repacked
 * types (SMMLA: Q8_0, Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1 in i8mm_neon.c; Q4_K,
 * Q5_K, Q6_K in i8mm_kq_neon.c; its Q2_K, Q3_K and IQ4_XS layouts take the
 * SDOT kernels). rope (angles computed inside) stays generic: the forward
 * pass uses rope_cs, whose angles come precomputed.
 *
 * No table does half-precision arithmetic (+fp16), though dispatch detects
 * fphp/asimdhp: every half here is a weight or KV value meeting a float
 * activation, and FCVTL/FCVTN (baseline NEON) convert exactly, where FP16
 * FMLA would round each product and running sum to 11 bits and change the
 * logits per core. FMLAL (FEAT_FHM) keeps products exact but wants both
 * operands in half precision, and the Cortex-A76 boards lack it.
 *
 * neon-i8mm is its own table rather than a branch inside neon-dotprod: a
 * table's entries are fixed addresses chosen once (no per-call feature
 * test), EDGERUN_ISA=neon-dotprod still runs and tests the SDOT prefill on
 * an i8mm core, and the tests compare each table with generic separately.
 */
#include "neon.h"
#include "repack_neon.h"
#include "repack_k23_neon.h"
#include "../generic/generic.h"

/* the types of issue 25 (q_more_neon.c; dequantizers generic) */
#define NEON_NEW_DOTS(p) \
    [ER_W_Q4_1] = p##_dot_q4_1, \
    [ER_W_Q5_0] = p##_dot_q5_0, \
    [ER_W_Q5_1] = p##_dot_q5_1, \
    [ER_W_IQ4_NL] = p##_dot_iq4_nl, \
    [ER_W_IQ4_XS] = p##_dot_iq4_xs, \
    [ER_W_Q3_K] = p##_dot_q3_k, \
    [ER_W_Q2_K] = p##_dot_q2_k
#define NEON_NEW_MATMULS(p) \
    [ER_W_Q4_1] = p##_matmul_q4_1, \
    [ER_W_Q5_0] = p##_matmul_q5_0, \
    [ER_W_Q5_1] = p##_matmul_q5_1, \
    [ER_W_IQ4_NL] = p##_matmul_iq4_nl, \
    [ER_W_IQ4_XS] = p##_matmul_iq4_xs, \
    [ER_W_Q3_K] = p##_matmul_q3_k, \
    [ER_W_Q2_K] = p##_matmul_q2_k
#define NEW_DEQUANTS \
    [ER_W_Q4_1] = er_gen_dequant_q4_1, \
    [ER_W_Q5_0] = er_gen_dequant_q5_0, \
    [ER_W_Q5_1] = er_gen_dequant_q5_1, \
    [ER_W_IQ4_NL] = er_gen_dequant_iq4_nl, \
    [ER_W_IQ4_XS] = er_gen_dequant_iq4_xs, \
    [ER_W_Q3_K] = er_gen_dequant_q3_k, \
    [ER_W_Q2_K] = er_gen_dequant_q2_k

/* IQ4_XS's 4-row layout: SDOT tables only (xs 1; repack_iq4_xs_neon.c
 * says why the widening twin does not pay) */
#define NEON_XS_ROWS_0
#define NEON_XS_ROWS_1 , [ER_W_IQ4_XS] = 4
#define NEON_XS_REPACK_0
#define NEON_XS_REPACK_1 , [ER_W_IQ4_XS] = er_neon_repack_iq4_xs
#define NEON_XS_MATMUL_0(p)
#define NEON_XS_MATMUL_1(p) , [ER_W_IQ4_XS] = p##_matmul_iq4_xsx4

/* p: the dots' prefix; mm: the repacked types' matmuls' (SMMLA prefill
 * for neon-i8mm); xs: 1 where IQ4_XS has its layout */
#define NEON_TABLE(tname, p, mm, xs)                                                                           \
    {                                                                                                              \
        .name = tname,                                                                                             \
        .act_kind = ER_ACT_KINDS,                                                                           \
        .vec_dot = {[ER_W_F32] = er_neon_dot_f32, [ER_W_F16] = er_neon_dot_f16, [ER_W_BF16] = er_neon_dot_bf16,    \
                    [ER_W_Q8_0] = p##_dot_q8_0, [ER_W_Q4_0] = p##_dot_q4_0, [ER_W_Q4_K] = p##_dot_q4_k,            \
                    [ER_W_Q5_K] = p##_dot_q5_k, [ER_W_Q6_K] = p##_dot_q6_k, NEON_NEW_DOTS(p)},                        \
        .matmul = {[ER_W_F32] = er_neon_matmul_f32, [ER_W_F16] = er_neon_matmul_f16,                               \
                   [ER_W_BF16] = er_neon_matmul_bf16, [ER_W_Q8_0] = p##_matmul_q8_0,                               \
                   [ER_W_Q4_0] = p##_matmul_q4_0, [ER_W_Q4_K] = p##_matmul_q4_k, [ER_W_Q5_K] = p##_matmul_q5_k,    \
                   [ER_W_Q6_K] = p##_matmul_q6_k, NEON_NEW_MATMULS(p)},                                               \
        .dequant_row = {[ER_W_F32] = er_gen_dequant_f32, [ER_W_F16] = er_neon_dequant_f16,                         \
                        [ER_W_BF16] = er_neon_dequant_bf16, [ER_W_Q8_0] = er_gen_dequant_q8_0,                     \
                        [ER_W_Q4_0] = er_gen_dequant_q4_0, [ER_W_Q4_K] = er_gen_dequant_q4_k,                      \
                        [ER_W_Q5_K] = er_gen_dequant_q5_k, [ER_W_Q6_K] = er_gen_dequant_q6_k, NEW_DEQUANTS},       \
        .quantize_row_q8_0 = er_neon_quantize_row_q8_0, .quantize_row_q8_k = er_neon_quantize_row_q8_k,            \
        .rmsnorm = er_neon_rmsnorm, .rope = er_gen_rope, .softmax = er_neon_softmax, .silu_mul = er_neon_silu_mul, \
        .rope_cs = er_neon_rope_cs, .gelu_mul = er_neon_gelu_mul,\
        .add = er_neon_add, .argmax = er_neon_argmax,                                                              \
        .attention = er_neon_attention, .attention_multi = er_neon_attention_multi,                                \
        .attention_heads = er_neon_attention_heads,                                                                \
        .attention_scores = er_neon_attention_scores,                                                              \
        .attention_sums = er_neon_attention_sums,                                                                  \
        .f32_to_f16 = er_neon_f32_to_f16,                                                                          \
        .f16_to_f32 = er_neon_f16_to_f32,                                                                          \
        /* 4-row interleaved layouts: kernels/neon/repack_neon.h says why */                                       \
        .repack_rows = {[ER_W_Q8_0] = 4, [ER_W_Q4_0] = 4, [ER_W_Q4_K] = 4, [ER_W_Q5_K] = 4, [ER_W_Q6_K] = 4,      \
                        [ER_W_IQ4_NL] = 4, [ER_W_Q4_1] = 4, [ER_W_Q5_0] = 4, [ER_W_Q5_1] = 4,                      \
                        [ER_W_Q2_K] = 4, [ER_W_Q3_K] = 4 NEON_XS_ROWS_##xs},                                      \
        .repack = {[ER_W_Q8_0] = er_neon_repack_q8_0, [ER_W_Q4_0] = er_neon_repack_q4_0,                           \
                   [ER_W_Q4_K] = er_neon_repack_q4_k, [ER_W_Q5_K] = er_neon_repack_q5_k,                           \
                   [ER_W_Q6_K] = er_neon_repack_q6_k, [ER_W_IQ4_NL] = er_neon_repack_iq4_nl,                       \
                   [ER_W_Q4_1] = er_neon_repack_q4_1, [ER_W_Q5_0] = er_neon_repack_q5_0,                           \
                   [ER_W_Q5_1] = er_neon_repack_q5_1, [ER_W_Q2_K] = er_neon_repack_q2_k,                           \
                   [ER_W_Q3_K] = er_neon_repack_q3_k NEON_XS_REPACK_##xs},                                         \
        .matmul_repacked = {[ER_W_Q8_0] = mm##_matmul_q8_0x4, [ER_W_Q4_0] = mm##_matmul_q4_0x4,                   \
                            [ER_W_Q4_K] = mm##_matmul_q4_kx4, [ER_W_Q5_K] = mm##_matmul_q5_kx4,                    \
                            [ER_W_Q6_K] = mm##_matmul_q6_kx4, [ER_W_IQ4_NL] = mm##_matmul_iq4_nlx4,                 \
                            [ER_W_Q4_1] = mm##_matmul_q4_1x4, [ER_W_Q5_0] = mm##_matmul_q5_0x4,                    \
                            [ER_W_Q5_1] = mm##_matmul_q5_1x4, [ER_W_Q2_K] = p##_matmul_q2_kx4,                     \
                            [ER_W_Q3_K] = p##_matmul_q3_kx4 NEON_XS_MATMUL_##xs(p)},                               \
    }

static const er_kernels k_neon = NEON_TABLE("neon", er_neon, er_neon, 0);
static const er_kernels k_neondp = NEON_TABLE("neon-dotprod", er_neondp, er_neondp, 1);
static const er_kernels k_neoni8 = NEON_TABLE("neon-i8mm", er_neondp, er_neoni8, 1);

const er_kernels *er_kernels_neon(void) { return &k_neon; }
const er_kernels *er_kernels_neon_dotprod(void) { return &k_neondp; }
const er_kernels *er_kernels_neon_i8mm(void) { return &k_neoni8; }
