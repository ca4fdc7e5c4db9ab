/*
 * repack_q8_0_x16_avx512.c — Q8_0 matrices in 16-row interleaved blocks for
 * the avx512vnni table: one 512-bit VPDPBUSD per group of 4 elements x 16
 * weight rows, with nothing else per group. Built only with the AVX-512
 * VL/BW/VNNI flags (ER_X86_VNNI).
 *
 * Layout (repack_rows = 16; 16 x 34 = 544 bytes per record, written at open
 * by er_avx512vnni_repack_q8_0): per group of 16 weight rows and block b,
 *   f16 d[16]                the 16 rows' scales side by side
 *   u8  q[8][16][4]          group g, row r: the row's elements 4g..4g+3,
 *                            each XOR 0x80 (w + 128 as an unsigned byte)
 * VPDPBUSD multiplies unsigned by signed bytes: stored +128, the weights are
 * its unsigned operand as they are, and the activation's 4 bytes its signed
 * operand broadcast from memory. Each block's sums then start at
 * -128 * sum(x) (the activation block's, prepared once per call) and come
 * out as the exact int32 dot. The 8-row layout (repack_q8_0_avx2.c) spends
 * two VPSIGNB beside each VPDPBUSD, on 8 rows at a time. Measured against
 * it on Zen 4, one thread (scripts/kernel_stream.c): from L2 (256 x 2048)
 * decode 53 -> 85 GB/s, 4 rows 83 -> 132 GMAC/s, 64 rows 90 -> 139 GMAC/s;
 * decode from DRAM (32768 x 2048) 0.77-0.81 -> 0.87-0.94 of a plain read.
 *
 * Arithmetic: per row and block the exact int32 dot, converted and
 * FMA-accumulated with d_w * d_x in block order: the 8-row kernel's
 * statements on 16 lanes, so the results are avx2's bit for bit
 * (test_repack's twin check).
 */
#include <string.h>

#include "kq_x8_avx2.h"

#if ER_X86_VNNI

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[16];
    uint8_t q[512];
} blk_q8_0x16;

_Static_assert(sizeof(blk_q8_0x16) == 16 * sizeof(er_block_q8_0), "Q8_0x16 must be 16 blocks' bytes");

/* n_out a multiple of 16 */
void er_avx512vnni_repack_q8_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK8_0;
    blk_q8_0x16 *out = dst;
    for (int g = 0; g < n_out / 16; g++)
        for (int b = 0; b < nb; b++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_q8_0 *in =
                    (const er_block_q8_0 *)(const void *)((const uint8_t *)src + (size_t)(16 * g + r) * row_bytes) + b;
                out->d[r] = in->d;
                for (int e = 0; e < ER_QK8_0; e++) out->q[64 * (e / 4) + 4 * r + e % 4] = (uint8_t)in->qs[e] ^ 0x80;
            }
}

/* An activation block's scale as float and its quants' -128 * sum, once per
 * call and row; slices of KB blocks on the stack. MT activation rows per
 * tile: 4 sums and 4 accumulators in registers (the Q4_0 kernel's tile). */
#define KB 256
#define MT 4

typedef struct {
    float d;
    int32_t bias; /* -128 * sum of the 32 quants: the sums' start */
} act_blk;

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, act_blk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)xb[b].qs);
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
            a[j][b - b0].d = _cvtsh_ss(xb[b].d);
            a[j][b - b0].bias = -128 * er_avx2_hsum_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
        }
    }
}

/* One group of 16 weight rows against mt activation rows over blocks
 * [b0, b1), lane r = weight row r, stored to y (added to it when add: a
 * later slice). One row (decode) splits each block's 8 VPDPBUSDs over two
 * chains, so consecutive blocks' chains overlap less than the 4-cycle
 * latency binds; several rows are independent chains already. A tile of
 * several rows prefetches the records into L2, one row into L1 where the
 * CPU wants it (kq_x8_avx2.h says why each): on Zen 4 this kernel read
 * 32768 x 2048 from DRAM at 0.67-0.80 of a plain read with the L1
 * prefetch, 0.87-0.94 without (the 8-row kernel: 0.77-0.88). */
static ALWAYS_INLINE void group_tile16(const blk_q8_0x16 *wg, const unsigned char *x, size_t xs, const int mt, int b0,
                                       int b1, act_blk a[MT][KB], float *y, size_t ys, int add, int pf) {
    __m512 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = _mm512_setzero_ps();
    for (int b = b0; b < b1; b++) {
        const blk_q8_0x16 *w = wg + b;
        if (pf && mt > 1)
            er_kq8_prefetch_l2(w, sizeof *w);
        else if (pf)
            er_kq8_prefetch(w, sizeof *w);
        const int8_t *xq[MT];
        __m512i s[MT], h = _mm512_setzero_si512();
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            s[j] = _mm512_set1_epi32(a[j][b - b0].bias);
        }
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w->q + 64 * g));
            if (mt == 1 && g % 2)
                h = er_x86_dpbusd512_bcast4(h, wv, xq[0] + 4 * g);
            else
                for (int j = 0; j < mt; j++) s[j] = er_x86_dpbusd512_bcast4(s[j], wv, xq[j] + 4 * g);
        }
        if (mt == 1) s[0] = _mm512_add_epi32(s[0], h);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->d));
        for (int j = 0; j < mt; j++)
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), _mm512_mul_ps(dw, _mm512_set1_ps(a[j][b - b0].d)), acc[j]);
    }
    for (int j = 0; j < mt; j++) {
        float *yj = y + (size_t)j * ys;
        _mm512_storeu_ps(yj, add ? _mm512_add_ps(_mm512_loadu_ps(yj), acc[j]) : acc[j]);
    }
}

/* a->w: the 16-row layout; rows [r0, r1) multiples of 16 (forward.c cuts
 * at multiples of repack_rows). Chunks of rows of about 64 KiB of weights
 * per pass over the activation tiles (er_kq8_row_chunk), so a prefill
 * reads them from DRAM once. */
void er_avx512vnni_matmul_q8_0x16(const er_matmul_args *a) {
    const int nb = a->n / ER_QK8_0;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q8_0x16);
    const int chunk = er_kq8_row_chunk(group_bytes, 16);
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                const unsigned char *xj = x + (size_t)j0 * a->x_stride;
                prep(xj, a->x_stride, mt, b0, b1, ab);
                for (int r = c0; r < c1; r += 16) {
                    const blk_q8_0x16 *wg =
                        (const blk_q8_0x16 *)(const void *)((const unsigned char *)a->w + (size_t)(r / 16) * group_bytes);
                    float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                    const int pf = j0 == 0;
                    switch (mt) {
                    case 1: group_tile16(wg, xj, a->x_stride, 1, b0, b1, ab, y, a->y_stride, b0 != 0, pf); break;
                    case 2: group_tile16(wg, xj, a->x_stride, 2, b0, b1, ab, y, a->y_stride, b0 != 0, pf); break;
                    case 3: group_tile16(wg, xj, a->x_stride, 3, b0, b1, ab, y, a->y_stride, b0 != 0, pf); break;
                    default: group_tile16(wg, xj, a->x_stride, 4, b0, b1, ab, y, a->y_stride, b0 != 0, pf); break;
                    }
                }
            }
        }
    }
}

#endif
