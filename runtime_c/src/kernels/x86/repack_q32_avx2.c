/*
 * repack_q32_avx2.c — Q5_0, IQ4_NL, Q4_1 and Q5_1 matrices in 8-row
 * interleaved blocks, AVX2: the 32-element types llama.cpp's K-quant mixes
 * fall back to on rows that are not a multiple of 256 (issue 25), laid out
 * as Q4_0's (repack_avx2.c). The avx512vnni table has 16-row layouts of
 * its own (repack_q32_x16_avx512.c), held to this file's results bit for
 * bit.
 *
 * Layout (repack_rows = 8; each record the bytes of the 8 rows' blocks b,
 * rearranged at open into the arena's "repacked" section):
 *   Q5_0   { f16 d[8];            uint8 h[8][4]; uint8 q[128] }  176 = 8 x 22
 *   IQ4_NL { f16 d[8];                           uint8 q[128] }  144 = 8 x 18
 *   Q4_1   { f16 d[8]; f16 m[8];                 uint8 q[128] }  160 = 8 x 20
 *   Q5_1   { f16 d[8]; f16 m[8]; uint8 h[8][4]; uint8 q[128] }  192 = 8 x 24
 * q as Q4_0's: chunk c byte t of row r (offset 32c + 4r + t) holds element
 * 4c+t in its low nibble and 16+4c+t in its high nibble. h is each row's
 * qh word with its bits regrouped so one shift and one mask give a chunk's
 * fifth bits in place (bit 4 of each byte): byte t of row r holds in bit c
 * the fifth bit of element 4c+t and in bit 4+c that of element 16+4c+t.
 *
 * Why it pays: as Q4_0's layout, the 8 rows sit in the 8 int32 lanes, an
 * activation's 4 bytes are broadcast against them, the scales load as one
 * vector and no row needs a horizontal sum; the weights' unpacking (fifth
 * bits, IQ4_NL's grid look-up) is done once per chunk for a whole tile of
 * activation rows. Measured numbers: the report of the commit that added it.
 *
 * Arithmetic: each block's integer sums are exact and each row's float tail
 * is generic's (generic/dot_q4_1_q5.c, dot_iq4.c), statement for statement
 * (separate mul and add: -std=c11 keeps GCC from fusing them), summed over
 * the blocks in generic's order (a later stack slice continues from y), so
 * matmul_repacked returns generic's matmul bit for bit:
 *   Q5_0: maddubs of the unsigned 5-bit q (0..31) with x; int16 sums of two
 *     chunks (4 maddubs, |sum| <= 4 * 2 * 31 * 127 = 31496) widened to int32,
 *     minus 16 * sum(x).
 *   Q4_1/Q5_1: the same unsigned sums (Q4_1: four chunks, <= 30480) and
 *     sum(x), for d_w d_x Σqx + m_w d_x Σx.
 *   IQ4_NL: grid values (-127..113) by one shuffle; |g| multiplied by x
 *     with g's sign (pairs <= 2 * 127 * 127 = 32258, widened at once).
 */
#include <string.h>

#include "kq_x8_avx2.h" /* er_kq8_prefetch */
#include "../q5_regroup.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_Q5_0, T_IQ4_NL, T_Q4_1, T_Q5_1 };

/* byte offsets in a record of each type, and the record's size */
#define HAS_M(T) ((T) == T_Q4_1 || (T) == T_Q5_1)
#define HAS_H(T) ((T) == T_Q5_0 || (T) == T_Q5_1)
#define OFF_H(T) (HAS_M(T) ? 32 : 16)
#define OFF_Q(T) (OFF_H(T) + (HAS_H(T) ? 32 : 0))
#define REC(T) (OFF_Q(T) + 128)

/* ---- repacking (at open) -------------------------------------------------- */

/* File blocks: d, then m (has_m), then qh (has_h), then qs[16]. */
static void interleave(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int has_m, int has_h) {
    const size_t in_block = 2 + (has_m ? 2u : 0u) + (has_h ? 4u : 0u) + 16;
    const size_t off_h = has_m ? 32 : 16, off_q = off_h + (has_h ? 32 : 0);
    const int nb = n_in / 32;
    uint8_t *out = dst;
    for (int g = 0; g < n_out / 8; g++)
        for (int b = 0; b < nb; b++) {
            for (int r = 0; r < 8; r++) {
                const uint8_t *in = (const uint8_t *)src + (size_t)(8 * g + r) * row_bytes + (size_t)b * in_block;
                memcpy(out + 2 * r, in, 2);
                if (has_m) memcpy(out + 16 + 2 * r, in + 2, 2);
                if (has_h) er_q5_regroup_h(in + (has_m ? 4 : 2), out + off_h + 4 * r);
                const uint8_t *qs = in + in_block - 16;
                for (int c = 0; c < 4; c++) memcpy(out + off_q + 32 * c + 4 * r, qs + 4 * c, 4);
            }
            out += 8 * in_block;
        }
}

void er_avx2_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave(src, dst, row_bytes, n_in, n_out, 0, 1);
}
void er_avx2_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave(src, dst, row_bytes, n_in, n_out, 0, 0);
}
void er_avx2_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave(src, dst, row_bytes, n_in, n_out, 1, 0);
}
void er_avx2_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave(src, dst, row_bytes, n_in, n_out, 1, 1);
}

/* ---- kernels ---------------------------------------------------------------- */

typedef struct act_blk {
    float d;
    int32_t sum; /* Σ x of the block's 32 quants */
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

#define KB 256 /* activation blocks per stack slice, as repack_avx2.c */
#define MT 4   /* activation rows per tile */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int b0, int b1, act_blk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            a[j][b - b0].d = _cvtsh_ss(xb[b].d);
            a[j][b - b0].sum = sum_i8_32(xb[b].qs);
        }
    }
}

