/*
 * repack_q32_x16_avx512.c — Q5_0, IQ4_NL, Q4_1 and Q5_1 matrices in 16-row
 * interleaved blocks for the avx512vnni table: one 512-bit VPDPBUSD per
 * group of 4 elements x 16 weight rows. Built only with the AVX-512
 * VL/BW/VNNI flags (ER_X86_VNNI); the avx2 table keeps the 8-row layouts of
 * repack_q32_avx2.c.
 *
 * Layout (repack_rows = 16; each record the bytes of the 16 rows' blocks b,
 * rearranged at open into the arena's "repacked" section):
 *   Q5_0   { f16 d[16];             uint8 h[16][4]; uint8 q[256] }  352 = 16 x 22
 *   IQ4_NL { f16 d[16];                             uint8 q[256] }  288 = 16 x 18
 *   Q4_1   { f16 d[16]; f16 m[16];                  uint8 q[256] }  320 = 16 x 20
 *   Q5_1   { f16 d[16]; f16 m[16];  uint8 h[16][4]; uint8 q[256] }  384 = 16 x 24
 * q byte 64c + 4r + t (chunk c, row r) holds row r's elements 4c+t ("low")
 * and 16+4c+t ("high"), so one 64-byte load is 4 low and 4 high elements
 * of each of the 16 rows, row r in int32 lane r:
 *   IQ4_NL, Q4_1: the file's byte, low element in the low nibble (the 16-row
 *     Q4_0's layout: the same bytes, moved);
 *   Q5_0, Q5_1: the low element's 5 bits on top (bits 3-7), the high
 *     element's bits 0-2 below, its bits 3-4 in h: byte t of row r holds
 *     chunk c's in bits 2c and 2c+1.
 * The 5-bit low element is then one mask away (its value x 8 in place, for
 * one activation row; a shift for a tile), the high one a shift or add of
 * h, a mask and a VPTERNLOG per chunk. The 8-row layout's nibbles and
 * regrouped fifth bits (q5_regroup.h) in 16-row records took 7 operations
 * per chunk, and Q5_0 decode from L2 ran at 46 GB/s where this one ran 59
 * (same session).
 *
 * Why it pays: the weights' unpacking (masks, fifth bits, IQ4_NL's grid
 * look-up by VPSHUFB in each 128-bit lane: AVX-512BW, not VBMI) is done
 * once per 16 rows instead of 8, each VPDPBUSD serves 16 rows with no
 * int16 step, the scales convert as one vector, and no row needs a
 * horizontal sum. All four types are VPDPBUSD's unsigned weight operand as
 * stored: Q5_0 (0..31) takes 16 * sum(x) off, IQ4_NL looks up grid + 128
 * and takes 128 * sum(x) off (both as the sums' start), Q4_1/Q5_1 need
 * nothing. Measured against the 8-row layout on Zen 4, one thread,
 * scripts/kernel_stream.c, decode prefetch off (Zen 4's policy), base and
 * new alternated, medians of 11 (L2) or 3-5 pairs (busy 2-vCPU VM):
 *            L2 m=1 GB/s   4 rows: DRAM ratio, L2 GMAC/s   m=64 GMAC/s
 *   Q5_0     39 -> 64      0.30 -> 0.80,  90 -> 155        127 -> 146
 *   IQ4_NL   37 -> 49      0.27 -> 0.69, 100 -> 160        132 -> 158
 *   Q4_1     46 -> 63      0.27 -> 0.70,  93 -> 140        125 -> 134
 *   Q5_1     42 -> 62      0.28 -> 0.76,  73 -> 111        116 -> 125
 * (L2: 256 x 2048; DRAM: 32768 x 4096, as a ratio to a plain read of the
 * same bytes; m=64: 768 x 2048.) One row from DRAM reads at 0.9-1.0 of
 * the plain read with either layout in quiet runs (medians 0.92-0.97 for
 * all four): the read rate bounds it. The 4-row gain from DRAM is mostly
 * the L2 prefetch the 8-row kernel lacks.
 *
 * Arithmetic: each block's integer sums are exact, and each row's float
 * tail is repack_q32_avx2.c's, statement for statement on 16 lanes
 * (separate mul and add, no FMA: generic/dot_q4_1_q5.c and dot_iq4.c's
 * order), continuing from y for a later stack slice: the results are the
 * avx2 table's and generic's bit for bit (test_repack's twin check).
 */
#include <string.h>

