/*
 * kquant.h — K-quant helpers shared by the generic and every SIMD kernel
 * (internal).
 *
 * Every K-quant dot product here reduces a super-block to two exact integers
 * (isum = sum over sub-blocks of scale * (q . x), imin = sum of min * bsum)
 * and then applies er_kq_accum, the single place where floats enter. Because
 * integer sums do not depend on order and this tail is shared, generic, AVX2,
 * NEON and SVE return the same bits, and the tests hold them to equality.
 * Keep each product in its own statement: clang contracts a*b+c inside one
 * expression into an FMA, which would round differently per ISA.
 */
#ifndef ER_KERNELS_KQUANT_H
#define ER_KERNELS_KQUANT_H

#include "kernels.h"

/* The eight 6-bit scales and mins of a Q4_K/Q5_K super-block: bytes 0-3 hold
 * scales 0-3 (low 6 bits), bytes 4-7 mins 0-3 (low 6 bits); scales/mins 4-7
 * take their low nibble from bytes 8-11 (scale low, min high) and their top
 * two bits from the spare top bits of bytes 0-3 (scales) and 4-7 (mins). */
static inline void er_kq_scale_min(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0x0f) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* sum + (dw*dx)*isum - (dmw*dx)*imin, rounded the same way on every ISA. */
static inline float er_kq_accum(float sum, float dw, float dmw, float dx, int32_t isum, int32_t imin) {
    const float dd = dw * dx;
    const float dm = dmw * dx;
    const float a = dd * (float)isum;
    const float b = dm * (float)imin;
    return sum + (a - b);
}

/* Sum of min[j] * (bsums[2j] + bsums[2j+1]) over the 8 sub-blocks of 32. */
static inline int32_t er_kq_min_sum(const uint8_t mn[8], const int16_t bsums[16]) {
    int32_t s = 0;
    for (int j = 0; j < 8; j++)
        s += (int32_t)mn[j] * ((int32_t)bsums[2 * j] + (int32_t)bsums[2 * j + 1]);
    return s;
}

/* Q6_K stores q+32 unsigned; sum of scale[j] * 32 * bsums[j] undoes the
 * offset for kernels that multiply the unsigned values. */
static inline int32_t er_kq6_offset_sum(const int8_t scales[16], const int16_t bsums[16]) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += (int32_t)scales[j] * (int32_t)bsums[j];
    return 32 * s;
}

/* The sixteen scales of a Q3_K super-block, as signed s - 32 (-32..31):
 * scale i takes its low nibble from byte i % 8 (low nibble for i < 8, high
 * for i >= 8) and its top two bits from byte 8 + i % 4, bits 2*(i/4). */
static inline void er_q3k_scales(const uint8_t s[12], int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        const int lo = (s[i % 8] >> (4 * (i / 8))) & 0x0f;
        const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* The eight scales of an IQ4_XS super-block, as signed ls - 32 (-32..31). */
static inline void er_iq4xs_scales(const er_block_iq4_xs *b, int8_t out[8]) {
    for (int j = 0; j < 8; j++) {
        const int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
        const int hi = (b->scales_h >> (2 * j)) & 3;
        out[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

/* Sum of scales[j] * bsums[j] over the 16 sub-blocks of 16 (Q2_K's mins,
 * Q3_K's offset of 4 for kernels that multiply unsigned q + 4). */
static inline int32_t er_kq_bsum16(const int8_t scales[16], const int16_t bsums[16]) {
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += (int32_t)scales[j] * (int32_t)bsums[j];
    return s;
}

#endif
