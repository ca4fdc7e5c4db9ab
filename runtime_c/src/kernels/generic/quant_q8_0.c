/*
 * quant_q8_0.c — float row -> Q8_0 activation blocks.
 *
 * Follows llama.cpp's reference rule bit for bit (d = amax/127 stored as
 * f16, q = roundf(x / d) using the f32 d, not the rounded f16 one) so a
 * Q8_0 matmul here gives the same integers llama.cpp would; changing the
 * order of the rounding steps shifts results by one quantum.
 */
#include "generic.h"

#include <math.h>

void er_gen_quantize_row_q8_0(const float *x, void *dst, int n) {
    er_block_q8_0 *y = dst;
    int nb = n / ER_QK8_0;
    for (int i = 0; i < nb; i++) {
        const float *xb = x + (size_t)i * ER_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < ER_QK8_0; j++) {
            float a = fabsf(xb[j]);
            amax = a > amax ? a : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = er_f32_to_f16(d);
        for (int j = 0; j < ER_QK8_0; j++) {
            float q = roundf(xb[j] * id);
            /* finite rows never leave [-127, 127]; an inf/NaN activation
             * would make the int8 cast undefined behaviour, so pin it */
            if (!(q >= -127.0f && q <= 127.0f))
                q = q > 0.0f ? 127.0f : (q < 0.0f ? -127.0f : 0.0f);
            y[i].qs[j] = (int8_t)q;
        }
    }
}
