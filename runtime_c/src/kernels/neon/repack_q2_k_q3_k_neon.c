/*
 * repack_q2_k_q3_k_neon.c — Q2_K and Q3_K matmuls on the 4-row interleaved
 * layouts (repack_k23_neon.h), decode and prefill. Compiled twice like
 * q_neon.c (SDOT by element / widening multiplies).
 *
 * Why it pays (per super-block and 4 weight rows): the row-wise kernels
 * (q_more_neon.c) spend two or three operations per 16 weights on the
 * shift and mask of the 2-bit field, Q3_K three more on the hmask bit and
 * the -4, multiply every sub-block sum by a scalar scale they load (Q3_K
 * decodes its sixteen 6-bit scales with scalar code, er_q3k_scales) and
 * reduce each row horizontally with its own float tail. Here:
 *  - Q2_K: one AND (or a shift for the top field) per 16 weights of 4
 *    rows. The field stays where it is, so field j's quants come out times
 *    4^j (j = 1, 2: at most 48, still an int8); each sub-block's scale is
 *    taken times 16 / 4^j (16 for field 3, at most 240), so every
 *    sub-block adds 16 times its term to one sum, shifted down once per
 *    super-block (exact, and |16 isum| < 2^25);
 *  - Q3_K: the layout holds the hmask complemented, so CMTST gives 0xff
 *    where the quant is low - 4 and SLI puts the two low bits under it:
 *    the signed quant (-4..3) in two operations plus a shift;
 *  - the 4 rows' scales (Q2_K's mins too) come from a few vector
 *    operations per record, the 64 SDOT leave the rows in lanes and one
 *    float tail serves 4 rows; a prefill tile of up to 4 activation rows
 *    shares the unpacking.
 *
 * Counted under qemu (scripts/kernel_insns_qemu.sh: one 64 x 2048
 * product, file layout -> this one; gcc 12 -O3), neon-dotprod: Q2_K decode
 * 92.9k -> 42.2k instructions, 4 rows of prefill 368k -> 139k; Q3_K
 * 141k -> 57.3k and 560k -> 155k. The widening twin (table "neon",
 * cortex-a72, counted the same way by hand): Q2_K 109k -> 87k and 431k
 * -> 355k, Q3_K 161k -> 109k and 641k -> 419k. Instructions, not cycles:
 * not yet timed on Arm hardware.
 *
 * Arithmetic: per row and super-block isum = sum_j s_j (q_j . x_j) (Q2_K:
 * and imin = sum_j m_j bsums_j) are generic's exact int32s, and the float
 * tail is er_kq_accum's statements lane by lane (er_neon_kx4_accum; Q3_K
 * with dmin 0 and imin 0, as generic), over super-blocks in order:
 * bit-identical to generic.
 */
#include "neon.h"
#include "repack_k23_neon.h"
#include "repack_load_neon.h"
#include "repack_k23_tile_neon.h"
#include "dotlane_neon.h"

#if ER_NEON_DOTPROD
#define FN(name) er_neondp_##name
#else
#define FN(name) er_neon_##name
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define MT ER_KX4_MT

/* Half hi of an int16 [sub-block][row] pair as int32 lanes */
static ALWAYS_INLINE int32x4_t s32_of(int16x8_t s, const int hi) {
    return hi ? vmovl_high_s16(s) : vmovl_s16(vget_low_s16(s));
}

/* Quarter q of a byte vector [4][row] as int32 lanes (unsigned bytes) */
static ALWAYS_INLINE int32x4_t u32_of(uint8x16_t v, const int q) {
    const uint16x8_t h = (q & 2) ? vmovl_high_u8(v) : vmovl_u8(vget_low_u8(v));
    return vreinterpretq_s32_u32((q & 1) ? vmovl_high_u16(h) : vmovl_u16(vget_low_u16(h)));
}

/* v >> 2j with a literal shift (the instruction encodes it) */
static ALWAYS_INLINE uint8x16_t shr2j(uint8x16_t v, const int j) {
    switch (j) {
    case 1: return vshrq_n_u8(v, 2);
    case 2: return vshrq_n_u8(v, 4);
    case 3: return vshrq_n_u8(v, 6);
    default: return v;
    }
}