/* One group of 8 weight rows (records of type T) against mt activation rows
 * over blocks [b0, b1); lane r = weight row r. y holds the sums of blocks
 * before b0 when add, and they continue from there (generic's order). */
static ALWAYS_INLINE void group_tile(const int T, const unsigned char *wg, const unsigned char *x, size_t xs,
                                     const int mt, int b0, int b1, act_blk a[MT][KB], float *y, size_t ys, int add,
                                     int pf) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10);
    const __m256i one16 = _mm256_set1_epi16(1);
    const __m256i grid = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                          -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    __m256 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = add ? _mm256_loadu_ps(y + (size_t)j * ys) : _mm256_setzero_ps();
    for (int b = b0; b < b1; b++) {
        const unsigned char *w = wg + (size_t)b * REC(T);
        if (pf) er_kq8_prefetch(w, REC(T)); /* first pass over the chunk (repack_avx2.c) */
        const int8_t *xq[MT];
        __m256i s[MT], s16[MT];
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            s[j] = _mm256_setzero_si256();
            s16[j] = _mm256_setzero_si256();
        }
        const __m256i h = HAS_H(T) ? _mm256_loadu_si256((const __m256i *)(const void *)(w + OFF_H(T))) : m4;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(w + OFF_Q(T) + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (HAS_H(T)) {
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4 - c), m10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_srli_epi16(h, c), m10));
            }
            if (T == T_IQ4_NL) {
                lo = _mm256_shuffle_epi8(grid, lo);
                hi = _mm256_shuffle_epi8(grid, hi);
            }
            if (T == T_IQ4_NL) {
                const __m256i alo = _mm256_sign_epi8(lo, lo), ahi = _mm256_sign_epi8(hi, hi);
#pragma GCC unroll 8
                for (int j = 0; j < mt; j++) {
                    const __m256i pl = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(bcast4(xq[j] + 4 * c), lo));
                    const __m256i ph = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(bcast4(xq[j] + 16 + 4 * c), hi));
                    s[j] = _mm256_add_epi32(s[j], _mm256_add_epi32(_mm256_madd_epi16(pl, one16),
                                                                   _mm256_madd_epi16(ph, one16)));
                }
            } else {
#pragma GCC unroll 8
                for (int j = 0; j < mt; j++) {
                    s16[j] = _mm256_add_epi16(s16[j],
                                              _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xq[j] + 4 * c)),
                                                               _mm256_maddubs_epi16(hi, bcast4(xq[j] + 16 + 4 * c))));
                    if (c == 3 || (HAS_H(T) && c == 1)) { /* int16 bounds: the header */
                        s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(s16[j], one16));
                        s16[j] = _mm256_setzero_si256();
                    }
                }
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)w));
        for (int j = 0; j < mt; j++) {
            const act_blk *ab = &a[j][b - b0];
            const __m256 dx = _mm256_set1_ps(ab->d);
            __m256i isum = s[j];
            if (T == T_Q5_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(16 * ab->sum));
            if (HAS_M(T)) {
                const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(w + 16)));
                const __m256 dd = _mm256_mul_ps(dw, dx);
                const __m256 dm = _mm256_mul_ps(mw, dx);
                const __m256 pa = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd);
                const __m256 pb = _mm256_mul_ps(_mm256_set1_ps((float)ab->sum), dm);
                const __m256 t = _mm256_add_ps(pa, pb);
                acc[j] = _mm256_add_ps(acc[j], t);
            } else {
                const __m256 dd = _mm256_mul_ps(dw, dx);
                const __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd);
                acc[j] = _mm256_add_ps(acc[j], t);
            }
        }
    }
    for (int j = 0; j < mt; j++) _mm256_storeu_ps(y + (size_t)j * ys, acc[j]);
}

/* a->w: the repacked matrix; rows [r0, r1), r0 and r1 - r0 multiples of 8 */
static ALWAYS_INLINE void matmul_x8(const int T, const er_matmul_args *a) {
    const int nb = a->n / 32;
    const size_t group_bytes = (size_t)nb * REC(T);
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int j0 = 0; j0 < a->m; j0 += MT) {
            const int mt = a->m - j0 < MT ? a->m - j0 : MT;
            const unsigned char *xj = x + (size_t)j0 * a->x_stride;
            prep(xj, a->x_stride, mt, b0, b1, ab);
            for (int r = a->r0; r < a->r1; r += 8) {
                const unsigned char *wg = (const unsigned char *)a->w + (size_t)(r / 8) * group_bytes;
                float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                /* one call per tile height: each inlined copy has its own constant mt */
                switch (mt) {
                case 1: group_tile(T, wg, xj, a->x_stride, 1, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 2: group_tile(T, wg, xj, a->x_stride, 2, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                case 3: group_tile(T, wg, xj, a->x_stride, 3, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                default: group_tile(T, wg, xj, a->x_stride, 4, b0, b1, ab, y, a->y_stride, b0 != 0, j0 == 0); break;
                }
            }
        }
    }
}

void er_avx2_matmul_q5_0x8(const er_matmul_args *a) { matmul_x8(T_Q5_0, a); }
void er_avx2_matmul_iq4_nlx8(const er_matmul_args *a) { matmul_x8(T_IQ4_NL, a); }
void er_avx2_matmul_q4_1x8(const er_matmul_args *a) { matmul_x8(T_Q4_1, a); }
void er_avx2_matmul_q5_1x8(const er_matmul_args *a) { matmul_x8(T_Q5_1, a); }
