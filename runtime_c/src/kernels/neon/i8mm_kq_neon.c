/*
 * i8mm_kq_neon.c — the K-quants' prefill (Q4_K, Q5_K, Q6_K against Q8_K
 * activations) with SMMLA (vmmlaq_s32) on the 4-row interleaved layouts
 * (repack_neon.h), for the "neon-i8mm" table; the SDOT kernels
 * (repack_q4_k_q5_k_neon.c, repack_q6_k_neon.c) keep decode (m = 1). Built
 * into the i8mm library beside i8mm_neon.c, whose header says how SMMLA
 * meets the layout: per 8-element slice, vzip1q_s32/vzip2q_s32 of the
 * layout's two neighbouring 4-byte groups give weight rows (0,1) and (2,3)
 * with 8 bytes each, against a pair of activation rows interleaved in
 * 8-byte slices once per call (prep_pair).
 *
 * The zip comes before the unpacking wherever the unpacking is byte-wise
 * (Q4_K's nibbles, Q6_K's ql/qh merge): zipping the packed bytes serves a
 * low and a high nibble at once. Q5_K's fifth bits sit at a bit that
 * depends on the group, so it unpacks as the SDOT kernel does and zips the
 * result.
 *
 * Arithmetic: each sub-block's 8-element SMMLA sums add up to generic's
 * exact int32 (q_j . x_j) per weight and activation row, times the
 * sub-block's scale into isum, exactly as the SDOT kernels; after each
 * super-block vuzp1q/vuzp2q put isum back in one activation row per vector
 * (lane = weight row), where the mins (Q4_K/Q5_K) and er_kq_accum's
 * float tail are the SDOT kernels' statements (Q6_K's quants are centred
 * here, so its offset term is gone, group_q6): bit-identical to generic,
 * super-blocks in order (a later stack slice of activations continues
 * the outputs it left in y).
 *
 * Tiles of 8 activation rows (4 pairs) share each record's unpacking,
 * zips and scale decoding (a last tile of fewer rows, as many pairs as
 * it needs). What it pays, instructions per 64 x 2048 product
 * (scripts/kernel_insns_qemu.sh, qemu -cpu max, gcc 12 -O3), against the
 * SDOT kernels on the same layout (themselves without pre-RA scheduling,
 * see below):
 *   8 rows: Q4_K 163.8k -> 134.6k, Q5_K 191.5k -> 157.2k, Q6_K 225.4k -> 172.0k
 *   5 rows: Q4_K 114.2k -> 103.0k, Q5_K 142.8k -> 124.2k, Q6_K 161.2k -> 134.0k
 *   4 rows: Q4_K 82.6k -> 76.8k, Q5_K 96.5k -> 97.3k, Q6_K 112.3k -> 107.4k
 *   2 rows: Q4_K 49.9k -> 50.9k, Q5_K 63.8k -> 70.1k, Q6_K 68.1k -> 77.9k
 * so a call of fewer than 4 rows (Q5_K: 5) stays with SDOT; a larger
 * call's last tile of 1-3 rows takes SMMLA, its weights being in cache
 * from the tiles before (a second SDOT pass would read them again).
 * Speed on real Arm cores is unmeasured (developed under qemu -cpu max).
 */
#include "neon.h"
#include "repack_neon.h"
#include "repack_load_neon.h"
#include "repack_kx4_neon.h"

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "i8mm_kq_neon.c needs an i8mm target (-march=armv8.2-a+dotprod+i8mm)"
#endif

/* GCC's scheduling before register allocation (on at -O2 for aarch64)
 * hoisted the next sub-blocks' loads and SMMLA chains over the current
 * one's and spilled: 184 stack accesses in the Q4_K tile, 521 in Q6_K's
 * (4-row tiles). Without it 25 and 38, and a 4-row Q4_K product went from
 * 108k to 76k instructions (scripts/kernel_insns_qemu.sh, with the
 * chunks two per loop iteration rather than all four unrolled).
 * Out-of-order cores reorder anyway. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))

#define KB 16 /* super-blocks per stack slice of prepared activations (4096 elements) */
#define NP 4  /* activation row pairs per tile */

/* One activation row pair's quants, per super-block the two rows
 * interleaved in 8-byte slices: slice s (elements 8s..8s+7) is row 0's 8
 * bytes then row 1's, at 16 s. A missing row is zeros. Scales and
 * bsums are read from the Q8_K rows themselves. */
typedef struct {
    int8_t q[KB][2 * ER_QK_K];
} kq_pair;

