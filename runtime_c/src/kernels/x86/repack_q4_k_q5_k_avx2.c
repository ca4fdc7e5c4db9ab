/*
 * repack_q4_k_q5_k_avx2.c — Q4_K and Q5_K matrices in 8-row interleaved
 * super-blocks, AVX2: one kernel body, Q5_K adding the fifth bit.
 *
 * Q4_K layout (repack_rows = 8; 8 x 144 = 1152 bytes per record, the same
 * size as the file's 8 blocks; written at open by er_avx2_repack_q4_k): for
 * each group of 8 weight rows and each super-block index i, one record
 *   f16 d[8], dmin[8]          the 8 rows' scales side by side
 *   u8  sl[2][32]              part p (sub-blocks 4p..4p+3): byte 16h + 4jj + q
 *                              for row r = 4h + q, sub-block j = 4p + jj holds
 *                              sc & 15 | (mn & 15) << 4
 *   u8  sh[32]                 byte k: the top two bits of that position's sc
 *                              (bits 0-1) and mn (bits 2-3) for part 0 in the
 *                              low nibble, for part 1 in the high nibble
 *   u8  qs[4][8][8][4]         chunk c, group g, row r: the row's file bytes
 *                              qs[32c + 4g .. 32c + 4g + 3]
 * so one 32-byte load gives 4 consecutive bytes of each of the 8 rows (row r
 * in 32-bit lane r): low nibbles are elements 64c + 4g.. of sub-block 2c,
 * high nibbles those of sub-block 2c + 1. The 6-bit scales and mins are
 * re-encoded (not a byte permutation of the file): with rows in the 128-bit
 * halves' lanes, one pshufb turns a part vector into the madd multiplier of a
 * sub-block for all 8 rows, so the per-row scalar scale unpacking of the
 * file layout (kquant.h's er_kq_scale_min) is gone from the hot loop.
 *
 * Q5_K layout (8 x 176 = 1408 bytes): the Q4_K record's scale fields, then
 * the 5-bit quants regrouped (not the file's nibbles plus a qh bit plane):
 *   u8  qv[4][8][32]         k, group g, byte 4r + t for row r: bits 0-4 the
 *                            quant of element 32k + 4g + t (sub-block k),
 *                            bits 5-7 bits 0-2 of element 32(4 + k) + 4g + t
 *   u8  q4[8][32]            group g, byte 4r + t: bits 2k, 2k + 1 are bits
 *                            3-4 of element 32(4 + k) + 4g + t
 * Sub-blocks 0-3 are one AND from a load; 4-7 take 5 operations (shift and
 * mask the top of qv[k], shift and mask q4, OR). With the file's split every
 * vector took a nibble extraction plus a shift, mask and OR for its fifth
 * bit: decode from cache went 33 -> 40 GB/s (256 x 2048, one core), a
 * whole 110M Q5_K_M file at 2 threads 456 -> 475 tok/s (1 thread, bound by
 * memory, unchanged). The quants are 0..31, so the int16 sum of a sub-
 * block's 8 maddubs could reach 8 * 2 * 31 * 127 = 62992: it is split into
 * two sums of 4 groups (<= 31496), each widened by its own madd.
 *
 * Why it pays: the activation's 4 bytes are broadcast and one maddubs gives 8
 * rows' pair sums; 8 groups add in int16 (<= 8 * 2 * 15 * 127 = 30480), one
 * madd with the scales widens a whole sub-block; no horizontal sums; the
 * float tail runs on 8 rows at once. Measured on this project's Zen 4 VM
 * against the row-wise kernel (qk_avx2.c) on the 110M shapes, min of 20:
 * decode from cache 25 -> 67 GMAC/s, prefill tiles (m = 64) 36 -> 97 GMAC/s,
 * a whole 110M decode pass from DRAM 13.6 -> 22.6 GB/s (1 thread). Second
 * round (A/B in one process, min of 7): prefill tiles of 6 activation rows,
 * each group unpacked and used at once for every row, 96 -> 110 GMAC/s
 * (MT = 4: 106, MT = 8: 88; unrolling the group loop by 8 or 1: 100);
 * decode keeps its own unpack-then-chain order (the tile order at m = 1
 * measured 12% slower from cache).
 *
 * Arithmetic: per row and super-block, isum = sum_j sc_j * (q_j . x_j) and
 * imin = sum_j mn_j * (bsums_2j + bsums_2j+1) are the same exact int32 as
 * generic's, and the float tail is er_kq_accum's statements lane by lane
 * (IEEE mul/sub/add give the same bits in a vector lane, and this library is
 * built with -std=c11, where GCC does not contract across statements), summed
 * over super-blocks in the same order: results are bit-identical to generic.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "kq_regroup_x86.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* the part both records start with: scales, mins and their 6-bit codes */