#include "kq_x8_avx2.h" /* er_kq8_prefetch, er_kq8_prefetch_l2, er_kq8_row_chunk */

#if ER_X86_VNNI

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_Q5_0, T_IQ4_NL, T_Q4_1, T_Q5_1 };

/* byte offsets in a record of each type, and the record's size */
#define HAS_M(T) ((T) == T_Q4_1 || (T) == T_Q5_1)
#define HAS_H(T) ((T) == T_Q5_0 || (T) == T_Q5_1)
#define OFF_H(T) (HAS_M(T) ? 64 : 32)
#define OFF_Q(T) (OFF_H(T) + (HAS_H(T) ? 64 : 0))
#define REC(T) (OFF_Q(T) + 256)

/* ---- repacking (at open) -------------------------------------------------- */

/* 5-bit element j of a Q5_0/Q5_1 block, h its qh as a word
 * (generic/dot_q4_1_q5.c's q5_at) */
static int q5_at(uint32_t h, const uint8_t qs[16], int j) {
    return (j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4) | (int)((h >> j) & 1) << 4;
}

/* File blocks: d, then m (has_m), then qh (has_h), then qs[16]. n_out a
 * multiple of 16. */
static void interleave16(const void *src, void *dst, size_t row_bytes, int n_in, int n_out, int has_m, int has_h) {
    const size_t in_block = 2 + (has_m ? 2u : 0u) + (has_h ? 4u : 0u) + 16;
    const size_t off_h = has_m ? 64 : 32, off_q = off_h + (has_h ? 64 : 0);
    const int nb = n_in / 32;
    uint8_t *out = dst;
    for (int g = 0; g < n_out / 16; g++)
        for (int b = 0; b < nb; b++) {
            for (int r = 0; r < 16; r++) {
                const uint8_t *in = (const uint8_t *)src + (size_t)(16 * g + r) * row_bytes + (size_t)b * in_block;
                const uint8_t *qh = in + (has_m ? 4 : 2), *qs = in + in_block - 16;
                const uint32_t h =
                    (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
                memcpy(out + 2 * r, in, 2);
                if (has_m) memcpy(out + 32 + 2 * r, in + 2, 2);
                for (int c = 0; c < 4; c++)
                    for (int t = 0; t < 4; t++) {
                        uint8_t *q = out + off_q + 64 * c + 4 * r + t;
                        if (!has_h) {
                            *q = qs[4 * c + t];
                            continue;
                        }
                        const int lo = q5_at(h, qs, 4 * c + t), hi = q5_at(h, qs, 16 + 4 * c + t);
                        uint8_t *top = out + off_h + 4 * r + t;
                        if (c == 0) *top = 0;
                        *q = (uint8_t)(lo << 3 | (hi & 7));
                        *top = (uint8_t)(*top | (hi >> 3) << (2 * c));
                    }
            }
            out += 16 * in_block;
        }
}

void er_avx512vnni_repack_q5_0(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave16(src, dst, row_bytes, n_in, n_out, 0, 1);
}
void er_avx512vnni_repack_iq4_nl(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave16(src, dst, row_bytes, n_in, n_out, 0, 0);
}
void er_avx512vnni_repack_q4_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave16(src, dst, row_bytes, n_in, n_out, 1, 0);
}
void er_avx512vnni_repack_q5_1(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    interleave16(src, dst, row_bytes, n_in, n_out, 1, 1);
}

/* ---- kernels ---------------------------------------------------------------- */

/* an activation block's scale, sum of quants as the float tail wants it,
 * and the integer sums' start (minus the weights' offset times the sum),
 * once per call, slice and tile */
typedef struct act_blk {
    float d;
    float sumf;   /* (float) Σ x of the block's 32 quants */
    int32_t bias; /* -16 (Q5_0) or -128 (IQ4_NL) x Σ x; 0 */
} act_blk;

#define KB 256 /* activation blocks per stack slice, as repack_q32_avx2.c */
#define MT 4   /* activation rows per tile: 4 sums and 4 accumulators in registers */

static ALWAYS_INLINE void prep(const int T, const unsigned char *x, size_t xs, int mt, int b0, int b1,
                               act_blk a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)j * xs);
        for (int b = b0; b < b1; b++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)xb[b].qs);
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
            const int32_t sum = er_avx2_hsum_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
            a[j][b - b0].d = _cvtsh_ss(xb[b].d);
            a[j][b - b0].sumf = (float)sum;
            a[j][b - b0].bias = T == T_Q5_0 ? -16 * sum : T == T_IQ4_NL ? -128 * sum : 0;
        }
    }
}