/* rows (1..2 NP): the tile's rows from x on; pair p takes rows 2p and
 * 2p + 1, zeros for one past rows. */
static void prep_pair(const unsigned char *x, size_t xs, int rows, int p, int b0, int b1, kq_pair *out) {
    const er_block_q8_k *x0 = 2 * p < rows ? (const er_block_q8_k *)(const void *)(x + (size_t)(2 * p) * xs) : NULL;
    const er_block_q8_k *x1 =
        2 * p + 1 < rows ? (const er_block_q8_k *)(const void *)(x + (size_t)(2 * p + 1) * xs) : NULL;
    for (int b = b0; b < b1; b++) {
        int8_t *o = out->q[b - b0];
#pragma GCC unroll 4
        for (int s = 0; s < ER_QK_K / 16; s++) {
            const int64x2_t a = x0 ? vreinterpretq_s64_s8(vld1q_s8(x0[b].qs + 16 * s)) : vdupq_n_s64(0);
            const int64x2_t c = x1 ? vreinterpretq_s64_s8(vld1q_s8(x1[b].qs + 16 * s)) : vdupq_n_s64(0);
            vst1q_s8(o + 32 * s, vreinterpretq_s8_s64(vzip1q_s64(a, c)));
            vst1q_s8(o + 32 * s + 16, vreinterpretq_s8_s64(vzip2q_s64(a, c)));
        }
    }
}

/* pairs of a tile of rows: KQ_GROUP's cases */
static int tile_pairs(int rows) { return (rows + 1) / 2; }

/* The output tile: acc[j] activation row j, lane r weight row r (the SDOT
 * kernels' order). */
typedef struct {
    const unsigned char *x; /* the tile's first Q8_K row */
    size_t xs;
    int rows; /* 1..2 NP */
} kq_tile;

/* Sub-block scales for SMMLA's lanes (w0x0, w0x1, w1x0, w1x1): s[0] =
 * (s_r0, s_r0, s_r1, s_r1), s[1] = (s_r2, s_r2, s_r3, s_r3), of sub-block
 * j4 of the 4 held as bytes [j][row] in v (sign: Q6_K's are int8). */
static ALWAYS_INLINE void sc_lanes(int8x16_t v, const int j4, const int sign, int32x4_t s[2]) {
    const int8x16_t z = (j4 & 2) ? vzip2q_s8(v, v) : vzip1q_s8(v, v);
    int16x8_t h;
    if (sign)
        h = (j4 & 1) ? vmovl_high_s8(z) : vmovl_s8(vget_low_s8(z));
    else
        h = vreinterpretq_s16_u16((j4 & 1) ? vmovl_high_u8(vreinterpretq_u8_s8(z))
                                           : vmovl_u8(vget_low_u8(vreinterpretq_u8_s8(z))));
    s[0] = vmovl_s16(vget_low_s16(h));
    s[1] = vmovl_high_s16(h);
}

/* One sub-block of ns 8-element slices: w[sl][h] weight rows (2h, 2h+1)
 * of slice sl, as bytes (nib 0), or the low (1) or high (2) nibbles of
 * them; off the sub-block's first slice in the pairs' super-block k;
 * isum[p][h] += its sums times s[h]. */
static ALWAYS_INLINE void sub_block(const int8x16_t w[][2], const int ns, const int nib, const kq_pair *ap,
                                    const int np, int k, int off, const int32x4_t s[2], int32x4_t isum[NP][2]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    int32x4_t t[NP][2];
    for (int p = 0; p < np; p++) t[p][0] = t[p][1] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int sl = 0; sl < ns; sl++) {
        int8x16_t wv[2];
        for (int h = 0; h < 2; h++) {
            const uint8x16_t u = vreinterpretq_u8_s8(w[sl][h]);
            wv[h] = nib == 1 ? vreinterpretq_s8_u8(vandq_u8(u, m4)) : nib == 2 ? vreinterpretq_s8_u8(vshrq_n_u8(u, 4))
                                                                                : w[sl][h];
        }
        for (int p = 0; p < np; p++) {
            const int8x16_t xv = vld1q_s8(ap[p].q[k] + off + 16 * sl);
            t[p][0] = vmmlaq_s32(t[p][0], wv[0], xv);
            t[p][1] = vmmlaq_s32(t[p][1], wv[1], xv);
        }
    }
    for (int p = 0; p < np; p++) {
        isum[p][0] = vmlaq_s32(isum[p][0], t[p][0], s[0]);
        isum[p][1] = vmlaq_s32(isum[p][1], t[p][1], s[1]);
    }
}

