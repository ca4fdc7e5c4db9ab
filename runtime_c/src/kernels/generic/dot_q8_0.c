/*
 * dot_q8_0.c — Q8_0 weight row · Q8_0 activation row.
 * Exact int32 sum per block, then scaled and accumulated in float in block
 * order, as ggml's reference does, so SIMD twins can be held to it tightly.
 */
#include "generic.h"
#include "../half.h"

float er_gen_dot_q8_0(int n, const void *w_row, const void *x_row) {
    const er_block_q8_0 *w = w_row;
    const er_block_q8_0 *x = x_row;
    int nb = n / ER_QK8_0;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
        int32_t s = 0;
        for (int j = 0; j < ER_QK8_0; j++)
            s += (int32_t)w[i].qs[j] * (int32_t)x[i].qs[j];
        sum += (float)s * (er_half_to_float(w[i].d) * er_half_to_float(x[i].d));
    }
    return sum;
}
