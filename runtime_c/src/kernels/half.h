/*
 * half.h — inline half/bfloat -> float conversion for inner loops (internal).
 *
 * convert.c exports the same conversions as er_f16_to_f32/er_bf16_to_f32;
 * the kernels use these inline twins because without LTO a cross-file call
 * per element makes the F16 dot product several times slower.
 */
#ifndef ER_KERNELS_HALF_H
#define ER_KERNELS_HALF_H

#include "kernels.h"

#include <string.h>

static inline float er_half_to_float(er_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (man << 13); /* inf/NaN, payload kept */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else {
        /* zero or subnormal man * 2^-24: exact in float arithmetic since
         * man < 2^10 and the result is a normal float */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float er_bfloat_to_float(er_bf16 h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
