/*
 * dot_bf16.c — bfloat16 weight row · float activation row.
 * Same eight-way float accumulation as dot_f32.c.
 */
#include "generic.h"
#include "../half.h"

float er_gen_dot_bf16(int n, const void *w_row, const void *x_row) {
    const er_bf16 *w = w_row;
    const float *x = x_row;
    float p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            p[k] += er_bfloat_to_float(w[i + k]) * x[i + k];
    for (; i < n; i++)
        p[i & 7] += er_bfloat_to_float(w[i]) * x[i];
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}
