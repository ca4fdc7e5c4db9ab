/*
 * repack_kx4_neon.h — what the K-quant kernels on the 4-row interleaved
 * layouts (repack_q4_k_q5_k_neon.c, repack_q6_k_neon.c) share: the loops
 * over row chunks, activation tiles and row groups, the per-tile-height
 * dispatch, the sub-block-scale times activation-sum step (Q4_K/Q5_K's
 * mins, Q6_K's offset of 32), and the records' scale decoding and
 * unpacking, which the SMMLA prefill (i8mm_kq_neon.c) shares with them.
 * Include only from NEON kernel files.
 */
#ifndef ER_KERNELS_REPACK_KX4_NEON_H
#define ER_KERNELS_REPACK_KX4_NEON_H

#include <arm_neon.h>

#include "../kernels.h"
#include "repack_neon.h"

#define ER_KX4_MT 4 /* activation rows per tile */

/* sum over the 8 sub-blocks k of s01..s67's int16 [sub-block][row] halves
 * times lane k of bs, added to s (lane r = weight row r). |s_k| <= 128 and
 * |bs_k| <= 32 * 127, so each product and the sum fit int32. */
static inline __attribute__((always_inline)) int32x4_t er_neon_kx4_lanes8(int32x4_t s, int16x8_t s01, int16x8_t s23,
                                                                         int16x8_t s45, int16x8_t s67, int16x8_t bs) {
    s = vmlal_laneq_s16(s, vget_low_s16(s01), bs, 0);
    s = vmlal_laneq_s16(s, vget_high_s16(s01), bs, 1);
    s = vmlal_laneq_s16(s, vget_low_s16(s23), bs, 2);
    s = vmlal_laneq_s16(s, vget_high_s16(s23), bs, 3);
    s = vmlal_laneq_s16(s, vget_low_s16(s45), bs, 4);
    s = vmlal_laneq_s16(s, vget_high_s16(s45), bs, 5);
    s = vmlal_laneq_s16(s, vget_low_s16(s67), bs, 6);
    return vmlal_laneq_s16(s, vget_high_s16(s67), bs, 7);
}

/* kquant.h's er_kq_accum on 4 lanes, statement for statement: separate
 * IEEE mul/sub/add give a lane the scalar's bits (-std=c11: GCC does not
 * contract statements into FMA), which is what keeps the kernels
 * bit-identical to generic. Q6_K passes dmin 0 and imin 0, as generic does. */
static inline __attribute__((always_inline)) float32x4_t er_neon_kx4_accum(float32x4_t sum, float32x4_t dw,
                                                                          float32x4_t dmw, float dx, int32x4_t isum,
                                                                          int32x4_t imin) {
    const float32x4_t dd = vmulq_n_f32(dw, dx);
    const float32x4_t dm = vmulq_n_f32(dmw, dx);
    const float32x4_t a = vmulq_f32(dd, vcvtq_f32_s32(isum));
    const float32x4_t b = vmulq_f32(dm, vcvtq_f32_s32(imin));
    return vaddq_f32(sum, vsubq_f32(a, b));
}

/* Sub-block scale j4 of 4 rows as int32 (bytes [j][row] in sc, j = 0..3). */
static inline __attribute__((always_inline)) int32x4_t er_neon_kx4_sc32(uint8x16_t sc, const int j4) {
    const uint16x8_t h = (j4 & 2) ? vmovl_high_u8(sc) : vmovl_u8(vget_low_u8(sc));
    return vreinterpretq_s32_u32((j4 & 1) ? vmovl_high_u16(h) : vmovl_u16(vget_low_u16(h)));
}

/* The fields of record i of either layout (qh: Q5_K only). */
typedef struct {
    const er_f16 *d, *dmin;
    const uint8_t *sl, *sh, *qh, *qs;
} er_kx4_rec;

