/*
 * f16_rows.c — float <-> f16 rows for the F16 KV cache. Stores must round
 * to nearest even (er_f32_to_f16) so cached keys match a reference cache
 * built by numpy/torch .half() bit for bit.
 */
#include "generic.h"
#include "../half.h"

void er_gen_f32_to_f16(const float *x, er_f16 *y, int n) {
    for (int i = 0; i < n; i++)
        y[i] = er_f32_to_f16(x[i]);
}

void er_gen_f16_to_f32(const er_f16 *x, float *y, int n) {
    for (int i = 0; i < n; i++)
        y[i] = er_half_to_float(x[i]);
}
