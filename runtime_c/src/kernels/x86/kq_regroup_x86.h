/*
 * kq_regroup_x86.h — what the writers of the x86 Q5_K and Q6_K layouts
 * share: a file super-block's quants in element order (both types, both
 * tables), and where row r of a G-row record keeps them. The 8-row (AVX2)
 * and 16-row (avx512vnni) Q6_K layouts differ only in G (4 * G bytes per
 * group of 4 elements of all the record's rows), so a change to its byte
 * order is made once for both (repack_q6_k_avx2.c, repack_q6_k_x16_avx512.c).
 * Q5_K's 16-row record is group-major with its top bits first in each
 * group (repack_q4_k_q5_k_x16_avx512.c writes it), so er_kq_q5_put is the
 * 8-row layout's only (repack_q4_k_q5_k_avx2.c). Plain C, run at open.
 */
#ifndef ER_KERNELS_KQ_REGROUP_X86_H
#define ER_KERNELS_KQ_REGROUP_X86_H

#include <stdint.h>

#include "../kernels.h"

/* A Q5_K super-block's 256 quants (0..31), in element order. */
static inline void er_kq_q5_quants(const er_block_q5_k *in, uint8_t q[ER_QK_K]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (uint8_t)((in->qs[32 * c + l] & 15) | ((in->qh[l] >> (2 * c)) & 1) << 4);
            q[64 * c + 32 + l] = (uint8_t)((in->qs[32 * c + l] >> 4) | ((in->qh[l] >> (2 * c + 1)) & 1) << 4);
        }
}

/* Row r's Q5_K quants q into a G-row record: qv[4][8][4G] holds element
 * 32k + 4u + t (low 5 bits) with the low 3 bits of element 128 + 32k +
 * 4u + t above it; q4[8][4G] their top bits, 2 per k. */
static inline void er_kq_q5_put(const uint8_t q[ER_QK_K], uint8_t *qv, uint8_t *q4, int G, int r) {
    for (int u = 0; u < 8; u++)
        for (int t = 0; t < 4; t++) {
            uint8_t top = 0;
            for (int k = 0; k < 4; k++) {
                const uint8_t host = q[32 * k + 4 * u + t], guest = q[32 * (4 + k) + 4 * u + t];
                qv[(size_t)(8 * k + u) * 4 * G + 4 * r + t] = (uint8_t)(host | (guest & 7) << 5);
                top |= (uint8_t)((guest >> 3) << (2 * k));
            }
            q4[(size_t)u * 4 * G + 4 * r + t] = top;
        }
}

/* A Q6_K super-block's 256 quants (0..63), in element order. */
static inline void er_kq_q6_quants(const er_block_q6_k *b, uint8_t q[ER_QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t l0 = b->ql[64 * h + l], l1 = b->ql[64 * h + 32 + l], hb = b->qh[32 * h + l];
            q[128 * h + l] = (uint8_t)((l0 & 15) | (hb & 3) << 4);
            q[128 * h + 32 + l] = (uint8_t)((l1 & 15) | ((hb >> 2) & 3) << 4);
            q[128 * h + 64 + l] = (uint8_t)((l0 >> 4) | ((hb >> 4) & 3) << 4);
            q[128 * h + 96 + l] = (uint8_t)((l1 >> 4) | (hb >> 6) << 4);
        }
}

/* Row r's Q6_K quants q into a G-row record's three streams dst[16][3][4G]:
 * stream v of group t holds element 64v + 4t + k with 2 bits of element
 * 192 + 4t + k above it. */
static inline void er_kq_q6_put(const uint8_t q[ER_QK_K], uint8_t *dst, int G, int r) {
    for (int t = 0; t < 16; t++)
        for (int v = 0; v < 3; v++)
            for (int k = 0; k < 4; k++)
                dst[(size_t)(3 * t + v) * 4 * G + 4 * r + k] =
                    (uint8_t)(q[64 * v + 4 * t + k] | ((q[192 + 4 * t + k] >> (2 * v)) & 3) << 6);
}

#endif