static inline __attribute__((always_inline)) er_kx4_rec er_kx4_rec_at(const void *wg, int i, const int q5) {
    er_kx4_rec r;
    if (q5) {
        const er_blk_q5_kx4 *w = (const er_blk_q5_kx4 *)wg + i;
        r = (er_kx4_rec){w->d, w->dmin, w->sl, w->sh, w->qh, w->qs};
    } else {
        const er_blk_q4_kx4 *w = (const er_blk_q4_kx4 *)wg + i;
        r = (er_kx4_rec){w->d, w->dmin, w->sl, w->sh, NULL, w->qs};
    }
    return r;
}

/* The top field SRI (hi) or BSL (lo) merges with a nibble, from a qh
 * vector x holding it at bit 4 + gg: bit 4 + gg moved to bit 4, bits 5-7
 * clear (bits 0-3 are not read). Literal shifts: the instructions encode
 * them, and clang wants constant expressions even where inlining would
 * make gg one. */
static inline __attribute__((always_inline)) uint8x16_t er_neon_kx4_top_field(uint8x16_t x, const int gg) {
    const uint8x16_t b4 = vdupq_n_u8(0x10);
    switch (gg) {
    case 1: return vandq_u8(vshrq_n_u8(x, 1), b4);
    case 2: return vandq_u8(vshrq_n_u8(x, 2), b4);
    case 3: return vshrq_n_u8(x, 3); /* the shift clears bits 5-7 */
    default: return vandq_u8(x, b4);
    }
}

/* Chunk c's weights, 4 rows: lo[g] elements 64c+4g.. (sub-block 2c), hi[g]
 * elements 64c+32+4g.. (2c+1), unsigned (Q4_K 0..15, Q5_K 0..31). Q5_K's
 * fifth bits of chunk c are in qh[c][0] (g = 0..3) and qh[c][1] (g = 4..7),
 * a byte holding lo[g]'s bit at bit g & 3 and hi[g]'s at bit 4 + (g & 3)
 * (repack_neon.h). Every merge writes a fresh temporary (SRI into the
 * field, BSL's select into the field), never the loaded nibbles, which
 * both halves read: a merge into the nibbles (SLI) made the compiler copy
 * them first, a move per 16 weights. */
static inline __attribute__((always_inline)) void er_neon_kx4_unpack_chunk(const er_kx4_rec *w, const int c,
                                                                         const int q5, int8x16_t lo[8],
                                                                         int8x16_t hi[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t h[2] = {m4, m4}, l[2] = {m4, m4};
    if (q5)
        for (int k = 0; k < 2; k++) {
            h[k] = vld1q_u8(w->qh + 32 * c + 16 * k);
            l[k] = vshlq_n_u8(h[k], 4); /* lo bits to 4-7 */
        }
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const uint8x16_t v = vld1q_u8(w->qs + 128 * c + 16 * g);
        if (q5) {
            hi[g] = vreinterpretq_s8_u8(vsriq_n_u8(er_neon_kx4_top_field(h[g >> 2], g & 3), v, 4));
            lo[g] = vreinterpretq_s8_u8(vbslq_u8(m4, v, er_neon_kx4_top_field(l[g >> 2], g & 3)));
        } else {
            lo[g] = vreinterpretq_s8_u8(vandq_u8(v, m4));
            hi[g] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
    }
}

/* Q4_K/Q5_K record w's 6-bit scales and mins of 4 rows as bytes [j][row]:
 * sc[0] sub-blocks 0-3, sc[1] 4-7, mn[0], mn[1] the same for the mins. */
static inline __attribute__((always_inline)) void er_neon_kx4_scales(const er_kx4_rec *w, uint8x16_t sc[2],
                                                                    uint8x16_t mn[2]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    const uint8x16_t l0 = vld1q_u8(w->sl), l1 = vld1q_u8(w->sl + 16), h = vld1q_u8(w->sh);
    sc[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h, 4), m30));
    sc[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(h, m30));
    mn[0] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(vshlq_n_u8(h, 2), m30));
    mn[1] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), m30));
}

