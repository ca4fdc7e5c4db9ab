/*
 * dot_q4_0.c — Q4_0 weight row · Q8_0 activation row.
 * Element j of a block is the low nibble of qs[j], element j+16 the high
 * nibble (llama.cpp's layout, not interleaved pairs); both are offset by 8.
 */
#include "generic.h"
#include "../half.h"

float er_gen_dot_q4_0(int n, const void *w_row, const void *x_row) {
    const er_block_q4_0 *w = w_row;
    const er_block_q8_0 *x = x_row;
    int nb = n / ER_QK4_0;
    float sum = 0.0f;
    for (int i = 0; i < nb; i++) {
        int32_t s = 0;
        for (int j = 0; j < ER_QK4_0 / 2; j++) {
            int lo = (w[i].qs[j] & 0x0f) - 8;
            int hi = (w[i].qs[j] >> 4) - 8;
            s += lo * x[i].qs[j] + hi * x[i].qs[j + ER_QK4_0 / 2];
        }
        sum += (float)s * (er_half_to_float(w[i].d) * er_half_to_float(x[i].d));
    }
    return sum;
}