/* VPTERNLOG's "c ? a : b" (a, b, c its three operands in order) */
#define SELECT 0xE4

/* One group of 16 weight rows (records of type T) against mt activation
 * rows over blocks [b0, b1); lane r = weight row r. y holds the sums of
 * blocks before b0 when add, and they continue from there (generic's
 * order). One row (decode) puts the low and high halves' VPDPBUSDs in two
 * chains, so consecutive blocks overlap more than one 8-deep chain would
 * let them, and the half that sits at the top of its byte (Q5's low
 * elements x8, Q4_1's high nibbles x16) multiplies in place, masked, not
 * shifted: its sum is a multiple of 8 or 16, taken down exactly once per
 * block. Several rows share each unpacked chunk, so it is shifted once
 * for all of them instead. A tile of several rows prefetches into L2, one
 * row into L1 where the CPU wants it (kq_x8_avx2.h says why each). */
static ALWAYS_INLINE void group_tile16(const int T, const unsigned char *wg, const unsigned char *x, size_t xs,
                                       const int mt, int b0, int b1, act_blk a[MT][KB], float *y, size_t ys, int add,
                                       int pf) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), mf0 = _mm512_set1_epi8((char)0xf0);
    const __m512i m07 = _mm512_set1_epi8(0x07), m18 = _mm512_set1_epi8(0x18), m1f = _mm512_set1_epi8(0x1f),
                  mf8 = _mm512_set1_epi8((char)0xf8);
    /* llama.cpp's kvalues_iq4nl + 128: unsigned for VPDPBUSD */
    const __m512i grid = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141,
                                                              (char)153, (char)166, (char)181, (char)197, (char)217,
                                                              (char)241));
    /* the in-place half's scale, as a shift: 0 where nothing is in place */
    const int down = mt > 1 ? 0 : HAS_H(T) ? 3 : T == T_Q4_1 ? 4 : 0;
    __m512 acc[MT];
    for (int j = 0; j < mt; j++) acc[j] = add ? _mm512_loadu_ps(y + (size_t)j * ys) : _mm512_setzero_ps();
    /* two blocks per iteration: Q5_0 decode from L2 58 -> 65 GB/s (best of
     * 7 pairs), the other types and tiles unchanged */
#pragma GCC unroll 2
    for (int b = b0; b < b1; b++) {
        const unsigned char *w = wg + (size_t)b * REC(T);
        if (pf && mt > 1)
            er_kq8_prefetch_l2(w, REC(T));
        else if (pf)
            er_kq8_prefetch(w, REC(T));
        const int8_t *xq[MT];
        __m512i s[MT], s2 = _mm512_setzero_si512();
        for (int j = 0; j < mt; j++) {
            xq[j] = ((const er_block_q8_0 *)(const void *)(x + (size_t)j * xs) + b)->qs;
            /* the offset's multiple of sum(x) taken off up front: the same integer */
            s[j] = _mm512_set1_epi32(a[j][b - b0].bias);
        }
        /* chunk c's high elements' bits 3-4, from bits 2c and 2c+1 of h,
         * moved to bits 3-4 (the rest masked off below) */
        __m512i top[4];
        if (HAS_H(T)) {
            const __m512i h = _mm512_loadu_si512((const void *)(w + OFF_H(T)));
            top[0] = _mm512_slli_epi16(h, 3);
            top[1] = _mm512_add_epi8(h, h);
            top[2] = _mm512_srli_epi16(h, 1);
            top[3] = _mm512_srli_epi16(h, 3);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i q = _mm512_loadu_si512((const void *)(w + OFF_Q(T) + 64 * c));
            __m512i lo, hi;
            if (HAS_H(T)) {
                lo = down ? _mm512_and_si512(q, mf8) : _mm512_and_si512(_mm512_srli_epi16(q, 3), m1f);
                hi = _mm512_ternarylogic_epi32(q, _mm512_and_si512(top[c], m18), m07, SELECT);
            } else if (T == T_IQ4_NL) {
                lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(q, m4));
                hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
            } else {
                lo = _mm512_and_si512(q, m4);
                hi = down ? _mm512_and_si512(q, mf0) : _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            }
            if (mt == 1 && HAS_H(T)) {
                s2 = er_x86_dpbusd512_bcast4(s2, lo, xq[0] + 4 * c);
                s[0] = er_x86_dpbusd512_bcast4(s[0], hi, xq[0] + 16 + 4 * c);
            } else if (mt == 1) {
                s[0] = er_x86_dpbusd512_bcast4(s[0], lo, xq[0] + 4 * c);
                s2 = er_x86_dpbusd512_bcast4(s2, hi, xq[0] + 16 + 4 * c);
            } else {
#pragma GCC unroll 8
                for (int j = 0; j < mt; j++) {
                    s[j] = er_x86_dpbusd512_bcast4(s[j], lo, xq[j] + 4 * c);
                    s[j] = er_x86_dpbusd512_bcast4(s[j], hi, xq[j] + 16 + 4 * c);
                }
            }
        }
        if (mt == 1) s[0] = _mm512_add_epi32(s[0], down ? _mm512_srai_epi32(s2, down) : s2);
        /* repack_q32_avx2.c's float tail, statement for statement */
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w));
        for (int j = 0; j < mt; j++) {
            const act_blk *ab = &a[j][b - b0];
            const __m512 dx = _mm512_set1_ps(ab->d);
            if (HAS_M(T)) {
                const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(w + 32)));
                const __m512 dd = _mm512_mul_ps(dw, dx);
                const __m512 dm = _mm512_mul_ps(mw, dx);
                const __m512 pa = _mm512_mul_ps(_mm512_cvtepi32_ps(s[j]), dd);
                const __m512 pb = _mm512_mul_ps(_mm512_set1_ps(ab->sumf), dm);
                const __m512 t = _mm512_add_ps(pa, pb);
                acc[j] = _mm512_add_ps(acc[j], t);
            } else {
                const __m512 dd = _mm512_mul_ps(dw, dx);
                const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(s[j]), dd);
                acc[j] = _mm512_add_ps(acc[j], t);
            }
        }
    }
    for (int j = 0; j < mt; j++) _mm512_storeu_ps(y + (size_t)j * ys, acc[j]);
}