typedef struct {
    er_f16 d[8];
    er_f16 dmin[8];
    uint8_t sl[2][32];
    uint8_t sh[32];
} kx8_scales;

typedef struct {
    kx8_scales s;
    uint8_t qs[1024];
} blk_q4_kx8;

typedef struct {
    kx8_scales s;
    uint8_t qv[4][8][32];
    uint8_t q4[8][32];
} blk_q5_kx8;

_Static_assert(sizeof(blk_q4_kx8) == 8 * sizeof(er_block_q4_k), "Q4_Kx8 must take 8 blocks' bytes");
_Static_assert(sizeof(blk_q5_kx8) == 8 * sizeof(er_block_q5_k), "Q5_Kx8 must take 8 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */


/* Row r's d, dmin and re-encoded scales/mins (the Q4_K and Q5_K
 * super-blocks share these fields' meaning) into a record. */
static void put_scales(kx8_scales *o, int r, er_f16 d, er_f16 dmin, const uint8_t scales[12]) {
    o->d[r] = d;
    o->dmin[r] = dmin;
    uint8_t sc[8], mn[8];
    er_kq_scale_min(scales, sc, mn);
    for (int j = 0; j < 8; j++) {
        const int p = j / 4, k = 16 * (r / 4) + 4 * (j % 4) + r % 4;
        o->sl[p][k] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
        o->sh[k] |= (uint8_t)(((sc[j] >> 4) | (mn[j] >> 4) << 2) << (4 * p));
    }
}

void er_avx2_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q4_kx8 *out = dst;
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.sh, 0, sizeof out->s.sh);
            for (int r = 0; r < 8; r++) {
                const er_block_q4_k *in =
                    (const er_block_q4_k *)(const void *)((const uint8_t *)src + (size_t)(8 * g8 + r) * row_bytes) + i;
                put_scales(&out->s, r, in->d, in->dmin, in->scales);
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++) memcpy(&out->qs[256 * c + 32 * g + 4 * r], &in->qs[32 * c + 4 * g], 4);
            }
        }
}

void er_avx2_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q5_kx8 *out = dst;
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.sh, 0, sizeof out->s.sh);
            for (int r = 0; r < 8; r++) {
                const er_block_q5_k *in =
                    (const er_block_q5_k *)(const void *)((const uint8_t *)src + (size_t)(8 * g8 + r) * row_bytes) + i;
                put_scales(&out->s, r, in->d, in->dmin, in->scales);
                uint8_t q[ER_QK_K];
                er_kq_q5_quants(in, q);
                er_kq_q5_put(q, (uint8_t *)out->qv, (uint8_t *)out->q4, 8, r);
            }
        }
}

/* ---- kernels ---------------------------------------------------------------- */

#define ld er_kq8_ld
#define bcast4 er_kq8_bcast4

/* pshufb controls, the same in both 128-bit halves. k_sc[jj]: lane q gets
 * int16 (s, s) from byte 4jj + q (madd multiplies both of a lane's pair sums
 * by its row's scale). k_mn[t]: lane q gets int16 (m of jj = 2t, m of
 * jj = 2t + 1), for one madd with the activation's (bs_2t, bs_2t+1). Tables
 * in memory rather than built with set intrinsics: an index that is a loop
 * variable would otherwise be assembled byte by byte in the hot loop. */
