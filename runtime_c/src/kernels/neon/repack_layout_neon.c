/*
 * repack_layout_neon.c — writes the Arm interleaved layouts (repack_neon.h)
 * at open, for groups of G rows: G = 4 for the NEON tables (one 128-bit
 * vector of 32-bit lanes), G = the SVE vector's 32-bit lane count for the
 * "sve" table (sve/repack_sve.h). Every field of a record is an array
 * [...][G] (rows innermost) or [...][G][4] (4 bytes per row), so the G = 4
 * records are exactly repack_neon.h's structs. Plain C for the baseline:
 * it runs once per matrix, and keeping it out of the SIMD libraries lets
 * every Arm table share it.
 */
#include <string.h>

#include "repack_neon.h"
#include "../kquant.h"
#include "../q5_regroup.h"

static const void *src_block(const void *src, size_t row_bytes, int row, size_t block_bytes, int b) {
    return (const uint8_t *)src + (size_t)row * row_bytes + (size_t)b * block_bytes;
}

/* The 32-element types, fields in the file block's order, each [G]:
 *   Q8_0   { f16 d[G];                   i8 q[8][G][4] }
 *   Q4_0   { f16 d[G];                   u8 q[4][G][4] }   (IQ4_NL the same)
 *   Q4_1   { f16 d[G]; f16 m[G];         u8 q[4][G][4] }
 *   Q5_0   { f16 d[G];         u8 h[G][4]; u8 q[4][G][4] }
 *   Q5_1   { f16 d[G]; f16 m[G]; u8 h[G][4]; u8 q[4][G][4] }
 * q: qs_bytes 32 or 16 per row and block, moved 4 at a time (the 4-bit
 * types' qs[j] already pairs element j, low nibble, with j + 16, high); h:
 * qh regrouped (q5_regroup.h). */
static void repack_q(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G, int qs_bytes,
                     int has_m, int has_h) {
    const size_t in_block = sizeof(er_f16) * (has_m ? 2u : 1u) + (has_h ? 4u : 0u) + (size_t)qs_bytes;
    const size_t off_h = (has_m ? 4 : 2) * (size_t)G, off_q = off_h + (has_h ? 4 * (size_t)G : 0);
    const int nb = n_in / 32;
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int b = 0; b < nb; b++, out += (size_t)G * in_block)
            for (int r = 0; r < G; r++) {
                const uint8_t *in = src_block(src, row_bytes, G * g0 + r, in_block, b);
                memcpy(out + sizeof(er_f16) * (size_t)r, in, sizeof(er_f16));
                if (has_m) memcpy(out + 2 * (size_t)G + sizeof(er_f16) * (size_t)r, in + 2, sizeof(er_f16));
                if (has_h) er_q5_regroup_h(in + (has_m ? 4 : 2), out + off_h + 4 * (size_t)r);
                const uint8_t *qs = in + in_block - (size_t)qs_bytes;
                for (int c = 0; c < qs_bytes / 4; c++) memcpy(out + off_q + 4 * (size_t)(G * c + r), qs + 4 * c, 4);
            }
}

void er_arm_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK8_0, 0, 0);
}

void er_arm_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK4_0 / 2, 0, 0);
}

/* IQ4_NL's block is Q4_0's (f16 d, 16 nibble bytes); only the values differ */
void er_arm_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK4_0 / 2, 0, 0);
}

void er_arm_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK4_0 / 2, 1, 0);
}

void er_arm_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK4_0 / 2, 0, 1);
}

void er_arm_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q(src, dst, row_bytes, n_in, n_out, G, ER_QK4_0 / 2, 1, 1);
}

/* Q4_K (q5 = 0) and Q5_K share the scale re-encoding and the qs order; the
 * block structs differ only in Q5_K's qh before qs. Offsets in a record
 * (er_arm_kq_fields): d 0, dmin 2G, sl 4G, sh 12G, [qh 16G,] qs 16G or 48G. */
