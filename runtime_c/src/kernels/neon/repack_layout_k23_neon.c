/*
 * repack_layout_k23_neon.c — writes the Q2_K, Q3_K and IQ4_XS interleaved
 * layouts (repack_k23_neon.h) at open, for groups of G rows: G = 4 for the
 * NEON tables, the SVE vector's 32-bit lane count for "sve". Plain C for
 * the baseline, like repack_layout_neon.c: it runs once per matrix and
 * every Arm table shares it.
 */
#include <string.h>

#include "repack_k23_neon.h"
#include "../kquant.h"

static const void *src_block(const void *src, size_t row_bytes, int row, size_t block_bytes, int i) {
    return (const uint8_t *)src + (size_t)row * row_bytes + (size_t)i * block_bytes;
}

/* qs[h][g][G][4] = row r's qs[32h+4g..+3] (Q2_K and Q3_K alike); inv
 * complements the bytes (Q3_K's hmask) */
static void put_quads(uint8_t *dst, const uint8_t *qs, int n_quads, int G, int r, int inv) {
    for (int q = 0; q < n_quads; q++)
        for (int t = 0; t < 4; t++) dst[4 * (size_t)(G * q + r) + (size_t)t] = (uint8_t)(inv ? ~qs[4 * q + t] : qs[4 * q + t]);
}

void er_arm_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    const int nb = n_in / ER_QK_K;
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int i = 0; i < nb; i++, out += (size_t)G * sizeof(er_block_q2_k))
            for (int r = 0; r < G; r++) {
                const er_block_q2_k *in = src_block(src, row_bytes, G * g0 + r, sizeof(er_block_q2_k), i);
                memcpy(out + 2 * (size_t)r, &in->d, 2);
                memcpy(out + ER_Q2KX_DMIN(G) + 2 * (size_t)r, &in->dmin, 2);
                for (int j = 0; j < 16; j++) out[ER_Q2KX_SC(G) + (size_t)(G * j + r)] = in->scales[j];
                put_quads(out + ER_Q2KX_QS(G), in->qs, 16, G, r, 0);
            }
}

void er_arm_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    const int nb = n_in / ER_QK_K;
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int i = 0; i < nb; i++, out += (size_t)G * sizeof(er_block_q3_k)) {
            uint8_t *sl = out + ER_Q3KX_SL(G), *sh = out + ER_Q3KX_SH(G);
            memset(sh, 0, 4 * (size_t)G);
            for (int r = 0; r < G; r++) {
                const er_block_q3_k *in = src_block(src, row_bytes, G * g0 + r, sizeof(er_block_q3_k), i);
                memcpy(out + 2 * (size_t)r, &in->d, 2);
                int8_t s[16];
                er_q3k_scales(in->scales, s);
                for (int j = 0; j < 16; j++) {
                    const int u = s[j] + 32; /* the 6-bit code */
                    if (j < 8) sl[G * j + r] = (uint8_t)(u & 15);
                    else sl[G * (j - 8) + r] |= (uint8_t)((u & 15) << 4);
                    sh[G * (j & 3) + r] |= (uint8_t)((u >> 4) << (2 * (j >> 2)));
                }
                put_quads(out + ER_Q3KX_HM(G), in->hmask, 8, G, r, 1);
                put_quads(out + ER_Q3KX_QS(G), in->qs, 16, G, r, 0);
            }
        }
}

void er_arm_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    const int nb = n_in / ER_QK_K;
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int i = 0; i < nb; i++, out += (size_t)G * sizeof(er_block_iq4_xs))
            for (int r = 0; r < G; r++) {
                const er_block_iq4_xs *in = src_block(src, row_bytes, G * g0 + r, sizeof(er_block_iq4_xs), i);
                memcpy(out + 2 * (size_t)r, &in->d, 2);
                memcpy(out + ER_IQ4XSX_SH(G) + 2 * (size_t)r, &in->scales_h, 2);
                for (int k = 0; k < 4; k++) out[ER_IQ4XSX_SL(G) + (size_t)(G * k + r)] = in->scales_l[k];
                put_quads(out + ER_IQ4XSX_QS(G), in->qs, 32, G, r, 0);
            }
}

void er_neon_repack_q2_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q2_k(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q3_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q3_k(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_iq4_xs(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_iq4_xs(src, dst, row_bytes, n_in, n_out, 4);
}
