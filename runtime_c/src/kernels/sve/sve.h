/*
 * sve.h — the vector-length-agnostic SVE kernels (internal), compiled with
 * -march=armv8.2-a+sve into their own library. Loops step by svcntb() /
 * svcntw() with whilelt predicates, so one binary is correct at every
 * vector length from 128 to 2048 bits (the tests run 128, 256, 512, 2048).
 * The "sve" table overrides the dots and matmuls and has its own repacked
 * layouts (repack_sve.h); element-wise kernels come from the NEON table,
 * which every SVE core also runs.
 */
#ifndef ER_KERNELS_SVE_H
#define ER_KERNELS_SVE_H

#include "../kernels.h"

unsigned er_sve_vector_bytes(void);

float er_sve_dot_f32(int n, const void *w_row, const void *x_row);
float er_sve_dot_f16(int n, const void *w_row, const void *x_row);
float er_sve_dot_bf16(int n, const void *w_row, const void *x_row);
float er_sve_dot_q8_0(int n, const void *w_row, const void *x_row);
float er_sve_dot_q4_0(int n, const void *w_row, const void *x_row);
float er_sve_dot_q4_k(int n, const void *w_row, const void *x_row);
float er_sve_dot_q5_k(int n, const void *w_row, const void *x_row);
float er_sve_dot_q6_k(int n, const void *w_row, const void *x_row);
/* the types of issue 25 (q_more_sve.c) */
float er_sve_dot_q4_1(int n, const void *w_row, const void *x_row);
float er_sve_dot_q5_0(int n, const void *w_row, const void *x_row);
float er_sve_dot_q5_1(int n, const void *w_row, const void *x_row);
float er_sve_dot_iq4_nl(int n, const void *w_row, const void *x_row);
float er_sve_dot_iq4_xs(int n, const void *w_row, const void *x_row);
float er_sve_dot_q3_k(int n, const void *w_row, const void *x_row);
float er_sve_dot_q2_k(int n, const void *w_row, const void *x_row);

void er_sve_matmul_f32(const er_matmul_args *a);
void er_sve_matmul_f16(const er_matmul_args *a);
void er_sve_matmul_bf16(const er_matmul_args *a);
void er_sve_matmul_q8_0(const er_matmul_args *a);
void er_sve_matmul_q4_0(const er_matmul_args *a);
void er_sve_matmul_q4_k(const er_matmul_args *a);
void er_sve_matmul_q5_k(const er_matmul_args *a);
void er_sve_matmul_q6_k(const er_matmul_args *a);
void er_sve_matmul_q4_1(const er_matmul_args *a);
void er_sve_matmul_q5_0(const er_matmul_args *a);
void er_sve_matmul_q5_1(const er_matmul_args *a);
void er_sve_matmul_iq4_nl(const er_matmul_args *a);
void er_sve_matmul_iq4_xs(const er_matmul_args *a);
void er_sve_matmul_q3_k(const er_matmul_args *a);
void er_sve_matmul_q2_k(const er_matmul_args *a);

/* The G-row layouts (repack_sve.h), G = er_sve_group_rows() = svcntw():
 * writers (repack_q_sve.c) and matmuls on them. */
int er_sve_group_rows(void);
void er_sve_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_matmul_q8_0xg(const er_matmul_args *a);
void er_sve_matmul_q4_0xg(const er_matmul_args *a);
void er_sve_matmul_iq4_nlxg(const er_matmul_args *a);
void er_sve_matmul_q4_1xg(const er_matmul_args *a);
void er_sve_matmul_q5_0xg(const er_matmul_args *a);
void er_sve_matmul_q5_1xg(const er_matmul_args *a);
void er_sve_matmul_q4_kxg(const er_matmul_args *a);
void er_sve_matmul_q5_kxg(const er_matmul_args *a);
void er_sve_matmul_q6_kxg(const er_matmul_args *a);
/* Q2_K, Q3_K, IQ4_XS (neon/repack_k23_neon.h's layouts at G rows):
 * repack_q2_k_q3_k_sve.c, repack_iq4_xs_sve.c */
void er_sve_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out);
void er_sve_matmul_q2_kxg(const er_matmul_args *a);
void er_sve_matmul_q3_kxg(const er_matmul_args *a);
void er_sve_matmul_iq4_xsxg(const er_matmul_args *a);

#endif
