/*
 * table_neon.c — the "neon" (baseline armv8-a) and "neon-dotprod" tables.
 * Compiled for the baseline: it only stores addresses, so linking the
 * dotprod library never executes SDOT on a core without it. They differ
 * only in the quantized dots (widening multiplies vs SDOT). Rope stays
 * generic: a few hundred sin/cos per token are not worth a vector version.
 */
#include "neon.h"
#include "../generic/generic.h"

#define NEON_TABLE(tname, p)                                                                                       \
    {                                                                                                              \
        .name = tname,                                                                                             \
        .act_kind = ER_ACT_KINDS,                                                                           \
        .vec_dot = {[ER_W_F32] = er_neon_dot_f32, [ER_W_F16] = er_neon_dot_f16, [ER_W_BF16] = er_neon_dot_bf16,    \
                    [ER_W_Q8_0] = p##_dot_q8_0, [ER_W_Q4_0] = p##_dot_q4_0, [ER_W_Q4_K] = p##_dot_q4_k,            \
                    [ER_W_Q5_K] = p##_dot_q5_k, [ER_W_Q6_K] = p##_dot_q6_k},                                       \
        .matmul = {[ER_W_F32] = er_neon_matmul_f32, [ER_W_F16] = er_neon_matmul_f16,                               \
                   [ER_W_BF16] = er_neon_matmul_bf16, [ER_W_Q8_0] = p##_matmul_q8_0,                               \
                   [ER_W_Q4_0] = p##_matmul_q4_0, [ER_W_Q4_K] = p##_matmul_q4_k, [ER_W_Q5_K] = p##_matmul_q5_k,    \
                   [ER_W_Q6_K] = p##_matmul_q6_k},                                                                 \
        .dequant_row = {[ER_W_F32] = er_gen_dequant_f32, [ER_W_F16] = er_neon_dequant_f16,                         \
                        [ER_W_BF16] = er_neon_dequant_bf16, [ER_W_Q8_0] = er_gen_dequant_q8_0,                     \
                        [ER_W_Q4_0] = er_gen_dequant_q4_0, [ER_W_Q4_K] = er_gen_dequant_q4_k,                      \
                        [ER_W_Q5_K] = er_gen_dequant_q5_k, [ER_W_Q6_K] = er_gen_dequant_q6_k},                     \
        .quantize_row_q8_0 = er_neon_quantize_row_q8_0, .quantize_row_q8_k = er_gen_quantize_row_q8_k,             \
        .rmsnorm = er_neon_rmsnorm, .rope = er_gen_rope, .softmax = er_neon_softmax, .silu_mul = er_neon_silu_mul, \
        .add = er_neon_add, .attention = er_neon_attention, .f32_to_f16 = er_neon_f32_to_f16,                      \
        .f16_to_f32 = er_neon_f16_to_f32,                                                                          \
    }

static const er_kernels k_neon = NEON_TABLE("neon", er_neon);
static const er_kernels k_neondp = NEON_TABLE("neon-dotprod", er_neondp);

const er_kernels *er_kernels_neon(void) { return &k_neon; }
const er_kernels *er_kernels_neon_dotprod(void) { return &k_neondp; }