#define Z 0x80
#define SC4(b) b, Z, b, Z, b + 1, Z, b + 1, Z, b + 2, Z, b + 2, Z, b + 3, Z, b + 3, Z
#define MN4(b) b, Z, b + 4, Z, b + 1, Z, b + 5, Z, b + 2, Z, b + 6, Z, b + 3, Z, b + 7, Z
static const uint8_t k_sc[4][32] __attribute__((aligned(32))) = {
    {SC4(0), SC4(0)}, {SC4(4), SC4(4)}, {SC4(8), SC4(8)}, {SC4(12), SC4(12)}};
static const uint8_t k_mn[2][32] __attribute__((aligned(32))) = {{MN4(0), MN4(0)}, {MN4(8), MN4(8)}};
#undef SC4
#undef MN4
#undef Z

static ALWAYS_INLINE __m256i ctrl_sc(int jj) { return _mm256_load_si256((const __m256i *)(const void *)k_sc[jj]); }
static ALWAYS_INLINE __m256i ctrl_mn(int t) { return _mm256_load_si256((const __m256i *)(const void *)k_mn[t]); }

/* What the kernel needs of one activation super-block besides its quants:
 * the sub-block sums bs_j = bsums_2j + bsums_2j+1 as int16 pairs (bs_2t,
 * bs_2t+1) in bsp[t], prepared once per activation row and call rather than
 * once per row group. |bs_j| <= 32 * 127 fits int16. */
typedef struct act_kblk {
    int32_t bsp[4];
} act_kblk;

#define KB 64 /* activation super-blocks per stack slice (16384 elements) */
#define MT 6  /* activation rows per tile (see group_tile) */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int i0, int i1, act_kblk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs);
        for (int i = i0; i < i1; i++)
            for (int t = 0; t < 4; t++) {
                const int16_t *s = xb[i].bsums + 4 * t;
                const uint32_t lo = (uint16_t)(int16_t)(s[0] + s[1]), hi = (uint16_t)(int16_t)(s[2] + s[3]);
                a[j][i - i0].bsp[t] = (int32_t)(lo | hi << 16);
            }
    }
}

/* The 8 rows' scales (part 0 and 1) and mins of one record as bytes in the
 * sl layout. */
static ALWAYS_INLINE void scales8(const kx8_scales *w, __m256i *sc0, __m256i *sc1, __m256i *mn0, __m256i *mn1) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = ld(w->sl[0]), l1 = ld(w->sl[1]), h = ld(w->sh);
    *sc0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
    *mn0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
    *sc1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(h, m30));
    *mn1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}

/* imin for 8 rows: sum_j mn_j * bs_j, four madds of (mn, mn) x (bs, bs). */
static ALWAYS_INLINE __m256i mins8(__m256i mn0, __m256i mn1, const act_kblk *ab) {
    __m256i s = _mm256_madd_epi16(_mm256_shuffle_epi8(mn0, ctrl_mn(0)), _mm256_set1_epi32(ab->bsp[0]));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_shuffle_epi8(mn0, ctrl_mn(1)), _mm256_set1_epi32(ab->bsp[1])));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_shuffle_epi8(mn1, ctrl_mn(0)), _mm256_set1_epi32(ab->bsp[2])));
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_shuffle_epi8(mn1, ctrl_mn(1)), _mm256_set1_epi32(ab->bsp[3])));
}

/* Group g (elements 32j + 4g..) of sub-block j as unsigned bytes, row r in
 * lane r. Q4_K: the low (even j) or high (odd j) nibbles of chunk j / 2.
 * Q5_K: sub-blocks 0-3 are the low 5 bits of qv[j]; 4-7 take bits 0-2 from
 * the top of qv[j - 4] and bits 3-4 from q4's pair 2(j - 4) (16-bit shifts
 * of at most 5 move no wanted bit across a byte). */
