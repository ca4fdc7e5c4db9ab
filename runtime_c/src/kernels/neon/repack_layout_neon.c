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

/* Q4_K (q5 = 0) and Q5_K share the scale re-encoding and the qs order; the
 * block structs differ only in Q5_K's qh before qs. */
static void repack_q45_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int q5) {
    const int nb = n_in / ER_QK_K;
    const size_t bs = q5 ? sizeof(er_block_q5_k) : sizeof(er_block_q4_k);
    uint8_t *out = dst;
    for (int g4 = 0; g4 < n_out / 4; g4++)
        for (int i = 0; i < nb; i++) {
            er_f16 *d, *dmin;
            uint8_t *sl, *sh, *qh = NULL, *qs;
            if (q5) {
                er_blk_q5_kx4 *o = (er_blk_q5_kx4 *)(void *)out;
                d = o->d, dmin = o->dmin, sl = o->sl, sh = o->sh, qh = o->qh, qs = o->qs;
            } else {
                er_blk_q4_kx4 *o = (er_blk_q4_kx4 *)(void *)out;
                d = o->d, dmin = o->dmin, sl = o->sl, sh = o->sh, qs = o->qs;
            }
            memset(sh, 0, 16);
            if (qh) memset(qh, 0, 128);
            for (int r = 0; r < 4; r++) {
                const void *in = src_block(src, row_bytes, 4 * g4 + r, bs, i);
                const er_block_q4_k *b4 = in;
                const er_block_q5_k *b5 = in;
                d[r] = q5 ? b5->d : b4->d;
                dmin[r] = q5 ? b5->dmin : b4->dmin;
                uint8_t sc[8], mn[8];
                er_kq_scale_min(q5 ? b5->scales : b4->scales, sc, mn);
                for (int j = 0; j < 8; j++) {
                    sl[4 * j + r] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
                    sh[4 * (j & 3) + r] |= (uint8_t)(((sc[j] >> 4) | (mn[j] >> 4) << 2) << (4 * (j >> 2)));
                }
                const uint8_t *q = q5 ? b5->qs : b4->qs;
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++) memcpy(&qs[128 * c + 16 * g + 4 * r], &q[32 * c + 4 * g], 4);
                if (!qh) continue;
                /* qh[c][k][r] byte t: bit gg the fifth bit of element
                 * 64c + 4g + t, bit 4 + gg that of 64c + 32 + 4g + t,
                 * g = 4k + gg (file qh[4g + t] bits 2c and 2c + 1) */
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++)
                        for (int t = 0; t < 4; t++) {
                            const int fb = b5->qh[4 * g + t] >> (2 * c);
                            qh[32 * c + 16 * (g >> 2) + 4 * r + t] |=
                                (uint8_t)((fb & 1) << (g & 3) | ((fb >> 1) & 1) << (4 + (g & 3)));
                        }
            }
            out += q5 ? sizeof(er_blk_q5_kx4) : sizeof(er_blk_q4_kx4);
        }
}

void er_neon_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    repack_q45_k(src, dst, row_bytes, n_in, n_out, 0);
}

void er_neon_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    repack_q45_k(src, dst, row_bytes, n_in, n_out, 1);
}

void er_neon_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    er_blk_q6_kx4 *out = dst;
    for (int g4 = 0; g4 < n_out / 4; g4++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 4; r++) {
                const er_block_q6_k *in = src_block(src, row_bytes, 4 * g4 + r, sizeof(er_block_q6_k), i);
                out->d[r] = in->d;
                for (int j = 0; j < 16; j++) out->sc[4 * j + r] = in->scales[j];
                for (int k = 0; k < 4; k++)
                    for (int g = 0; g < 8; g++) memcpy(&out->ql[128 * k + 16 * g + 4 * r], &in->ql[32 * k + 4 * g], 4);
                for (int h = 0; h < 2; h++)
                    for (int g = 0; g < 8; g++) memcpy(&out->qh[128 * h + 16 * g + 4 * r], &in->qh[32 * h + 4 * g], 4);
            }
}
