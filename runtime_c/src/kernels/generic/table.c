/*
 * table.c — the generic kernel table. Static and const: it is chosen once at
 * open and shared by every model and thread, so it must never be written.
 */
#include "generic.h"

static const er_kernels k_generic = {
    .name = "generic",
    .act_kind = ER_ACT_KINDS,
    .vec_dot = {
        [ER_W_F32] = er_gen_dot_f32,
        [ER_W_F16] = er_gen_dot_f16,
        [ER_W_BF16] = er_gen_dot_bf16,
        [ER_W_Q8_0] = er_gen_dot_q8_0,
        [ER_W_Q4_0] = er_gen_dot_q4_0,
        [ER_W_Q4_K] = er_gen_dot_q4_k,
        [ER_W_Q5_K] = er_gen_dot_q5_k,
        [ER_W_Q6_K] = er_gen_dot_q6_k,
        [ER_W_Q4_1] = er_gen_dot_q4_1,
        [ER_W_Q5_0] = er_gen_dot_q5_0,
        [ER_W_Q5_1] = er_gen_dot_q5_1,
        [ER_W_IQ4_NL] = er_gen_dot_iq4_nl,
        [ER_W_IQ4_XS] = er_gen_dot_iq4_xs,
        [ER_W_Q3_K] = er_gen_dot_q3_k,
        [ER_W_Q2_K] = er_gen_dot_q2_k,
    },
    .matmul = {
        [ER_W_F32] = er_gen_matmul_f32,
        [ER_W_F16] = er_gen_matmul_f16,
        [ER_W_BF16] = er_gen_matmul_bf16,
        [ER_W_Q8_0] = er_gen_matmul_q8_0,
        [ER_W_Q4_0] = er_gen_matmul_q4_0,
        [ER_W_Q4_K] = er_gen_matmul_q4_k,
        [ER_W_Q5_K] = er_gen_matmul_q5_k,
        [ER_W_Q6_K] = er_gen_matmul_q6_k,
        [ER_W_Q4_1] = er_gen_matmul_q4_1,
        [ER_W_Q5_0] = er_gen_matmul_q5_0,
        [ER_W_Q5_1] = er_gen_matmul_q5_1,
        [ER_W_IQ4_NL] = er_gen_matmul_iq4_nl,
        [ER_W_IQ4_XS] = er_gen_matmul_iq4_xs,
        [ER_W_Q3_K] = er_gen_matmul_q3_k,
        [ER_W_Q2_K] = er_gen_matmul_q2_k,
    },
    .dequant_row = {
        [ER_W_F32] = er_gen_dequant_f32,
        [ER_W_F16] = er_gen_dequant_f16,
        [ER_W_BF16] = er_gen_dequant_bf16,
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
    .quantize_row_q8_0 = er_gen_quantize_row_q8_0,
    .quantize_row_q8_k = er_gen_quantize_row_q8_k,
    .rmsnorm = er_gen_rmsnorm,
    .rope = er_gen_rope,
    .rope_cs = er_gen_rope_cs,
    .softmax = er_gen_softmax,
    .silu_mul = er_gen_silu_mul,
    .gelu_mul = er_gen_gelu_mul,
    .shortconv = er_gen_shortconv,
    .add = er_gen_add,
    .argmax = er_gen_argmax,
    .attention = er_gen_attention,
    .attention_multi = er_gen_attention_multi,
    .attention_heads = er_gen_attention_heads,
    .attention_scores = er_gen_attention_scores,
    .attention_sums = er_gen_attention_sums,
    .f32_to_f16 = er_gen_f32_to_f16,
    .f16_to_f32 = er_gen_f16_to_f32,
};

const er_kernels *er_kernels_generic(void) { return &k_generic; }

er_family_kernels er_kernels_family(const er_kernels *k) {
    er_family_kernels f = {.gelu_mul = k->gelu_mul ? k->gelu_mul : er_gen_gelu_mul,
                           .shortconv = k->shortconv ? k->shortconv : er_gen_shortconv};
    return f;
}