static ALWAYS_INLINE int8x16_t zip_rows(int8x16_t a, int8x16_t b, const int hi) {
    const int32x4_t a32 = vreinterpretq_s32_s8(a), b32 = vreinterpretq_s32_s8(b);
    return vreinterpretq_s8_s32(hi ? vzip2q_s32(a32, b32) : vzip1q_s32(a32, b32));
}

/* Q5_K chunk c's half hh (0: the low nibbles, sub-block 2c; 1: the high,
 * 2c + 1) as er_neon_kx4_unpack_chunk makes it, one half at a time: both
 * at once kept 16 vectors live beside the 8-row tile's 16 accumulators,
 * and the compiler spilled. */
static ALWAYS_INLINE void unpack_q5_half(const er_kx4_rec *w, const int c, const int hh, int8x16_t u[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t f[2];
    for (int k = 0; k < 2; k++) {
        f[k] = vld1q_u8(w->qh + 32 * c + 16 * k);
        if (!hh) f[k] = vshlq_n_u8(f[k], 4); /* low nibbles' bits to 4-7 */
    }
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const uint8x16_t v = vld1q_u8(w->qs + 128 * c + 16 * g), t = er_neon_kx4_top_field(f[g >> 2], g & 3);
        u[g] = vreinterpretq_s8_u8(hh ? vsriq_n_u8(t, v, 4) : vbslq_u8(m4, v, t));
    }
}

/* Q4_K (q5 = 0) and Q5_K: the tile's rows against one group of 4 weight
 * rows over super-blocks [b0, b1), two chunks per loop iteration. */
static ALWAYS_INLINE void group_q45(const void *wg, int b0, int b1, const kq_tile *tl, const kq_pair *ap, const int np,
                                    float32x4_t acc[2 * NP], const int q5) {
    for (int i = b0; i < b1; i++) {
        const int k = i - b0;
        const er_kx4_rec w = er_kx4_rec_at(wg, i, q5);
        uint8x16_t sc[2], mn[2];
        er_neon_kx4_scales(&w, sc, mn);
        int32x4_t isum[NP][2];
        for (int p = 0; p < np; p++) isum[p][0] = isum[p][1] = vdupq_n_s32(0);
#pragma GCC unroll 1
        for (int cc = 0; cc < 2; cc++) {
            const int8x16_t scv = vreinterpretq_s8_u8(sc[cc]);
#pragma GCC unroll 2
            for (int c1 = 0; c1 < 2; c1++) {
                /* chunk c: sub-blocks 2c (hh = 0) and 2c + 1 */
                const int c = 2 * cc + c1;
                int32x4_t s[2][2];
                sc_lanes(scv, 2 * c1, 0, s[0]);
                sc_lanes(scv, 2 * c1 + 1, 0, s[1]);
                if (q5) {
#pragma GCC unroll 2
                    for (int hh = 0; hh < 2; hh++) {
                        int8x16_t u[8], wz[4][2];
                        unpack_q5_half(&w, c, hh, u);
                        for (int sl = 0; sl < 4; sl++)
                            for (int h = 0; h < 2; h++) wz[sl][h] = zip_rows(u[2 * sl], u[2 * sl + 1], h);
                        sub_block(wz, 4, 0, ap, np, k, 64 * (2 * c + hh), s[hh], isum);
                    }
                } else {
                    /* the packed bytes zipped: each serves both sub-blocks */
                    int8x16_t z[4][2];
#pragma GCC unroll 4
                    for (int sl = 0; sl < 4; sl++) {
                        const int8x16_t v0 = vld1q_s8((const int8_t *)w.qs + 128 * c + 32 * sl);
                        const int8x16_t v1 = vld1q_s8((const int8_t *)w.qs + 128 * c + 32 * sl + 16);
                        for (int h = 0; h < 2; h++) z[sl][h] = zip_rows(v0, v1, h);
                    }
                    sub_block(z, 4, 1, ap, np, k, 64 * (2 * c), s[0], isum);
                    sub_block(z, 4, 2, ap, np, k, 64 * (2 * c + 1), s[1], isum);
                }
            }
        }
        /* back to rows in lanes, then the SDOT kernel's tail */
        const int16x8_t m01 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn[0])));
        const int16x8_t m23 = vreinterpretq_s16_u16(vmovl_high_u8(mn[0]));
        const int16x8_t m45 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn[1])));
        const int16x8_t m67 = vreinterpretq_s16_u16(vmovl_high_u8(mn[1]));
        const float32x4_t dw = er_neon_load_d4(w.d), dmw = er_neon_load_d4(w.dmin);
        for (int p = 0; p < np; p++)
            for (int e = 0; e < 2; e++) {
                const int j = 2 * p + e;
                if (j >= tl->rows) break;
                const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(tl->x + (size_t)j * tl->xs) + i;
                const int32x4_t is = e ? vuzp2q_s32(isum[p][0], isum[p][1]) : vuzp1q_s32(isum[p][0], isum[p][1]);
                const int16x8_t bs = vpaddq_s16(vld1q_s16(xb->bsums), vld1q_s16(xb->bsums + 8));
                const int32x4_t imin = er_neon_kx4_lanes8(vdupq_n_s32(0), m01, m23, m45, m67, bs);
                acc[j] = er_neon_kx4_accum(acc[j], dw, dmw, xb->d, is, imin);
            }
    }
}