/* Q2_K field j of v times 4^j for j = 1, 2 (one AND in place), the field
 * itself for j = 0 and 3 */
static ALWAYS_INLINE int8x16_t q2_field(uint8x16_t v, const int j) {
    if (j == 3) return vreinterpretq_s8_u8(vshrq_n_u8(v, 6));
    return vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8((uint8_t)(3u << (2 * j)))));
}

static ALWAYS_INLINE void group_tile_q2(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float32x4_t *acc) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    /* sub-blocks 4k..4k+3 have fields 0, 0, 1, 1 (k even) or 2, 2, 3, 3:
     * their scales times 16, 16, 4, 4 or 1, 1, 16, 16 */
    static const int8_t up[2][16] = {{4, 4, 4, 4, 4, 4, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2},
                                     {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4}};
    const int8x16_t up0 = vld1q_s8(up[0]), up1 = vld1q_s8(up[1]);
    for (int i = 0; i < nb; i++) {
        const er_blk_q2_kx4 *w = (const er_blk_q2_kx4 *)wg + i;
        /* sv[k]: bytes [sub-block][row] of sub-blocks 4k..4k+3, the scales
         * times 16 / 4^f (at most 240); kept as bytes and widened per
         * sub-block, as int16 pairs they took 8 registers and a prefill
         * tile of 4 spilled */
        uint8x16_t sv[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) sv[k] = vshlq_u8(vandq_u8(vld1q_u8(w->sc + 16 * k), m4), k & 1 ? up1 : up0);
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT]; /* 16 times generic's isum */
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
#pragma GCC unroll 4
        for (int hg = 0; hg < 4; hg++) {
            const int h = hg >> 1, gh = hg & 1; /* half h, weights g = 4gh.. */
            uint8x16_t v[4];
            for (int gg = 0; gg < 4; gg++) v[gg] = vld1q_u8(w->qs + 16 * (8 * h + 4 * gh + gg));
#pragma GCC unroll 4
            for (int f = 0; f < 4; f++) {
                const int8x16_t u0 = q2_field(v[0], f), u1 = q2_field(v[1], f), u2 = q2_field(v[2], f),
                                u3 = q2_field(v[3], f);
                const int sb = 8 * h + 2 * f + gh;
                const int32x4_t s = u32_of(sv[sb >> 2], sb & 3);
#pragma GCC unroll 4
                for (int j = 0; j < mt; j++) {
                    const int8x16_t xv = vld1q_s8(xb[j]->qs + 128 * h + 32 * f + 16 * gh);
                    isum[j] = vmlaq_s32(isum[j], er_dacc_rows(ER_DOT4(er_dacc_zero(), u0, u1, u2, u3, xv)), s);
                }
            }
        }
        /* the mins (high nibbles) against the bsums, then er_kq_accum */
        int16x8_t m16[8];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8x16_t m = vshrq_n_u8(vld1q_u8(w->sc + 16 * k), 4);
            m16[2 * k] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
            m16[2 * k + 1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
        }
        const float32x4_t dw = er_neon_load_d4(w->d), dmw = er_neon_load_d4(w->dmin);
        for (int j = 0; j < mt; j++) {
            int32x4_t imin = er_neon_kx4_lanes8(vdupq_n_s32(0), m16[0], m16[1], m16[2], m16[3], vld1q_s16(xb[j]->bsums));
            imin = er_neon_kx4_lanes8(imin, m16[4], m16[5], m16[6], m16[7], vld1q_s16(xb[j]->bsums + 8));
            acc[j] = er_neon_kx4_accum(acc[j], dw, dmw, xb[j]->d, vshrq_n_s32(isum[j], 4), imin);
        }
    }
}

