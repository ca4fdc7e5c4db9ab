/*
 * repack_avx2.c — Q4_0 matrices in 8-row interleaved blocks, AVX2.
 *
 * Layout (repack_rows = 8; the same bytes as the file, rearranged at open by
 * er_avx2_repack_q4_0 into the arena's "repacked" section): for each group
 * of 8 weight rows and each 32-element block index b, one record
 *   { f16 d[8]; uint8 q[4 chunks][8 rows][4] }                144 = 8 x 18 bytes
 * with the 8 rows' scales side by side, and chunk c byte t of row r holding
 * element 4c+t in its low nibble and element 16+4c+t in its high nibble
 * (unsigned 0..15, value nibble - 8): one 32-byte load and two masks give
 * 4 consecutive elements of each of the 8 rows, row r in 32-bit lane r.
 *
 * Why it pays: with rows in lanes, the activation's 4 bytes are broadcast
 * and one maddubs gives all 8 rows' partial sums; the 8 scales load and
 * convert as one vector; no horizontal sum per row and block; the unsigned
 * nibbles need no sign trick (the -8 offset comes off once per block as
 * 8 * sum(x)). Per block of 8 rows ~45 vector ops where the row-wise kernel
 * (q_avx2.c) spends ~110. Measured on a Zen 4 core (768 x 2048 and
 * 768 x 131072 matrices): decode 21 -> 48 GMAC/s from cache, 6 -> 20 GB/s
 * streaming from DRAM (row-wise Q4_0 decode was compute-bound), prefill
 * tiles of 4 activation rows 32 -> 55 GMAC/s.
 *
 * Q8_0 has its own 8-row layout (repack_q8_0_avx2.c); Q4_K too
 * (repack_q4_k_avx2.c).
 *
 * Arithmetic: each block's int32 sum per row is exact (maddubs of the
 * unsigned nibbles, int16 sums of 8 groups <= 8 * 2 * 15 * 127 = 30480, then
 * minus 8 * sum(x)), converted and FMA-accumulated with d_w * d_x — the same
 * integers as generic, summed in another float order.
 */
#include <string.h>

#include "avx2.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[8];
    uint8_t q[128];
} blk_q4_0x8;

_Static_assert(sizeof(blk_q4_0x8) == 8 * sizeof(er_block_q4_0), "Q4_0x8 must be 8 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

void er_avx2_repack_q4_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK4_0;
    blk_q4_0x8 *out = dst;
    for (int g = 0; g < n_out / 8; g++)
        for (int b = 0; b < nb; b++, out++)
            for (int r = 0; r < 8; r++) {
                const er_block_q4_0 *in =
                    (const er_block_q4_0 *)(const void *)((const uint8_t *)src + (size_t)(8 * g + r) * row_bytes) + b;
                out->d[r] = in->d;
                /* qs[j] already pairs element j (low) with j+16 (high) */
                for (int c = 0; c < 4; c++) memcpy(&out->q[32 * c + 4 * r], &in->qs[4 * c], 4);
            }
}

/* ---- kernels ---------------------------------------------------------------- */

/* What the kernel needs of one activation block besides its quants: its
 * scale as float and 8 * the sum of its quants, prepared once per block and
 * activation row rather than once per weight row group. */
typedef struct act_blk {
    float d;
    int32_t sum8;
} act_blk;

static ALWAYS_INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

static ALWAYS_INLINE int32_t sum_i8_32(const int8_t *q) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)q);
    const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
    return er_avx2_hsum_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

/* 8 rows' exact int32 dots with one activation block (unsigned nibbles,
 * offset removed through sum8). u[g]: unpacked group g. */
static ALWAYS_INLINE __m256i dots_q4(const __m256i u[8], const int8_t *xq, int32_t sum8) {
    __m256i s = _mm256_maddubs_epi16(u[0], bcast4(xq));
    for (int g = 1; g < 8; g++) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[g], bcast4(xq + 4 * g)));
    return _mm256_sub_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)), _mm256_set1_epi32(sum8));
}

/* Activation blocks prepared per call in slices of at most KB blocks (the
 * arrays live on the stack); a matrix wider than that accumulates the slices
 * into y. KB * 32 = 8192 elements covers every layer of models up to ~7B in
 * one slice. */
#define KB 256
#define MT 4 /* activation rows per tile */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, act_blk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            a[j][b - b0].d = _cvtsh_ss(xb[b].d);
            a[j][b - b0].sum8 = 8 * sum_i8_32(xb[b].qs);
        }
    }
}

/* One group of 8 weight rows against mt (1..4) activation rows over blocks
 * [b0, b1): acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const blk_q4_0x8 *wg, const unsigned char *x, size_t xs, int mt, int b0,
                                     int b1, act_blk a[MT][KB], __m256 acc[MT]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int b = b0; b < b1; b++) {
        const blk_q4_0x8 *w = wg + b;
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w->d));
        __m256i u[8];
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w->q + 32 * c));
            u[c] = _mm256_and_si256(q, m4);
            u[c + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        for (int j = 0; j < mt; j++) {
            const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b;
            const act_blk *ab = &a[j][b - b0];
            const __m256i d = dots_q4(u, xb->qs, ab->sum8);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), acc[j]);
        }
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 a multiple of 8 and
 * r1 - r0 a multiple of 8 (forward.c chunks so). */
void er_avx2_matmul_q4_0x8(const er_matmul_args *a) {
    const int nb = a->n / ER_QK4_0;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q4_0x8);
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = x + (size_t)j0 * a->x_stride;
            prep(xj, a->x_stride, mt, b0, b1, ab);
            for (int r = a->r0; r < a->r1; r += 8) {
                const blk_q4_0x8 *wg = (const blk_q4_0x8 *)(const void *)((const unsigned char *)a->w +
                                                                          (size_t)(r / 8) * group_bytes);
                __m256 acc[MT] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
                /* one call per tile height, so each inlined copy keeps its
                 * accumulators in registers */
                switch (mt) {
                case 1: group_tile(wg, xj, a->x_stride, 1, b0, b1, ab, acc); break;
                case 2: group_tile(wg, xj, a->x_stride, 2, b0, b1, ab, acc); break;
                case 3: group_tile(wg, xj, a->x_stride, 3, b0, b1, ab, acc); break;
                default: group_tile(wg, xj, a->x_stride, 4, b0, b1, ab, acc); break;
                }
                for (int j = 0; j < mt; j++) {
                    float *y = a->y + (size_t)(j0 + j) * a->y_stride + (size_t)r;
                    if (b0 == 0)
                        _mm256_storeu_ps(y, acc[j]);
                    else
                        _mm256_storeu_ps(y, _mm256_add_ps(_mm256_loadu_ps(y), acc[j]));
                }
            }
        }
    }
}