static void repack_q45_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G, int q5) {
    const int nb = n_in / ER_QK_K;
    const size_t bs = q5 ? sizeof(er_block_q5_k) : sizeof(er_block_q4_k);
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int i = 0; i < nb; i++, out += (size_t)G * bs) {
            er_f16 *d = (er_f16 *)(void *)out, *dmin = d + G;
            uint8_t *sl = out + 4 * (size_t)G, *sh = sl + 8 * (size_t)G;
            uint8_t *qh = q5 ? sh + 4 * (size_t)G : NULL, *qs = sh + (q5 ? 36 : 4) * (size_t)G;
            memset(sh, 0, 4 * (size_t)G);
            if (qh) memset(qh, 0, 32 * (size_t)G);
            for (int r = 0; r < G; r++) {
                const void *in = src_block(src, row_bytes, G * g0 + r, bs, i);
                const er_block_q4_k *b4 = in;
                const er_block_q5_k *b5 = in;
                d[r] = q5 ? b5->d : b4->d;
                dmin[r] = q5 ? b5->dmin : b4->dmin;
                uint8_t sc[8], mn[8];
                er_kq_scale_min(q5 ? b5->scales : b4->scales, sc, mn);
                for (int j = 0; j < 8; j++) {
                    sl[G * j + r] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
                    sh[G * (j & 3) + r] |= (uint8_t)(((sc[j] >> 4) | (mn[j] >> 4) << 2) << (4 * (j >> 2)));
                }
                const uint8_t *q = q5 ? b5->qs : b4->qs;
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++)
                        memcpy(&qs[4 * (size_t)(G * (8 * c + g) + r)], &q[32 * c + 4 * g], 4);
                if (!qh) continue;
                /* qh[c][k][r] byte t: bit gg the fifth bit of element
                 * 64c + 4g + t, bit 4 + gg that of 64c + 32 + 4g + t,
                 * g = 4k + gg (file qh[4g + t] bits 2c and 2c + 1) */
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++)
                        for (int t = 0; t < 4; t++) {
                            const int fb = b5->qh[4 * g + t] >> (2 * c);
                            qh[4 * (size_t)(G * (2 * c + (g >> 2)) + r) + (size_t)t] |=
                                (uint8_t)((fb & 1) << (g & 3) | ((fb >> 1) & 1) << (4 + (g & 3)));
                        }
            }
        }
}

void er_arm_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q45_k(src, dst, row_bytes, n_in, n_out, G, 0);
}

void er_arm_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    repack_q45_k(src, dst, row_bytes, n_in, n_out, G, 1);
}

/* Q6_K { f16 d[G]; i8 sc[16][G]; u8 ql[4][8][G][4]; u8 qh[2][8][G][4] } */
void er_arm_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int G) {
    const int nb = n_in / ER_QK_K;
    uint8_t *out = dst;
    for (int g0 = 0; g0 < n_out / G; g0++)
        for (int i = 0; i < nb; i++, out += (size_t)G * sizeof(er_block_q6_k)) {
            int8_t *sc = (int8_t *)(void *)(out + 2 * (size_t)G);
            uint8_t *ql = out + 18 * (size_t)G, *qh = ql + 128 * (size_t)G;
            for (int r = 0; r < G; r++) {
                const er_block_q6_k *in = src_block(src, row_bytes, G * g0 + r, sizeof(er_block_q6_k), i);
                memcpy(out + sizeof(er_f16) * (size_t)r, &in->d, sizeof(er_f16));
                for (int j = 0; j < 16; j++) sc[G * j + r] = in->scales[j];
                for (int k = 0; k < 4; k++)
                    for (int g = 0; g < 8; g++) memcpy(&ql[4 * (size_t)(G * (8 * k + g) + r)], &in->ql[32 * k + 4 * g], 4);
                for (int h = 0; h < 2; h++)
                    for (int g = 0; g < 8; g++) memcpy(&qh[4 * (size_t)(G * (8 * h + g) + r)], &in->qh[32 * h + 4 * g], 4);
            }
        }
}

/* the NEON tables' 4-row layouts */
void er_neon_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q8_0(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_0(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_k(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_k(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q6_k(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q4_1(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_0(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_q5_1(src, dst, row_bytes, n_in, n_out, 4);
}
void er_neon_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_arm_repack_iq4_nl(src, dst, row_bytes, n_in, n_out, 4);
}
