/*
 * repack_load_neon.h — one record of a 32-element type (Q8_0x4, Q4_0x4 and
 * the issue-25 ones, repack_neon.h) as eight int8x16 vectors in element
 * order plus the 4 rows' scales: the step both
 * the SDOT kernels (repack_q_neon.c) and the SMMLA ones (i8mm_neon.c) start
 * every block with. Q4_0's nibbles stay unsigned (0..15); each kernel
 * subtracts the 8 its own way (as Q5_0's 16). (The Q4_Kx4 kernels share the scale
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

/* Record b (kind t, repack_neon.h's ER_X4_*) of the group at wg: returns
 * the 4 rows' scales, fills v[0..8) with the weights as int8 in element
 * order (lanes = rows, 4 bytes each) and, for Q4_1/Q5_1, *mw with the mins.
 * Q4_0/Q4_1 nibbles and Q5_0/Q5_1 5-bit values stay unsigned (0..31), so
 * every product fits SDOT and the widening twin's int16 pairs. */
static inline __attribute__((always_inline)) float32x4_t er_neon_load_x4(const void *wg, int b, int8x16_t v[8],
                                                                         const int t, float32x4_t *mw) {
    const unsigned char *rec = (const unsigned char *)wg + (size_t)b * 4 * er_x4_block_bytes(t);
    if (t == ER_X4_Q8_0) {
        for (int g = 0; g < 8; g++) v[g] = vld1q_s8((const int8_t *)(rec + 8 + 16 * g));
        return er_neon_load_d4((const er_f16 *)(const void *)rec);
    }
    const size_t off_h = er_x4_has_m(t) ? 16 : 8, off_q = off_h + (er_x4_has_h(t) ? 16 : 0);
    if (er_x4_has_m(t)) *mw = er_neon_load_d4((const er_f16 *)(const void *)(rec + 8));
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b4 = vdupq_n_u8(0x10);
    const uint8x16_t h = er_x4_has_h(t) ? vld1q_u8(rec + off_h) : vdupq_n_u8(0);
    for (int c = 0; c < 4; c++) {
        const uint8x16_t q = vld1q_u8(rec + off_q + 16 * c);
        uint8x16_t lo = vandq_u8(q, m4), hi;
        if (er_x4_has_h(t)) {
            /* bit c of h: element 4c + t's fifth bit, moved to bit 4 and
             * merged by BSL; bit 4 + c: 16 + 4c + t's, isolated at bit 4,
             * under which SRI inserts the high nibble */
            lo = vbslq_u8(b4, vshlq_u8(h, vdupq_n_s8((int8_t)(4 - c))), lo);
            hi = vsriq_n_u8(vandq_u8(vshlq_u8(h, vdupq_n_s8((int8_t)-c)), b4), q, 4);
        } else {
            hi = vshrq_n_u8(q, 4);
        }
        if (t == ER_X4_IQ4_NL) {
            const int8x16_t grid = vld1q_s8(er_iq4nl_values);
            v[c] = vqtbl1q_s8(grid, lo);
            v[c + 4] = vqtbl1q_s8(grid, hi);
        } else {
            v[c] = vreinterpretq_s8_u8(lo);
            v[c + 4] = vreinterpretq_s8_u8(hi);
        }
    }
    return er_neon_load_d4((const er_f16 *)(const void *)rec);
}

#endif
