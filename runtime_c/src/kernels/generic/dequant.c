/*
 * dequant.c — one weight row of any supported type -> float (embedding
 * look-ups read a single token's row; tests use it as the reference view).
 */
#include "generic.h"
#include "../half.h"

#include <string.h>

void er_gen_dequant_f32(const void *src, float *dst, int n) {
    if (n > 0)
        memmove(dst, src, (size_t)n * sizeof(float));
}

void er_gen_dequant_f16(const void *src, float *dst, int n) {
    const er_f16 *s = src;
    for (int i = 0; i < n; i++)
        dst[i] = er_half_to_float(s[i]);
}

void er_gen_dequant_bf16(const void *src, float *dst, int n) {
    const er_bf16 *s = src;
    for (int i = 0; i < n; i++)
        dst[i] = er_bfloat_to_float(s[i]);
}

void er_gen_dequant_q8_0(const void *src, float *dst, int n) {
    const er_block_q8_0 *b = src;
    for (int i = 0; i < n / ER_QK8_0; i++) {
        float d = er_half_to_float(b[i].d);
        for (int j = 0; j < ER_QK8_0; j++)
            dst[i * ER_QK8_0 + j] = (float)b[i].qs[j] * d;
    }
}

void er_gen_dequant_q4_0(const void *src, float *dst, int n) {
    const er_block_q4_0 *b = src;
    const int half = ER_QK4_0 / 2;
    for (int i = 0; i < n / ER_QK4_0; i++) {
        float d = er_half_to_float(b[i].d);
        for (int j = 0; j < half; j++) {
            dst[i * ER_QK4_0 + j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
            dst[i * ER_QK4_0 + j + half] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}