/* Q6_K: the tile's rows against one group of 4 weight rows over
 * super-blocks [b0, b1). Sub-block 8h + 2q + gh (16 elements) is quarter q
 * of groups g = 4gh..4gh+3 of half h (repack_q6_k_neon.c). The quants are
 * centred (q - 32, as generic sums them; SMMLA takes signed bytes): one
 * subtraction per 16 weights of 4 rows, shared by the tile's rows, where
 * the SDOT kernel's offset term 32 sum_j scale_j bsums_j costs 16
 * multiply-adds per activation row and super-block (13% of an 8-row
 * product, 5% of a 4-row one). */
static ALWAYS_INLINE void group_q6(const void *wg, int b0, int b1, const kq_tile *tl, const kq_pair *ap, const int np,
                                   float32x4_t acc[2 * NP]) {
    for (int i = b0; i < b1; i++) {
        const int k = i - b0;
        const er_blk_q6_kx4 *w = (const er_blk_q6_kx4 *)wg + i;
        int32x4_t isum[NP][2];
        for (int p = 0; p < np; p++) isum[p][0] = isum[p][1] = vdupq_n_s32(0);
#pragma GCC unroll 1
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
            for (int gh = 0; gh < 2; gh++) {
                /* wz[q][sl][hr]: quarter q, slice sl (groups 4gh + 2sl, +1), weight rows 2hr, 2hr+1 */
                int8x16_t wz[4][2][2];
#pragma GCC unroll 2
                for (int sl = 0; sl < 2; sl++) {
                    const int g = 4 * gh + 2 * sl;
                    const int8_t *a = (const int8_t *)w->ql + 128 * (2 * h) + 16 * g;
                    const int8_t *b = (const int8_t *)w->ql + 128 * (2 * h + 1) + 16 * g;
                    const int8_t *qh = (const int8_t *)w->qh + 128 * h + 16 * g;
                    const int8x16_t a0 = vld1q_s8(a), a1 = vld1q_s8(a + 16), c0 = vld1q_s8(b), c1 = vld1q_s8(b + 16);
                    const int8x16_t q0 = vld1q_s8(qh), q1 = vld1q_s8(qh + 16);
                    for (int hr = 0; hr < 2; hr++) {
                        int8x16_t u[4];
                        er_neon_q6x4_unpack(vreinterpretq_u8_s8(zip_rows(a0, a1, hr)),
                                            vreinterpretq_u8_s8(zip_rows(c0, c1, hr)),
                                            vreinterpretq_u8_s8(zip_rows(q0, q1, hr)), u);
                        for (int q = 0; q < 4; q++) wz[q][sl][hr] = vsubq_s8(u[q], vdupq_n_s8(32));
                    }
                }
#pragma GCC unroll 4
                for (int q = 0; q < 4; q++) {
                    /* sub-block 8h + 2q + gh: byte row 2q + gh of the scales' vector 2h + q / 2 */
                    int32x4_t s[2];
                    sc_lanes(vld1q_s8(w->sc + 16 * (2 * h + (q >> 1))), 2 * (q & 1) + gh, 1, s);
                    sub_block(wz[q], 2, 0, ap, np, k, 32 * (8 * h + 2 * q + gh), s, isum);
                }
            }
        }
        /* back to rows in lanes, then er_kq_accum(sum, d, 0, x.d, isum, 0)
         * as the SDOT kernel's tail */
        const float32x4_t dw = er_neon_load_d4(w->d);
        for (int p = 0; p < np; p++)
            for (int e = 0; e < 2; e++) {
                const int j = 2 * p + e;
                if (j >= tl->rows) break;
                const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(tl->x + (size_t)j * tl->xs) + i;
                const int32x4_t is = e ? vuzp2q_s32(isum[p][0], isum[p][1]) : vuzp1q_s32(isum[p][0], isum[p][1]);
                acc[j] = er_neon_kx4_accum(acc[j], dw, vdupq_n_f32(0.0f), xb->d, is, vdupq_n_s32(0));
            }
    }
}

