/*
 * matmul.c — the generic matrix product: vec_dot over weight rows [r0, r1)
 * and batch rows [0, m).
 *
 * Weight row outermost: each weight row is read once from memory and reused
 * for all m activation rows while it is still in cache — weights dominate
 * the traffic in decode and prefill alike.
 */
#include "generic.h"

typedef float (*dot_fn)(int n, const void *w_row, const void *x_row);

static inline void matmul_with(const er_matmul_args *a, dot_fn dot) {
    const unsigned char *w = a->w;
    const unsigned char *x = a->x;
    for (int r = a->r0; r < a->r1; r++) {
        const void *wr = w + (size_t)r * a->w_row_bytes;
        for (int b = 0; b < a->m; b++)
            a->y[(size_t)b * a->y_stride + (size_t)r] = dot(a->n, wr, x + (size_t)b * a->x_stride);
    }
}

/* One wrapper per type so each inner call is direct and can be inlined. */
void er_gen_matmul_f32(const er_matmul_args *a) { matmul_with(a, er_gen_dot_f32); }
void er_gen_matmul_f16(const er_matmul_args *a) { matmul_with(a, er_gen_dot_f16); }
void er_gen_matmul_bf16(const er_matmul_args *a) { matmul_with(a, er_gen_dot_bf16); }
void er_gen_matmul_q8_0(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q8_0); }
void er_gen_matmul_q4_0(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q4_0); }
void er_gen_matmul_q4_k(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q4_k); }
void er_gen_matmul_q5_k(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q5_k); }
void er_gen_matmul_q6_k(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q6_k); }
void er_gen_matmul_q4_1(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q4_1); }
void er_gen_matmul_q5_0(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q5_0); }
void er_gen_matmul_q5_1(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q5_1); }
void er_gen_matmul_iq4_nl(const er_matmul_args *a) { matmul_with(a, er_gen_dot_iq4_nl); }
void er_gen_matmul_iq4_xs(const er_matmul_args *a) { matmul_with(a, er_gen_dot_iq4_xs); }
void er_gen_matmul_q3_k(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q3_k); }
void er_gen_matmul_q2_k(const er_matmul_args *a) { matmul_with(a, er_gen_dot_q2_k); }
