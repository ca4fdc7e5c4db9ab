/*
 * repack_layout_neon.c — writes the Arm 4-row interleaved layouts
 * (repack_neon.h) at open. Plain C for the baseline: it runs once per
 * matrix, and keeping it out of the SIMD libraries lets every Arm table
 * share it.
 */
#include <string.h>

#include "repack_neon.h"
#include "../kquant.h"

static const void *src_block(const void *src, size_t row_bytes, int row, size_t block_bytes, int b) {
    return (const uint8_t *)src + (size_t)row * row_bytes + (size_t)b * block_bytes;
}

void er_neon_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK8_0;
    er_blk_q8_0x4 *out = dst;
    for (int g4 = 0; g4 < n_out / 4; g4++)
        for (int b = 0; b < nb; b++, out++)
            for (int r = 0; r < 4; r++) {
                const er_block_q8_0 *in = src_block(src, row_bytes, 4 * g4 + r, sizeof(er_block_q8_0), b);
                out->d[r] = in->d;
                for (int g = 0; g < 8; g++) memcpy(&out->q[16 * g + 4 * r], &in->qs[4 * g], 4);
            }
}

void er_neon_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK4_0;
    er_blk_q4_0x4 *out = dst;
    for (int g4 = 0; g4 < n_out / 4; g4++)
        for (int b = 0; b < nb; b++, out++)
            for (int r = 0; r < 4; r++) {
                const er_block_q4_0 *in = src_block(src, row_bytes, 4 * g4 + r, sizeof(er_block_q4_0), b);
                out->d[r] = in->d;
                /* qs[j] already pairs element j (low) with j+16 (high) */
                for (int c = 0; c < 4; c++) memcpy(&out->q[16 * c + 4 * r], &in->qs[4 * c], 4);
            }
}

void er_neon_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    er_blk_q4_kx4 *out = dst;
    for (int g4 = 0; g4 < n_out / 4; g4++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->sh, 0, sizeof out->sh);
            for (int r = 0; r < 4; r++) {
                const er_block_q4_k *in = src_block(src, row_bytes, 4 * g4 + r, sizeof(er_block_q4_k), i);
                out->d[r] = in->d;
                out->dmin[r] = in->dmin;
                uint8_t sc[8], mn[8];
                er_kq_scale_min(in->scales, sc, mn);
                for (int j = 0; j < 8; j++) {
                    out->sl[4 * j + r] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
                    out->sh[4 * (j & 3) + r] |= (uint8_t)(((sc[j] >> 4) | (mn[j] >> 4) << 2) << (4 * (j >> 2)));
                }
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++)
                        memcpy(&out->qs[128 * c + 16 * g + 4 * r], &in->qs[32 * c + 4 * g], 4);
            }
        }
}