/* One group's outputs of the tile: from y (from_y: a later slice of
 * super-blocks continues them) or zero, and back. */
typedef void (*kq_group_fn)(const void *wg, int b0, int b1, const kq_tile *tl, const kq_pair *ap, float *y,
                            size_t ys, int from_y);

#define KQ_GROUP(name, body)                                                                                     \
    static void name(const void *wg, int b0, int b1, const kq_tile *tl, const kq_pair *ap, float *y, size_t ys, \
                     int from_y) {                                                                               \
        float32x4_t acc[2 * NP];                                                                                 \
        for (int j = 0; j < 2 * NP; j++)                                                                         \
            acc[j] = from_y && j < tl->rows ? vld1q_f32(y + (size_t)j * ys) : vdupq_n_f32(0.0f);                 \
        switch (tile_pairs(tl->rows)) {                                                                          \
        case 1: body(1); break;                                                                                  \
        case 2: body(2); break;                                                                                  \
        case 3: body(3); break;                                                                                  \
        default: body(NP); break;                                                                                \
        }                                                                                                        \
        for (int j = 0; j < tl->rows; j++) vst1q_f32(y + (size_t)j * ys, acc[j]);                                \
    }
#define BODY_Q4(np) group_q45(wg, b0, b1, tl, ap, np, acc, 0)
#define BODY_Q5(np) group_q45(wg, b0, b1, tl, ap, np, acc, 1)
#define BODY_Q6(np) group_q6(wg, b0, b1, tl, ap, np, acc)
KQ_GROUP(group_fn_q4, BODY_Q4)
KQ_GROUP(group_fn_q5, BODY_Q5)
KQ_GROUP(group_fn_q6, BODY_Q6)

/* a->w: the repacked matrix of rec_bytes records; rows [r0, r1) with r0
 * and r1 - r0 multiples of 4. Loops as i8mm_neon.c's: a stack slice of
 * super-blocks, rows in passes, activation tiles of 2 NP rows prepared
 * once per pass. A pass reads its rows' records of one slice only, so it
 * takes as many rows as make about 64 KiB of those (at n >= 4096, Q4_K: 28
 * rows, where 64 KiB of whole rows would be 12 at n = 8192, and the
 * preparation would cost 12% of the pass rather than 5%). */
static void matmul_kq(const er_matmul_args *a, size_t rec_bytes, kq_group_fn group) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * rec_bytes, pass_bytes = (size_t)(nb < KB ? nb : KB) * rec_bytes;
    const int chunk = 4 * (pass_bytes < 65536 ? (int)(65536 / pass_bytes) : 1);
    kq_pair ap[NP];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += 2 * NP) {
                const kq_tile tl = {(const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride,
                                    a->m - j0 < 2 * NP ? a->m - j0 : 2 * NP};
                for (int p = 0; p < tile_pairs(tl.rows); p++) prep_pair(tl.x, tl.xs, tl.rows, p, b0, b1, &ap[p]);
                for (int r = c0; r < c1; r += 4)
                    group((const unsigned char *)a->w + (size_t)(r / 4) * group_bytes, b0, b1, &tl, ap,
                          a->y + (size_t)j0 * a->y_stride + (size_t)r, a->y_stride, b0 != 0);
            }
        }
    }
}

/* Calls of fewer rows than pay (the header's counts) go to the SDOT
 * kernel on the same layout. Every row's outputs are generic's bits
 * either way, so a batched step's m_one rows (kernels.h) need no split. */
void er_neoni8_matmul_q4_kx4(const er_matmul_args *a) {
    if (a->m < 4)
        er_neondp_matmul_q4_kx4(a);
    else
        matmul_kq(a, sizeof(er_blk_q4_kx4), group_fn_q4);
}
void er_neoni8_matmul_q5_kx4(const er_matmul_args *a) {
    if (a->m < 5)
        er_neondp_matmul_q5_kx4(a);
    else
        matmul_kq(a, sizeof(er_blk_q5_kx4), group_fn_q5);
}
void er_neoni8_matmul_q6_kx4(const er_matmul_args *a) {
    if (a->m < 4)
        er_neondp_matmul_q6_kx4(a);
    else
        matmul_kq(a, sizeof(er_blk_q6_kx4), group_fn_q6);
}