static ALWAYS_INLINE void group_tile_q3(const void *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                        float32x4_t *acc) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30), b32 = vdupq_n_u8(32);
    for (int i = 0; i < nb; i++) {
        const er_blk_q3_kx4 *w = (const er_blk_q3_kx4 *)wg + i;
        /* the sixteen 6-bit scales of 4 rows, bytes [j][row], minus 32 */
        const uint8x16_t l0 = vld1q_u8(w->sl), l1 = vld1q_u8(w->sl + 16), hb = vld1q_u8(w->sh);
        uint8x16_t sv[4];
        sv[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(hb, 4), m30)); /* scales 0-3 */
        sv[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(hb, 2), m30)); /* 4-7 */
        sv[2] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, m30));               /* 8-11 */
        sv[3] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), m30)); /* 12-15 */
        int16x8_t s16[8]; /* [sub-block 2k, 2k + 1][row] */
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int8x16_t s = vreinterpretq_s8_u8(vsubq_u8(sv[k], b32));
            s16[2 * k] = vmovl_s8(vget_low_s8(s));
            s16[2 * k + 1] = vmovl_high_s8(s);
        }
        const er_block_q8_k *xb[MT];
        int32x4_t isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = vdupq_n_s32(0);
        }
#pragma GCC unroll 2
        for (int gh = 0; gh < 2; gh++) { /* weights g = 4gh.. */
            uint8x16_t hm[4];
            for (int gg = 0; gg < 4; gg++) hm[gg] = vld1q_u8(w->hm + 16 * (4 * gh + gg));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                uint8x16_t v[4];
                for (int gg = 0; gg < 4; gg++) v[gg] = vld1q_u8(w->qs + 16 * (8 * h + 4 * gh + gg));
                /* field 0 last: SLI writes its first operand, which for
                 * field 0 is the loaded v itself, dead only by then (first,
                 * it cost a copy per 16 weights) */
#pragma GCC unroll 4
                for (int f = 3; f >= 0; f--) {
                    /* 0xfc where the quant is low - 4, the low bits under it */
                    const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + f)));
                    int8x16_t u[4];
                    for (int gg = 0; gg < 4; gg++)
                        u[gg] = vreinterpretq_s8_u8(vsliq_n_u8(shr2j(v[gg], f), vtstq_u8(hm[gg], bit), 2));
                    const int sb = 8 * h + 2 * f + gh;
                    const int32x4_t s = s32_of(s16[sb >> 1], sb & 1);
#pragma GCC unroll 4
                    for (int j = 0; j < mt; j++) {
                        const int8x16_t xv = vld1q_s8(xb[j]->qs + 128 * h + 32 * f + 16 * gh);
                        const er_dacc d = ER_DOT4(er_dacc_zero(), u[0], u[1], u[2], u[3], xv);
                        isum[j] = vmlaq_s32(isum[j], er_dacc_rows(d), s);
                    }
                }
            }
        }
        /* er_kq_accum(sum, d, 0, x.d, isum, 0) on 4 lanes */
        const float32x4_t dw = er_neon_load_d4(w->d);
        for (int j = 0; j < mt; j++)
            acc[j] = er_neon_kx4_accum(acc[j], dw, vdupq_n_f32(0.0f), xb[j]->d, isum[j], vdupq_n_s32(0));
    }
}

/* Tile heights (repack_k23_tile_neon.h), counted under qemu (kernel_insns,
 * 64 x 2048, 4 activation rows): Q2_K with SDOT 151k instructions in one
 * tile of 4, 136k in pairs (its unpacking is one operation per 16 weights,
 * so sharing it saves less than the tile of 4 spilled); the widening twins
 * (two registers per row's sums) 600k (Q2_K) and 681k (Q3_K) in tiles of
 * 4, more than the file layout's 431k and 641k, and 355k and 419k one row
 * at a time. */
#if ER_NEON_DOTPROD
ER_NEON_K23_TILE(tile_q2, group_tile_q2, 2)
ER_NEON_K23_TILE(tile_q3, group_tile_q3, 4)
#else
ER_NEON_K23_TILE(tile_q2, group_tile_q2, 1)
ER_NEON_K23_TILE(tile_q3, group_tile_q3, 1)
#endif

/* a->w: the repacked matrix; rows [r0, r1) as er_neon_kx4_matmul says */
void FN(matmul_q2_kx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_q2_kx4), tile_q2); }
void FN(matmul_q3_kx4)(const er_matmul_args *a) { er_neon_kx4_matmul(a, sizeof(er_blk_q3_kx4), tile_q3); }
