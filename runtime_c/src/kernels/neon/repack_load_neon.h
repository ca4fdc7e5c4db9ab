/*
 * repack_load_neon.h — one Q8_0x4 or Q4_0x4 record (repack_neon.h) as eight
 * int8x16 vectors in element order plus the 4 rows' scales: the step both
 * the SDOT kernels (repack_q_neon.c) and the SMMLA ones (i8mm_neon.c) start
 * every block with. Q4_0's nibbles stay unsigned (0..15); each kernel
 * subtracts the 8 its own way. (The Q4_Kx4 kernels share the scale
 * widening.) Include only from NEON kernel files.
 */
#ifndef ER_KERNELS_REPACK_LOAD_NEON_H
#define ER_KERNELS_REPACK_LOAD_NEON_H

#include <arm_neon.h>

#include "repack_neon.h"

/* the 4 rows' f16 scales of a record, widened */
static inline __attribute__((always_inline)) float32x4_t er_neon_load_d4(const er_f16 *d) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d)));
}

/* record b of the group at wg; returns the scales, fills v[0..8) */
static inline __attribute__((always_inline)) float32x4_t er_neon_load_x4(const void *wg, int b, int8x16_t v[8],
                                                                         const int q4) {
    const er_f16 *d;
    if (q4) {
        const er_blk_q4_0x4 *wb = (const er_blk_q4_0x4 *)wg + b;
        d = wb->d;
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q = vld1q_u8(wb->q + 16 * c);
            v[c] = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
            v[c + 4] = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
        }
    } else {
        const er_blk_q8_0x4 *wb = (const er_blk_q8_0x4 *)wg + b;
        d = wb->d;
        for (int g = 0; g < 8; g++) v[g] = vld1q_s8(wb->q + 16 * g);
    }
    return er_neon_load_d4(d);
}

#endif
