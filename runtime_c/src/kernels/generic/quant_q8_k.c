/*
 * quant_q8_k.c — float row -> Q8_K activation blocks (the K-quant dots'
 * partner). llama.cpp's rule bit for bit: the scale comes from the signed
 * value of largest magnitude (iscale = -127/max, d = 1/iscale), rounding is
 * to nearest with ties to even (its nearest_int trick), and bsums hold the
 * sum of every 16 quants. Same integers as llama.cpp => same dot products.
 */
#include "generic.h"

#include <math.h>
#include <string.h>

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5*2^23 pushes the
 * fraction out of the mantissa under the default rounding mode. */
static inline int nearest_even(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void er_gen_quantize_row_q8_k(const float *x, void *dst, int n) {
    er_block_q8_k *y = dst;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const float *xb = x + (size_t)i * ER_QK_K;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < ER_QK_K; j++) {
            const float a = xb[j] < 0 ? -xb[j] : xb[j];
            if (a > amax) {
                amax = a;
                max = xb[j];
            }
        }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        /* all zeros; or a largest value so big (inf: iscale 0) or so tiny
         * (denormal: iscale inf) that the products would be NaN: a zero
         * block keeps the dot product finite */
        if (iscale == 0.0f || !isfinite(iscale)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        for (int j = 0; j < ER_QK_K; j++) {
            const float v = iscale * xb[j];
            /* |v| <= 127 for finite rows; a NaN element becomes 0 rather
             * than whatever integer its bits would decode to */
            int q = v == v ? nearest_even(v) : 0;
            y[i].qs[j] = (int8_t)(q > 127 ? 127 : (q < -127 ? -127 : q));
        }
        for (int j = 0; j < ER_QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}
