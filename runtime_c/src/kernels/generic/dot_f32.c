/*
 * dot_f32.c — float weight row · float activation row.
 * Eight independent partial sums: shorter error chains than one running sum
 * (the forward pass is held to 1e-4 of transformers' F32), and the compiler
 * can keep them in vector lanes without -ffast-math.
 */
#include "generic.h"

float er_gen_dot_f32(int n, const void *w_row, const void *x_row) {
    const float *w = w_row;
    const float *x = x_row;
    float p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            p[k] += w[i + k] * x[i + k];
    for (; i < n; i++)
        p[i & 7] += w[i] * x[i];
    return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}
