/*
 * repack_q6_k_avx2.c — Q6_K matrices in 8-row interleaved super-blocks, AVX2.
 *
 * Layout (repack_rows = 8; 8 x 210 = 1680 bytes per record, the file's 8
 * blocks' bits regrouped at open by er_avx2_repack_q6_k): for each group of
 * 8 weight rows and each super-block index i, one record
 *   f16 d[8]                 the 8 rows' scales side by side
 *   i8  sc[8][16]            pair p (sub-blocks 2p, 2p+1): byte 8h + 4o + q
 *                            is the scale of sub-block 2p + o of row 4h + q
 *   u8  q[16][3][32]         group t, vector v, byte 4r + k, for row r:
 *                            bits 0-5: quant (0..63) of element 64v + 4t + k;
 *                            bits 6-7: bits 2v, 2v + 1 of element 192 + 4t + k
 * The row's elements fall into four streams of 64 (elements 64s..64s+63):
 * streams 0-2 are one AND away from a 32-byte load (4 consecutive quants of
 * each of the 8 rows, row r in 32-bit lane r), stream 3 is gathered from the
 * top bits of the three (3 shifts, 3 ANDs, 2 ORs). The file's split (low
 * nibbles in ql, 2-bit fields in qh) costs 17 operations per 4 vectors, this
 * one 11: the decode kernel is bound by its instruction count, not by
 * memory. Groups 4b..4b+3 of a stream are sub-block 4s + b. The scale pairs
 * sign-extend to int16 in one instruction with rows 0-3 in the low 128-bit
 * half and rows 4-7 in the high one, where those rows' lanes are, so one
 * pshufb makes the madd multiplier of a sub-block for all 8 rows.
 *
 * Why it pays, against the row-wise kernel (qk_avx2.c), per super-block and
 * 8 rows: no horizontal sum per row, no per-row broadcast of 16 scalar
 * scales, one float tail for 8 rows, the offset of the unsigned quants (q,
 * not q - 32) taken off with 8 madds for all rows, and a prefill tile of
 * activation rows sharing each unpacked vector. Measured numbers: see
 * docs/PERFORMANCE.md's K-quant section (110M files made by llama.cpp's own
 * quantizer).
 *
 * Arithmetic: the quants multiply unsigned (0..63) and 32 * sum_j sc_j *
 * bsums_j comes off once (bsums_j is sub-block j's activation sum), the
 * same exact int32 as generic's sum over q - 32; two maddubs (|pair| <=
 * 2 * 63 * 127 each) are summed in int16 (<= 32004) before each madd with
 * the scales. The float tail is er_kq_accum's, lane by lane, over the
 * super-blocks in order: results are bit-identical to generic.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "kq_regroup_x86.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[8];
    int8_t sc[128];
    uint8_t q[16][3][32];
} blk_q6_kx8;

_Static_assert(sizeof(blk_q6_kx8) == 8 * sizeof(er_block_q6_k), "Q6_Kx8 must take 8 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */


void er_avx2_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q6_kx8 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g8 = 0; g8 < n_out / 8; g8++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 8; r++) {
                const er_block_q6_k *in =
                    (const er_block_q6_k *)(const void *)((const uint8_t *)src + (size_t)(8 * g8 + r) * row_bytes) + i;
                memcpy(&out->d[r], &in->d, sizeof in->d);
                for (int j = 0; j < 16; j++) out->sc[16 * (j / 2) + 8 * (r / 4) + 4 * (j % 2) + r % 4] = in->scales[j];
                er_kq_q6_quants(in, q);
                er_kq_q6_put(q, (uint8_t *)out->q, 8, r);
            }
}

/* ---- kernels ---------------------------------------------------------------- */

/* pshufb controls on a sign-extended scale pair (int16 entries e0..e7 per
 * 128-bit half: e0-3 sub-block 2p, e4-7 sub-block 2p + 1, rows in order).
 * k_even / k_odd: lane q gets (e_q, e_q) / (e_4+q, e_4+q), the madd
 * multiplier of either sub-block; k_pair: (e_q, e_4+q), for one madd with
 * the activation's (bsums_2p, bsums_2p+1). In memory, not built with set
 * intrinsics, so the hot loop loads them instead of assembling bytes. */