/* Q6_K: one 16-byte group's unsigned quants (0..63) from its low-nibble
 * bytes a (quarters 0 low, 2 high), b (1, 3) and top bits qh: u[q] quarter
 * q. The file's qh byte holds quarter 0's top bits at 0-1, 1's at 2-3, 2's
 * at 4-5, 3's at 6-7; each becomes a clean field at bits 4-5 (bits 6-7
 * clear) with one operation (AND 0x30, a shift right by 2, or those on
 * qh << 4), which SRI (quarters 2, 3: high nibbles) or BSL (0, 1: low)
 * merges. Every merge writes that fresh field, never the loaded nibbles,
 * which two quarters read: a merge into the nibbles (SLI) made the
 * compiler copy them first, a move per 16 weights. Byte-wise, so it
 * unpacks equally well groups whose bytes were shuffled alike first. */
static inline __attribute__((always_inline)) void er_neon_q6x4_unpack(uint8x16_t a, uint8x16_t b, uint8x16_t qh,
                                                                     int8x16_t u[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    const uint8x16_t ql4 = vshlq_n_u8(qh, 4); /* quarters 0, 1 at bits 4-5, 6-7 */
    u[0] = vreinterpretq_s8_u8(vbslq_u8(m4, a, vandq_u8(ql4, m30)));
    u[1] = vreinterpretq_s8_u8(vbslq_u8(m4, b, vshrq_n_u8(ql4, 2)));
    u[2] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(qh, m30), a, 4));
    u[3] = vreinterpretq_s8_u8(vsriq_n_u8(vshrq_n_u8(qh, 2), b, 4));
}

/* One group of 4 weight rows (wg: its first record) against mt activation
 * rows xs bytes apart, over nb super-blocks; writes the mt x 4 outputs at
 * y, rows ys floats apart. */
typedef void (*er_neon_kx4_tile)(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y,
                                 size_t ys);

/* Defines static tile function `name` of type er_neon_kx4_tile over the
 * kernel's always-inline group_tile(wg, nb, x, xs, mt, acc): one inlined
 * copy per tile height, so each keeps its accumulators in registers (a
 * variable mt would leave them in a stack array). */
#define ER_NEON_KX4_TILE(name, group_tile)                                                                         \
    static void name(const void *wg, int nb, const unsigned char *x, size_t xs, int mt, float *y, size_t ys) {     \
        float32x4_t acc[ER_KX4_MT];                                                                                \
        for (int j = 0; j < ER_KX4_MT; j++) acc[j] = vdupq_n_f32(0.0f);                                            \
        switch (mt) {                                                                                              \
        case 1: group_tile(wg, nb, x, xs, 1, acc); break;                                                          \
        case 2: group_tile(wg, nb, x, xs, 2, acc); break;                                                          \
        case 3: group_tile(wg, nb, x, xs, 3, acc); break;                                                          \
        default: group_tile(wg, nb, x, xs, 4, acc); break;                                                         \
        }                                                                                                          \
        for (int j = 0; j < mt; j++) vst1q_f32(y + (size_t)j * ys, acc[j]);                                        \
    }

/* a->w: the repacked matrix of rec_bytes records (one per super-block and
 * row group); rows [r0, r1) with r0 and r1 - r0 multiples of 4 (forward.c
 * cuts repacked matrices only between row groups); outputs outside them
 * untouched. Rows go in passes of about 64 KiB of weights, read from memory
 * once and from L2 for every further tile of activation rows. The tile is
 * called through a pointer once per row group and tile, a whole row's
 * worth of work, so the indirect call costs nothing measurable. */
static inline void er_neon_kx4_matmul(const er_matmul_args *a, size_t rec_bytes, er_neon_kx4_tile tile) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * rec_bytes;
    const int chunk = 4 * (group_bytes < 65536 ? (int)(65536 / group_bytes) : 1);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += ER_KX4_MT) {
            const int mt = a->m - j0 < ER_KX4_MT ? a->m - j0 : ER_KX4_MT;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += 4)
                tile((const unsigned char *)a->w + (size_t)(r / 4) * group_bytes, nb, xj, a->x_stride, mt,
                     a->y + (size_t)j0 * a->y_stride + (size_t)r, a->y_stride);
        }
    }
}

#endif
