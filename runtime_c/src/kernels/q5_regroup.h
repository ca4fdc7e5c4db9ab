/*
 * q5_regroup.h — the fifth bits of a Q5_0/Q5_1 block regrouped for the
 * interleaved layouts (internal), which keep Q4_0's nibble order: byte t of
 * a row's 4-byte group c holds element 4c + t in its low nibble and
 * 16 + 4c + t in its high one. The file's qh has element j's fifth bit at
 * bit j of a 32-bit word, which would need a per-byte bit gather per chunk;
 * regrouped, byte t holds in bit c the fifth bit of element 4c + t and in bit
 * 4 + c that of 16 + 4c + t, so a chunk's 16 fifth bits of 4 rows sit
 * in the same byte positions as its nibbles and one shift and one mask put
 * them at bit 4. Same 4 bytes per row and block as the file's qh.
 * x86/repack_q32_avx2.c uses the same regrouping for its 8-row layouts.
 */
#ifndef ER_KERNELS_Q5_REGROUP_H
#define ER_KERNELS_Q5_REGROUP_H

#include <stdint.h>

static inline void er_q5_regroup_h(const uint8_t qh[4], uint8_t out[4]) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int t = 0; t < 4; t++) {
        uint8_t v = 0;
        for (int c = 0; c < 4; c++)
            v = (uint8_t)(v | ((h >> (4 * c + t)) & 1) << c | ((h >> (16 + 4 * c + t)) & 1) << (4 + c));
        out[t] = v;
    }
}

#endif
