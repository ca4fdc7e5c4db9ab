/*
 * table_sve.c — the "sve" table: SVE dots and matmuls, NEON element-wise
 * kernels (every SVE core has NEON; those kernels are streaming and gain
 * nothing from longer vectors at these sizes). Compiled for the baseline: it
 * only stores addresses.
 *
 * No repacked layout (repack_rows all 0: the file layout): the NEON layouts
 * (neon/repack_neon.h) put 4 rows in one 128-bit vector, and a layout that
 * suits vector-length-agnostic code would have to interleave VL/32 rows —
 * a layout, and an arena plan, that depend on the machine's vector length.
 * This table is chosen automatically only at 256 bits or more; at 128 bits
 * neon-dotprod / neon-i8mm (with the layouts) win the choice.
 */
#include "sve.h"
#include "../neon/neon.h"
#include "../generic/generic.h"

static const er_kernels k_sve = {
    .name = "sve",
    .act_kind = ER_ACT_KINDS,
    .vec_dot = {
        [ER_W_F32] = er_sve_dot_f32,
        [ER_W_F16] = er_sve_dot_f16,
        [ER_W_BF16] = er_sve_dot_bf16,
        [ER_W_Q8_0] = er_sve_dot_q8_0,
        [ER_W_Q4_0] = er_sve_dot_q4_0,
        [ER_W_Q4_K] = er_sve_dot_q4_k,
        [ER_W_Q5_K] = er_sve_dot_q5_k,
        [ER_W_Q6_K] = er_sve_dot_q6_k,
    },
    .matmul = {
        [ER_W_F32] = er_sve_matmul_f32,
        [ER_W_F16] = er_sve_matmul_f16,
        [ER_W_BF16] = er_sve_matmul_bf16,
        [ER_W_Q8_0] = er_sve_matmul_q8_0,
        [ER_W_Q4_0] = er_sve_matmul_q4_0,
        [ER_W_Q4_K] = er_sve_matmul_q4_k,
        [ER_W_Q5_K] = er_sve_matmul_q5_k,
        [ER_W_Q6_K] = er_sve_matmul_q6_k,
    },
    .dequant_row = {
        [ER_W_F32] = er_gen_dequant_f32,
        [ER_W_F16] = er_neon_dequant_f16,
        [ER_W_BF16] = er_neon_dequant_bf16,
        [ER_W_Q8_0] = er_gen_dequant_q8_0,
        [ER_W_Q4_0] = er_gen_dequant_q4_0,
        [ER_W_Q4_K] = er_gen_dequant_q4_k,
        [ER_W_Q5_K] = er_gen_dequant_q5_k,
        [ER_W_Q6_K] = er_gen_dequant_q6_k,
    },
    .quantize_row_q8_0 = er_neon_quantize_row_q8_0,
    .quantize_row_q8_k = er_gen_quantize_row_q8_k,
    .rmsnorm = er_neon_rmsnorm,
    .rope = er_gen_rope,
    .rope_cs = er_neon_rope_cs, /* NEON, like the other element-wise kernels */
    .softmax = er_neon_softmax,
    .silu_mul = er_neon_silu_mul,
    .add = er_neon_add,
    .attention = er_neon_attention,
    .f32_to_f16 = er_neon_f32_to_f16,
    .f16_to_f32 = er_neon_f16_to_f32,
};

const er_kernels *er_kernels_sve(void) { return &k_sve; }
