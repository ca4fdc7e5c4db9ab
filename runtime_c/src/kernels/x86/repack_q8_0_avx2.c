/*
 * repack_q8_0_avx2.c — Q8_0 matrices in 8-row interleaved blocks, AVX2.
 *
 * Layout (repack_rows = 8; the same bytes as the file, rearranged at open by
 * er_avx2_repack_q8_0): for each group of 8 weight rows and each 32-element
 * block index b, one record
 *   { f16 d[8]; int8 q[8 groups][8 rows][4] }                 272 = 8 x 34 bytes
 * group g of row r holding the row's elements 4g..4g+3: one 32-byte load
 * gives 4 consecutive elements of each of the 8 rows, row r in 32-bit lane r.
 *
 * Per group the activation's 4 bytes are broadcast, take the weights' signs
 * and meet |w| in one maddubs for all 8 rows; the pair sums (up to
 * 2 * 127 * 127) widen by madd per group, as two of them could overflow
 * int16. Per block and activation row that is 8 x 4 vector ops plus one
 * convert and FMA for 8 rows, where the row-wise kernel (q_avx2.c) spends
 * about 9 per row (sign, maddubs, madd, convert, the scale product's
 * conversion and broadcast, FMA); |w| is taken once per tile of up to 6
 * activation rows. Measured on this project's Zen 4 VM on the 110M shapes
 * against q_avx2.c, min of N: prefill tiles (m = 64) 36 -> 60 GMAC/s, decode
 * from cache 27 -> 51 GMAC/s; decode from DRAM unchanged (~22 GB/s, memory
 * bound either way). Second round: tiles of 6 activation rows with the
 * group loop unrolled by 2 rather than 8, and the accumulators local to the
 * tile body (61 -> 65 GMAC/s at m = 64, +7-10% on every 110M shape; the full
 * unroll made GCC spill the per-group partial sums to the stack). Measured
 * and rejected for prefill: quants widened to int16 and multiplied by madd
 * (2 madd + 2 add per row and group, no sign ops) ran 20% slower. For decode: software prefetch 1-4 KiB ahead (slower: the
 * hardware prefetcher already streams; on 4 KiB pages a prefetch past the
 * page costs a TLB walk) and two row groups in flight at once (half the
 * DRAM rate: two interleaved streams 6.5 KiB apart defeat the prefetcher).
 * The avx512vnni table has its own 16-row layout
 * (repack_q8_0_x16_avx512.c): the weights stored +128 as VPDPBUSD's
 * unsigned operand, one instruction per group and activation row. On 8
 * rows of 256 bits the same idea had lost (decode from cache 82 -> 73 GB/s
 * on Zen 5: the per-block sums cost more than the sign operations saved).
 * With 2 MiB pages under the repacked weights decode reads at 95% of a
 * plain AVX2 read loop (28.7 of 30.0 GB/s, one thread); with 4 KiB pages
 * both run at ~20 GB/s.
 *
 * Arithmetic: each block's int32 dot per row is exact, converted and
 * FMA-accumulated with d_w * d_x: the same integers as generic, summed in
 * another float order (the same tolerance as the row-wise kernel).
 */
#include <string.h>

#include "kq_x8_avx2.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[8];
    int8_t q[256];
} blk_q8_0x8;

_Static_assert(sizeof(blk_q8_0x8) == 8 * sizeof(er_block_q8_0), "Q8_0x8 must be 8 blocks' bytes");

void er_avx2_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    er_avx2_interleave_x8(src, dst, row_bytes, n_in, n_out, ER_QK8_0);
}

static ALWAYS_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Activation block scales as float, prepared once per call and activation
 * row rather than once per row group; slices of KB blocks on the stack.
 * MT = 6 activation rows per tile: 6 int32 sums and 6 float accumulators
 * plus the weights' vectors still fit the 16 ymm registers with the group
 * loop unrolled by 2 (MT = 4 and 5 measured 2-3% slower). */
#define KB 256
#define MT 6

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, float dx[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) dx[j][b - b0] = _cvtsh_ss(xb[b].d);
    }
}

/* One row group against mt activation rows over the blocks [b0, b1), its
 * 8 outputs per row stored to y (added to them when add: a later slice).
 * The accumulators are locals of this body, inlined with a constant mt, so
 * they stay in registers; unrolling the group loop by 2 instead of 8 keeps
 * GCC from hoisting all products ahead of their sums (it spilled them). */
static ALWAYS_INLINE void group_tile(const blk_q8_0x8 *wg, const unsigned char *x, size_t xs, const int mt, int b0,
                                     int b1, float dx[MT][KB], float *y, size_t ys, int add) {
    __m256 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = _mm256_setzero_ps();
    for (int b = b0; b < b1; b++) {
        const blk_q8_0x8 *w = wg + b;
        if (mt == 1) er_kq8_prefetch(w, sizeof *w);
        const int8_t *xq[MT];
        __m256i s[MT];
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            s[j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 2
        for (int g = 0; g < 8; g++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w->q + 32 * g));
            const __m256i aw = _mm256_sign_epi8(wv, wv);
#pragma GCC unroll 8
            for (int j = 0; j < mt; j++) s[j] = er_x86_dot4_acc(s[j], aw, _mm256_sign_epi8(bcast4(xq[j] + 4 * g), wv));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        for (int j = 0; j < mt; j++)
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[j][b - b0])), acc[j]);
    }
    for (int j = 0; j < mt; j++) {
        float *yj = y + (size_t)j * ys;
        _mm256_storeu_ps(yj, add ? _mm256_add_ps(_mm256_loadu_ps(yj), acc[j]) : acc[j]);
    }
}

/* Row groups [c0, c1) against activation rows [j0, j0 + mt) over the blocks
 * [b0, b1) of the slice whose scales are in dx, added to y after the first
 * slice. */
static void rows_tile(const er_matmul_args *a, size_t group_bytes, int c0, int c1, int j0, int mt, int b0, int b1,
                      float dx[MT][KB]) {
    const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
    for (int r = c0; r < c1; r += 8) {
        const blk_q8_0x8 *wg = (const blk_q8_0x8 *)(const void *)((const unsigned char *)a->w + (size_t)(r / 8) * group_bytes);
        float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
        /* one call per tile height: each inlined copy has its own constant mt */
        switch (mt) {
        case 1: group_tile(wg, xj, a->x_stride, 1, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        case 2: group_tile(wg, xj, a->x_stride, 2, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        case 3: group_tile(wg, xj, a->x_stride, 3, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        case 4: group_tile(wg, xj, a->x_stride, 4, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        case 5: group_tile(wg, xj, a->x_stride, 5, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        default: group_tile(wg, xj, a->x_stride, 6, b0, b1, dx, y, a->y_stride, b0 != 0); break;
        }
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 8 (forward.c chunks so). */
void er_avx2_matmul_q8_0x8(const er_matmul_args *a) {
    const int nb = a->n / ER_QK8_0;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q8_0x8);
    const int chunk = er_kq8_row_chunk(group_bytes, 8);
    float dx[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                prep((const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, b0, b1, dx);
                rows_tile(a, group_bytes, c0, c1, j0, mt, b0, b1, dx);
            }
        }
    }
}