static ALWAYS_INLINE __m256i unpack_k(const uint8_t *rec, int g, const int j, const int q5) {
    if (!q5) {
        const __m256i qv = ld(((const blk_q4_kx8 *)(const void *)rec)->qs + 256 * (j / 2) + 32 * g);
        return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(qv, 4) : qv, _mm256_set1_epi8(0x0f));
    }
    const blk_q5_kx8 *w = (const blk_q5_kx8 *)(const void *)rec;
    if (j < 4) return _mm256_and_si256(ld(w->qv[j][g]), _mm256_set1_epi8(0x1f));
    const int k = j - 4, sh = 3 - 2 * k;
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ld(w->qv[k][g]), 5), _mm256_set1_epi8(0x07));
    const __m256i t = ld(w->q4[g]);
    const __m256i hi = sh > 0 ? _mm256_slli_epi16(t, sh) : _mm256_srli_epi16(t, -sh);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x18)));
}

/* Sub-block j's madd multiplier for the 8 rows. */
static ALWAYS_INLINE __m256i scale_of(__m256i sc0, __m256i sc1, const int j) {
    return _mm256_shuffle_epi8(j < 4 ? sc0 : sc1, ctrl_sc(j % 4));
}

/* One group of 8 weight rows against mt (1..MT) activation rows over
 * super-blocks [i0, i1): acc[j] (lane r = weight row r) += ... The record
 * at wg + i * rec bytes is a blk_q4_kx8, or a blk_q5_kx8 when q5. */
static ALWAYS_INLINE void group_tile(const uint8_t *wg, const unsigned char *x, size_t xs, const int mt, int i0,
                                     int i1, act_kblk a[MT][KB], __m256 acc[MT], const int q5) {
    const size_t rec_bytes = q5 ? sizeof(blk_q5_kx8) : sizeof(blk_q4_kx8);
    /* groups per int16 sum: 8 maddubs of 4-bit quants fit int16, of 5-bit 4 */
    const int gs = q5 ? 4 : 8;
    for (int i = i0; i < i1; i++) {
        const kx8_scales *w = (const kx8_scales *)(const void *)(wg + (size_t)i * rec_bytes);
        const uint8_t *rec = (const uint8_t *)(const void *)w;
        if (mt == 1) er_kq8_prefetch(rec, rec_bytes);
        __m256i sc0, sc1, mn0, mn1;
        scales8(w, &sc0, &sc1, &mn0, &mn1);
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->dmin));
        const er_block_q8_k *xb[MT];
        __m256i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = _mm256_setzero_si256();
        }
        /* per chunk c and nibble half h (sub-block 2c + h): each activation
         * row's maddubs summed in int16, gs groups at a time, each sum
         * widened by a madd with the 8 rows' scales; unrolled, so that
         * Q5_K's shift counts are constants */
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            if (mt == 1 && q5) {
                /* Q5_K decode, k = c: sub-blocks k and 4 + k from the same
                 * loads (qv[k] and q4), so the record is read once, in
                 * address order but for q4's 256 bytes, which stay in L1
                 * (the half-by-half order below read Q5_K's file-layout
                 * records twice and was 4% slower on a whole model) */
                const int k = c;
                const int8_t *xq = xb[0]->qs;
                const __m256i sv0 = scale_of(sc0, sc1, k), sv1 = scale_of(sc0, sc1, 4 + k);
#pragma GCC unroll 2
                for (int g0 = 0; g0 < 8; g0 += gs) {
                    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int g = g0; g < g0 + gs; g++) {
                        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(unpack_k(rec, g, k, 1), bcast4(xq + 32 * k + 4 * g)));
                        s1 = _mm256_add_epi16(
                            s1, _mm256_maddubs_epi16(unpack_k(rec, g, 4 + k, 1), bcast4(xq + 32 * (4 + k) + 4 * g)));
                    }
                    isum[0] = _mm256_add_epi32(isum[0], _mm256_madd_epi16(s0, sv0));
                    isum[0] = _mm256_add_epi32(isum[0], _mm256_madd_epi16(s1, sv1));
                }
                continue;
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i sv = scale_of(sc0, sc1, 2 * c + h);
                if (mt == 1) {
                    /* Q4_K decode: the 8 groups unpacked first, then one chain
                     * of maddubs (12% faster than the tile loop below at m = 1) */
                    const int8_t *xq = xb[0]->qs + 64 * c + 32 * h;
                    __m256i u[8];
#pragma GCC unroll 8
                    for (int g = 0; g < 8; g++) u[g] = unpack_k(rec, g, 2 * c + h, q5);
                    __m256i s = _mm256_maddubs_epi16(u[0], bcast4(xq));
#pragma GCC unroll 8
                    for (int g = 1; g < 8; g++) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[g], bcast4(xq + 4 * g)));
                    isum[0] = _mm256_add_epi32(isum[0], _mm256_madd_epi16(s, sv));
                    continue;
                }
                /* prefill tiles: each group unpacked and used at once for every
                 * activation row, so mt int16 sums, int32 sums and float
                 * accumulators stay in registers; unrolled by 2, not 8 (a full
                 * unroll let GCC hoist the products and spill them) */
                __m256i s[MT];
                for (int j = 0; j < mt; j++) s[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
                for (int g = 0; g < 8; g++) {
                    const __m256i u = unpack_k(rec, g, 2 * c + h, q5);
#pragma GCC unroll 8
                    for (int j = 0; j < mt; j++)
                        s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(u, bcast4(xb[j]->qs + 64 * c + 32 * h + 4 * g)));
                    if (g % gs == gs - 1)
                        for (int j = 0; j < mt; j++) {
                            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s[j], sv));
                            s[j] = _mm256_setzero_si256();
                        }
                }
            }
        }
        for (int j = 0; j < mt; j++)
            acc[j] = er_kq8_accum(acc[j], dw, dmw, xb[j]->d, isum[j], mins8(mn0, mn1, &a[j][i - i0]));
    }
}