/* a->w: the 16-row layout; rows [r0, r1) multiples of 16 (forward.c cuts
 * at multiples of repack_rows). Chunks of rows of about 64 KiB of weights
 * per pass over the activation tiles (er_kq8_row_chunk), so a prefill
 * reads them from DRAM once. */
static ALWAYS_INLINE void matmul_x16(const int T, const er_matmul_args *a) {
    const int nb = a->n / 32;
    const size_t group_bytes = (size_t)nb * REC(T);
    /* one tile (decode, a batched step) reads each row once anyway: no
     * chunks, so the activation sums are prepared once */
    const int chunk = a->m > MT ? er_kq8_row_chunk(group_bytes, 16) : a->r1 - a->r0;
    const unsigned char *x = a->x;
    act_blk ab[MT][KB];
    for (int b0 = 0; b0 < nb; b0 += KB) {
        const int b1 = nb - b0 < KB ? nb : b0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                const unsigned char *xj = x + (size_t)j0 * a->x_stride;
                prep(T, xj, a->x_stride, mt, b0, b1, ab);
                for (int r = c0; r < c1; r += 16) {
                    const unsigned char *wg = (const unsigned char *)a->w + (size_t)(r / 16) * group_bytes;
                    float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
                    const int pf = j0 == 0, add = b0 != 0;
                    /* one call per tile height: each inlined copy has its own constant mt */
                    switch (mt) {
                    case 1: group_tile16(T, wg, xj, a->x_stride, 1, b0, b1, ab, y, a->y_stride, add, pf); break;
                    case 2: group_tile16(T, wg, xj, a->x_stride, 2, b0, b1, ab, y, a->y_stride, add, pf); break;
                    case 3: group_tile16(T, wg, xj, a->x_stride, 3, b0, b1, ab, y, a->y_stride, add, pf); break;
                    default: group_tile16(T, wg, xj, a->x_stride, 4, b0, b1, ab, y, a->y_stride, add, pf); break;
                    }
                }
            }
        }
    }
}

void er_avx512vnni_matmul_q5_0x16(const er_matmul_args *a) { matmul_x16(T_Q5_0, a); }
void er_avx512vnni_matmul_iq4_nlx16(const er_matmul_args *a) { matmul_x16(T_IQ4_NL, a); }
void er_avx512vnni_matmul_q4_1x16(const er_matmul_args *a) { matmul_x16(T_Q4_1, a); }
void er_avx512vnni_matmul_q5_1x16(const er_matmul_args *a) { matmul_x16(T_Q5_1, a); }

#endif