#define EV(q) 2 * q, 2 * q + 1, 2 * q, 2 * q + 1
#define OD(q) 8 + 2 * q, 9 + 2 * q, 8 + 2 * q, 9 + 2 * q
#define PR(q) 2 * q, 2 * q + 1, 8 + 2 * q, 9 + 2 * q
static const uint8_t k_even[32] __attribute__((aligned(32))) = {EV(0), EV(1), EV(2), EV(3), EV(0), EV(1), EV(2), EV(3)};
static const uint8_t k_odd[32] __attribute__((aligned(32))) = {OD(0), OD(1), OD(2), OD(3), OD(0), OD(1), OD(2), OD(3)};
static const uint8_t k_pair[32] __attribute__((aligned(32))) = {PR(0), PR(1), PR(2), PR(3), PR(0), PR(1), PR(2), PR(3)};
#undef EV
#undef OD
#undef PR

static ALWAYS_INLINE __m256i ctrl(const uint8_t *t) { return _mm256_load_si256((const __m256i *)(const void *)t); }

/* scale pair p of a record as int16, rows 0-3 low half, rows 4-7 high */
static ALWAYS_INLINE __m256i scale_pair(const blk_q6_kx8 *w, int p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w->sc + 16 * p)));
}

/* group t's quants of stream st (0..63, row r in lane r) */
static ALWAYS_INLINE __m256i unpack6(const blk_q6_kx8 *w, int t, const int st) {
    if (st < 3) return _mm256_and_si256(er_kq8_ld(w->q[t][st]), _mm256_set1_epi8(0x3f));
    const __m256i a = _mm256_and_si256(_mm256_srli_epi16(er_kq8_ld(w->q[t][0]), 6), _mm256_set1_epi8(0x03));
    const __m256i b = _mm256_and_si256(_mm256_srli_epi16(er_kq8_ld(w->q[t][1]), 4), _mm256_set1_epi8(0x0c));
    const __m256i c = _mm256_and_si256(_mm256_srli_epi16(er_kq8_ld(w->q[t][2]), 2), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(_mm256_or_si256(a, b), c);
}

#define MT 6 /* activation rows per tile (m = 6 from cache: 84 GMAC/s; MT = 4: 77) */

/* One group of 8 weight rows against mt (1..MT) activation rows over all
 * super-blocks: acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const blk_q6_kx8 *wg, int nb, const unsigned char *x, size_t xs, const int mt,
                                     __m256 acc[MT]) {
    for (int i = 0; i < nb; i++) {
        const blk_q6_kx8 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m256i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = _mm256_setzero_si256();
        }
        /* the offset of the unsigned quants: isum starts at -32 sum_j sc_j bs_j */
        for (int p = 0; p < 8; p++) {
            const __m256i sp = _mm256_shuffle_epi8(scale_pair(w, p), ctrl(k_pair));
            for (int j = 0; j < mt; j++) {
                int32_t bs;
                memcpy(&bs, xb[j]->bsums + 2 * p, sizeof bs);
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(sp, _mm256_set1_epi32(bs)));
            }
        }
        for (int j = 0; j < mt; j++) isum[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(isum[j], 5));
        if (mt == 1) {
            /* decode: the record in address order (group t's three vectors,
             * then t + 1's), all four streams per group. The stream-by-
             * stream order below walks each record three times at a 96-byte
             * stride, which the hardware prefetchers follow worse: from
             * memory it ran at ~21 GB/s where its from-cache rate is ~40. */
            const int8_t *xq = xb[0]->qs;
#ifndef ER_PFD
#define ER_PFD 16384
#endif
            if (ER_PFD)
                for (int l = 0; l < (int)sizeof *w; l += 64) _mm_prefetch((const char *)w + ER_PFD + l, _MM_HINT_T0);
#pragma GCC unroll 4
            for (int b = 0; b < 4; b++) {
                __m256i sv[4];
                for (int st = 0; st < 4; st++)
                    sv[st] = _mm256_shuffle_epi8(scale_pair(w, 2 * st + b / 2), ctrl(b % 2 ? k_odd : k_even));
#pragma GCC unroll 2
                for (int tp = 0; tp < 2; tp++) {
                    const int t = 4 * b + 2 * tp;
                    __m256i s[4];
#pragma GCC unroll 4
                    for (int st = 0; st < 4; st++)
                        s[st] = _mm256_add_epi16(
                            _mm256_maddubs_epi16(unpack6(w, t, st), er_kq8_bcast4(xq + 64 * st + 4 * t)),
                            _mm256_maddubs_epi16(unpack6(w, t + 1, st), er_kq8_bcast4(xq + 64 * st + 4 * t + 4)));
                    for (int st = 0; st < 4; st++)
                        isum[0] = _mm256_add_epi32(isum[0], _mm256_madd_epi16(s[st], sv[st]));
                }
            }
        } else {
            /* stream by stream, so each activation row holds one int16 sum
             * and its int32 isum in registers */
#pragma GCC unroll 4
            for (int st = 0; st < 4; st++)
#pragma GCC unroll 2
                for (int bp = 0; bp < 2; bp++) {
                    const __m256i cv = scale_pair(w, 2 * st + bp);
                    const __m256i sv0 = _mm256_shuffle_epi8(cv, ctrl(k_even));
                    const __m256i sv1 = _mm256_shuffle_epi8(cv, ctrl(k_odd));
                    /* groups 8bp..8bp+7: sub-blocks 4st + 2bp (sv0) and + 1 (sv1) */
#pragma GCC unroll 4
                    for (int tp = 0; tp < 4; tp++) {
                        const int t = 8 * bp + 2 * tp;
                        const __m256i ua = unpack6(w, t, st), ub = unpack6(w, t + 1, st);
                        for (int j = 0; j < mt; j++) {
                            const int8_t *xq = xb[j]->qs + 64 * st + 4 * t;
                            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(ua, er_kq8_bcast4(xq)),
                                                               _mm256_maddubs_epi16(ub, er_kq8_bcast4(xq + 4)));
                            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(s, tp < 2 ? sv0 : sv1));
                        }
                    }
                }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        /* generic passes dmin 0 and imin 0: the same statements, the same bits */
        for (int j = 0; j < mt; j++)
            acc[j] = er_kq8_accum(acc[j], dw, _mm256_setzero_ps(), xb[j]->d, isum[j], _mm256_setzero_si256());
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 8 (forward.c chunks so). */
void ER_X86_FN(matmul_q6_kx8)(const er_matmul_args *a) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q6_kx8);
    const int chunk = er_kq8_row_chunk(group_bytes, 8);
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
            for (int r = c0; r < c1; r += 8) {
                const blk_q6_kx8 *wg =
                    (const blk_q6_kx8 *)(const void *)((const unsigned char *)a->w + (size_t)(r / 8) * group_bytes);
                float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                __m256 acc[MT];
                for (int j = 0; j < MT; j++) acc[j] = _mm256_setzero_ps();
                /* one call per tile height, so each inlined copy keeps its
                 * accumulators in registers */
                switch (mt) {
                case 1: group_tile(wg, nb, xj, a->x_stride, 1, acc); break;
                case 2: group_tile(wg, nb, xj, a->x_stride, 2, acc); break;
                case 3: group_tile(wg, nb, xj, a->x_stride, 3, acc); break;
                case 4: group_tile(wg, nb, xj, a->x_stride, 4, acc); break;
                case 5: group_tile(wg, nb, xj, a->x_stride, 5, acc); break;
                default: group_tile(wg, nb, xj, a->x_stride, 6, acc); break;
                }
                for (int j = 0; j < mt; j++) _mm256_storeu_ps(y + (size_t)j * a->y_stride, acc[j]);
            }
        }
    }
}
