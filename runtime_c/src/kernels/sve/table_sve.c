/*
 * table_sve.c — the "sve" table: SVE dots and matmuls, NEON element-wise
 * kernels (every SVE core has NEON; those kernels are streaming and gain
 * nothing from longer vectors at these sizes). Compiled for the baseline: it
 * only stores addresses.
 *
 * Repacked layouts for Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, the 32-element
 * fallbacks and Q2_K, Q3_K, IQ4_XS with G = svcntw()
 * rows per group (repack_sve.h). G is the one thing in this table that
 * depends on the vector length, so repack_rows is filled once at first use,
 * on a core that has SVE (dispatch.c asks for the table only there). This table is chosen
 * automatically only at 256 bits or more; at 128 bits neon-dotprod /
 * neon-i8mm (the same layouts at G = 4, and SMMLA prefill) win the choice.
 */
#include <pthread.h>

#include "sve.h"
#include "../neon/neon.h"
#include "../generic/generic.h"

static er_kernels k_sve = {
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
        [ER_W_Q4_1] = er_sve_dot_q4_1,
        [ER_W_Q5_0] = er_sve_dot_q5_0,
        [ER_W_Q5_1] = er_sve_dot_q5_1,
        [ER_W_IQ4_NL] = er_sve_dot_iq4_nl,
        [ER_W_IQ4_XS] = er_sve_dot_iq4_xs,
        [ER_W_Q3_K] = er_sve_dot_q3_k,
        [ER_W_Q2_K] = er_sve_dot_q2_k,
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
        [ER_W_Q4_1] = er_sve_matmul_q4_1,
        [ER_W_Q5_0] = er_sve_matmul_q5_0,
        [ER_W_Q5_1] = er_sve_matmul_q5_1,
        [ER_W_IQ4_NL] = er_sve_matmul_iq4_nl,
        [ER_W_IQ4_XS] = er_sve_matmul_iq4_xs,
        [ER_W_Q3_K] = er_sve_matmul_q3_k,
        [ER_W_Q2_K] = er_sve_matmul_q2_k,
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
        [ER_W_Q4_1] = er_gen_dequant_q4_1,
        [ER_W_Q5_0] = er_gen_dequant_q5_0,
        [ER_W_Q5_1] = er_gen_dequant_q5_1,
        [ER_W_IQ4_NL] = er_gen_dequant_iq4_nl,
        [ER_W_IQ4_XS] = er_gen_dequant_iq4_xs,
        [ER_W_Q3_K] = er_gen_dequant_q3_k,
        [ER_W_Q2_K] = er_gen_dequant_q2_k,
    },
    .quantize_row_q8_0 = er_neon_quantize_row_q8_0,
    .quantize_row_q8_k = er_neon_quantize_row_q8_k,
    .rmsnorm = er_neon_rmsnorm,
    .rope = er_gen_rope,
    .rope_cs = er_neon_rope_cs, /* NEON, like the other element-wise kernels */
    .softmax = er_neon_softmax,
    .silu_mul = er_neon_silu_mul,
    .gelu_mul = er_neon_gelu_mul,
    .add = er_neon_add,
    .argmax = er_neon_argmax,
    .attention = er_neon_attention,
    .attention_multi = er_neon_attention_multi,
    .attention_heads = er_neon_attention_heads,
    .attention_scores = er_neon_attention_scores,
    .attention_sums = er_neon_attention_sums,
    .f32_to_f16 = er_neon_f32_to_f16,
    .f16_to_f32 = er_neon_f16_to_f32,
    /* repack_rows (G) is set by fill_rows */
    .repack = {[ER_W_Q8_0] = er_sve_repack_q8_0, [ER_W_Q4_0] = er_sve_repack_q4_0, [ER_W_Q4_K] = er_sve_repack_q4_k,
               [ER_W_Q5_K] = er_sve_repack_q5_k, [ER_W_Q6_K] = er_sve_repack_q6_k,
               [ER_W_IQ4_NL] = er_sve_repack_iq4_nl, [ER_W_Q4_1] = er_sve_repack_q4_1,
               [ER_W_Q5_0] = er_sve_repack_q5_0, [ER_W_Q5_1] = er_sve_repack_q5_1,
               [ER_W_Q2_K] = er_sve_repack_q2_k, [ER_W_Q3_K] = er_sve_repack_q3_k,
               [ER_W_IQ4_XS] = er_sve_repack_iq4_xs},
    .matmul_repacked = {[ER_W_Q8_0] = er_sve_matmul_q8_0xg, [ER_W_Q4_0] = er_sve_matmul_q4_0xg,
                        [ER_W_Q4_K] = er_sve_matmul_q4_kxg, [ER_W_Q5_K] = er_sve_matmul_q5_kxg,
                        [ER_W_Q6_K] = er_sve_matmul_q6_kxg, [ER_W_IQ4_NL] = er_sve_matmul_iq4_nlxg,
                        [ER_W_Q4_1] = er_sve_matmul_q4_1xg, [ER_W_Q5_0] = er_sve_matmul_q5_0xg,
                        [ER_W_Q5_1] = er_sve_matmul_q5_1xg, [ER_W_Q2_K] = er_sve_matmul_q2_kxg,
                        [ER_W_Q3_K] = er_sve_matmul_q3_kxg, [ER_W_IQ4_XS] = er_sve_matmul_iq4_xsxg},
};

static pthread_once_t s_once = PTHREAD_ONCE_INIT;

/* Written once, before any caller sees the table: concurrent first calls
 * wait in pthread_once, so no reader finds it half filled. */
static void fill_rows(void) {
    const int G = er_sve_group_rows();
    for (int t = 0; t < ER_W_COUNT; t++)
        if (k_sve.repack[t]) k_sve.repack_rows[t] = G;
}

const er_kernels *er_kernels_sve(void) {
    pthread_once(&s_once, fill_rows);
    return &k_sve;
}