/* Row groups [c0, c1) against activation rows [j0, j0 + mt) over the
 * super-blocks [i0, i1) of the slice prepared in ab. */
static ALWAYS_INLINE void rows_tile(const er_matmul_args *a, size_t group_bytes, int c0, int c1, int j0, int mt, int i0,
                                    int i1, act_kblk ab[MT][KB], const int q5) {
    const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
    for (int r = c0; r < c1; r += 8) {
        const uint8_t *wg = (const uint8_t *)a->w + (size_t)(r / 8) * group_bytes;
        float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
        __m256 acc[MT];
        for (int j = 0; j < mt; j++) acc[j] = i0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + (size_t)j * a->y_stride);
        /* one call per tile height, so each inlined copy keeps its
         * accumulators in registers */
        switch (mt) {
        case 1: group_tile(wg, xj, a->x_stride, 1, i0, i1, ab, acc, q5); break;
        case 2: group_tile(wg, xj, a->x_stride, 2, i0, i1, ab, acc, q5); break;
        case 3: group_tile(wg, xj, a->x_stride, 3, i0, i1, ab, acc, q5); break;
        case 4: group_tile(wg, xj, a->x_stride, 4, i0, i1, ab, acc, q5); break;
        case 5: group_tile(wg, xj, a->x_stride, 5, i0, i1, ab, acc, q5); break;
        default: group_tile(wg, xj, a->x_stride, 6, i0, i1, ab, acc, q5); break;
        }
        for (int j = 0; j < mt; j++) _mm256_storeu_ps(y + (size_t)j * a->y_stride, acc[j]);
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 8 (forward.c chunks so). A slice after the first continues each lane's
 * sum from y, so the float additions stay in generic's order. */
static ALWAYS_INLINE void matmul_kx8(const er_matmul_args *a, const int q5) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * (q5 ? sizeof(blk_q5_kx8) : sizeof(blk_q4_kx8));
    const int chunk = er_kq8_row_chunk(group_bytes, 8);
    act_kblk ab[MT][KB];
    for (int i0 = 0; i0 < nb; i0 += KB) {
        const int i1 = nb - i0 < KB ? nb : i0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                prep((const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, i0, i1, ab);
                rows_tile(a, group_bytes, c0, c1, j0, mt, i0, i1, ab, q5);
            }
        }
    }
}

void ER_X86_FN(matmul_q4_kx8)(const er_matmul_args *a) { matmul_kx8(a, 0); }
void ER_X86_FN(matmul_q5_kx8)(const er_matmul_args *a) { matmul_kx8(a, 1); }
