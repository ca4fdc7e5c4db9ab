/*
 * repack_q6_k_x16_avx512.c — Q6_K matrices in 16-row interleaved
 * super-blocks for the avx512vnni table: one 512-bit instruction serves 16
 * weight rows, and VPDPBUSD takes the place of maddubs, int16 add, madd and
 * int32 add. Built only with the AVX-512 VL/BW/VNNI flags (ER_X86_VNNI).
 *
 * Layout (repack_rows = 16; 16 x 210 = 3360 bytes per record, written at
 * open by er_avx512vnni_repack_q6_k): per group of 16 weight rows and
 * super-block index i, one record
 *   f16 d[16]                the 16 rows' scales side by side
 *   i8  sc[16][16]           sub-block j, row r
 *   u8  q[16][3][64]         group t, vector v, byte 4r + k, for row r:
 *                            bits 0-5: quant (0..63) of element 64v + 4t + k;
 *                            bits 6-7: bits 2v, 2v + 1 of element 192 + 4t + k
 * the 8-row layout's (repack_q6_k_avx2.c) bits at twice the width. A
 * record's elements fall in four streams of 64 (elements 64s..64s+63);
 * groups 4b..4b+3 of stream s are sub-block 4s + b. Streams 0-2 are one
 * AND from a 64-byte load. Stream 3 is assembled as four times its quant
 * (bits 2-7, at most 252, still a u8 for VPDPBUSD), from the top bits of
 * the three vectors without shifting any of them into place twice:
 * (v2 & 0xc0) | (v1 >> 2 & 0x30) | (v0 >> 4 & 0x0c), two bit-selects
 * (VPTERNLOGD) and one AND; its dot products are then exact multiples of 4,
 * shifted back right by 2 before the scale (exact, no rounding).
 *
 * Per group of 4 elements x 16 rows and stream: one load (three for all
 * four streams), 8 / 4 logic operations and one VPDPBUSD with the 4
 * activation bytes broadcast from memory. The offset of the unsigned
 * quants (q, not q - 32) starts each sub-block's sum at -32 bsums_j (for
 * stream 3: -128 bsums_j), prepared once per activation row and call; one
 * VPMULLD by the row scales per sub-block. The 8-row AVX2 layout spends
 * about twice the instructions per weight byte (maddubs, a broadcast, and
 * int16/int32 adds around every madd), which at one thread kept a Q6_K
 * decode under the read bandwidth.
 *
 * Each vector is loaded once per group (ld64): left to itself the compiler
 * folded the load into every AND and shift that reads it, and the load
 * ports set the pace. Decode and tiles of up to 4 rows read the record in
 * address order (a block's scales before its quants, all four streams of
 * a group from one unpacking); several activation rows prefetch the
 * records into L2 (er_kq8_prefetch_l2), which from DRAM gains them
 * 1.5-1.8x and from L2 costs a few percent.
 *
 * Measured (Zen 4, one thread, scripts/kernel_stream.c, avx512vnni): 256 x
 * 2048 from L2, m = 1: 62.1 -> 75.7 GB/s; m = 4: 13.9-14.0 -> 14.6 us;
 * 32768 x 4096 from DRAM: m = 1 ratio to a plain read 0.76-0.78 ->
 * 0.75-0.86 (the hardware prefetchers' pace), m = 4 12.6-12.8 -> 7.0-8.3
 * ms; m = 64, 768 x 2048: 620 -> 622 us.
 *
 * Arithmetic: per row and super-block isum = sum_j sc_j * sum_k (q_k - 32)
 * x_k, the same exact int32 as generic's (|isum| < 2^25); the float tail is
 * er_kq_accum's statements on 16 lanes, over the super-blocks in order:
 * results are bit-identical to generic, and to the avx2 table's.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "kq_regroup_x86.h"

#if ER_X86_VNNI

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct {
    er_f16 d[16];
    int8_t sc[16][16];
    uint8_t q[16][3][64];
} blk_q6_kx16;

_Static_assert(sizeof(blk_q6_kx16) == 16 * sizeof(er_block_q6_k), "Q6_Kx16 must take 16 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

void er_avx512vnni_repack_q6_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q6_kx16 *out = dst;
    uint8_t q[ER_QK_K];
    for (int g16 = 0; g16 < n_out / 16; g16++)
        for (int i = 0; i < nb; i++, out++)
            for (int r = 0; r < 16; r++) {
                const er_block_q6_k *in =
                    (const er_block_q6_k *)(const void *)((const uint8_t *)src + (size_t)(16 * g16 + r) * row_bytes) + i;
                memcpy(&out->d[r], &in->d, sizeof in->d);
                for (int j = 0; j < 16; j++) out->sc[j][r] = in->scales[j];
                er_kq_q6_quants(in, q);
                er_kq_q6_put(q, (uint8_t *)out->q, 16, r);
            }
}

/* ---- kernels ---------------------------------------------------------------- */

/* One 64-byte load whose register serves every use: without the empty asm
 * the compiler folds the load into each AND and shift that reads it, two
 * or three loads of one vector, and the load ports, not VPDPBUSD, set the
 * pace. */
static ALWAYS_INLINE __m512i ld64(const void *p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v));
    return v;
}

/* Group t's four streams from one load of each vector, row r in 32-bit
 * lane r: u[0..2] the quants of streams 0-2, u[3] four times stream 3's.
 * VPTERNLOGD 0xe4: bits of the first operand where the third (the mask)
 * is 1, of the second where it is 0. */
static ALWAYS_INLINE void unpack6(const blk_q6_kx16 *w, int t, __m512i u[4]) {
    const __m512i v0 = ld64(w->q[t][0]), v1 = ld64(w->q[t][1]), v2 = ld64(w->q[t][2]), m6 = _mm512_set1_epi8(0x3f);
    u[0] = _mm512_and_si512(v0, m6);
    u[1] = _mm512_and_si512(v1, m6);
    u[2] = _mm512_and_si512(v2, m6);
    const __m512i hi = _mm512_ternarylogic_epi32(v2, _mm512_srli_epi16(v1, 2), _mm512_set1_epi8((char)0xc0), 0xe4);
    const __m512i all = _mm512_ternarylogic_epi32(hi, _mm512_srli_epi16(v0, 4), _mm512_set1_epi8((char)0xf0), 0xe4);
    u[3] = _mm512_and_si512(all, _mm512_set1_epi8((char)0xfc));
}

/* group t's stream st alone (the tiles' order: one stream for all rows) */
static ALWAYS_INLINE __m512i unpack6_st(const blk_q6_kx16 *w, int t, const int st) {
    if (st < 3) return _mm512_and_si512(ld64(w->q[t][st]), _mm512_set1_epi8(0x3f));
    __m512i u[4];
    unpack6(w, t, u);
    return u[3];
}

/* acc + VPDPBUSD of u with the 4 signed bytes at p in every lane ({1to16}) */
#define dot4 er_x86_dpbusd512_bcast4

/* sub-block j's row scales as int32 */
static ALWAYS_INLINE __m512i scales(const blk_q6_kx16 *w, int j) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)w->sc[j]));
}

/* a sub-block's sum, as the scale multiplies it: stream 3's holds 4 times */
static ALWAYS_INLINE __m512i exact(__m512i acc, const int st) { return st == 3 ? _mm512_srai_epi32(acc, 2) : acc; }

/* What a sub-block's sum starts at: -32 bsums_j (stream 3: 4 times it),
 * per activation row and super-block, prepared once per call and slice. */
typedef struct act_q6 {
    int32_t c[16];
} act_q6;

#define KB 32 /* activation super-blocks per stack slice (8192 elements) */
#define MT 8  /* activation rows per prefill tile */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int i0, int i1, act_q6 a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs);
        for (int i = i0; i < i1; i++)
            for (int s = 0; s < 16; s++) a[j][i - i0].c[s] = (s < 12 ? -32 : -128) * (int32_t)xb[i].bsums[s];
    }
}

/* er_kq_accum on 16 lanes, statement for statement (er_kq8_accum's, with
 * Q6_K's dmin and imin of 0 kept as generic passes them) */
static ALWAYS_INLINE __m512 accum16(__m512 sum, __m512 dw, float dx, __m512i isum) {
    const __m512 vdx = _mm512_set1_ps(dx);
    const __m512 dd = _mm512_mul_ps(dw, vdx);
    const __m512 dm = _mm512_mul_ps(_mm512_setzero_ps(), vdx);
    const __m512 a = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum));
    const __m512 b = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_setzero_si512()));
    return _mm512_add_ps(sum, _mm512_sub_ps(a, b));
}

/* One group of 16 weight rows against mt (1..MT) activation rows over
 * super-blocks [i0, i1): acc[j] (lane r = weight row r) += ... */
static ALWAYS_INLINE void group_tile(const blk_q6_kx16 *wg, const unsigned char *x, size_t xs, const int mt, int i0,
                                     int i1, act_q6 a[MT][KB], __m512 acc[MT], int pf) {
    for (int i = i0; i < i1; i++) {
        const blk_q6_kx16 *w = wg + i;
        const er_block_q8_k *xb[MT];
        __m512i isum[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = _mm512_setzero_si512();
        }
        if (mt <= 4) {
            /* decode and small tiles: the record in address order, all four
             * streams of a group from one unpacking, 4 x mt sums (at 4 rows
             * 14.6 us where stream by stream took 15.5, 256 x 2048 from L2,
             * and from DRAM 0.53 of the read rate instead of 0.47) */
            if (mt == 1)
                er_kq8_prefetch(w, sizeof *w);
            else if (pf) /* by the first activation tile only (below) */
                er_kq8_prefetch_l2(w, sizeof *w);
            /* a block at a time: unrolled, GCC hoisted the later blocks'
             * scales and spilled registers, and decode from DRAM ran at
             * 0.77-0.81 of the read rate instead of 0.83-0.88 */
#pragma GCC unroll 1
            for (int b = 0; b < 4; b++) {
                /* the scales before the quants: the record in address order */
                __m512i s[4][4], sc[4];
                for (int st = 0; st < 4; st++) {
                    sc[st] = scales(w, 4 * st + b);
                    for (int j = 0; j < mt; j++) s[st][j] = _mm512_set1_epi32(a[j][i - i0].c[4 * st + b]);
                }
#pragma GCC unroll 4
                for (int tt = 0; tt < 4; tt++) {
                    const int t = 4 * b + tt;
                    __m512i u[4];
                    unpack6(w, t, u);
                    for (int st = 0; st < 4; st++)
                        for (int j = 0; j < mt; j++) s[st][j] = dot4(s[st][j], u[st], xb[j]->qs + 64 * st + 4 * t);
                }
                for (int st = 0; st < 4; st++)
                    for (int j = 0; j < mt; j++)
                        isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(exact(s[st][j], st), sc[st]));
            }
        } else {
            /* stream by stream: each unpacked group serves every activation
             * row while mt sums and mt isums stay in registers */
            /* by the first activation tile only: the later ones find the chunk
             * (er_kq8_row_chunk) in L2 */
            if (pf) er_kq8_prefetch_l2(w, sizeof *w);
#pragma GCC unroll 4
            for (int st = 0; st < 4; st++)
#pragma GCC unroll 1
                for (int b = 0; b < 4; b++) {
                    __m512i s[MT];
                    for (int j = 0; j < mt; j++) s[j] = _mm512_set1_epi32(a[j][i - i0].c[4 * st + b]);
#pragma GCC unroll 4
                    for (int t = 4 * b; t < 4 * b + 4; t++) {
                        const __m512i u = unpack6_st(w, t, st);
                        for (int j = 0; j < mt; j++) s[j] = dot4(s[j], u, xb[j]->qs + 64 * st + 4 * t);
                    }
                    const __m512i sc = scales(w, 4 * st + b);
                    for (int j = 0; j < mt; j++) isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(exact(s[j], st), sc));
                }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->d));
        for (int j = 0; j < mt; j++) acc[j] = accum16(acc[j], dw, xb[j]->d, isum[j]);
    }
}

/* Row groups [c0, c1) against activation rows [j0, j0 + mt) over the
 * super-blocks [i0, i1) of the slice prepared in ab; a slice after the
 * first continues each lane's sum from y, so the float additions stay in
 * generic's order. */
static void rows_tile(const er_matmul_args *a, size_t group_bytes, int c0, int c1, int j0, int mt, int i0, int i1,
                      act_q6 ab[MT][KB]) {
    const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
    for (int r = c0; r < c1; r += 16) {
        const blk_q6_kx16 *wg =
            (const blk_q6_kx16 *)(const void *)((const unsigned char *)a->w + (size_t)(r / 16) * group_bytes);
        float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
        __m512 acc[MT];
        for (int j = 0; j < mt; j++) acc[j] = i0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(y + (size_t)j * a->y_stride);
        /* one call per tile height, so each inlined copy keeps its
         * accumulators in registers */
        switch (mt) {
        case 1: group_tile(wg, xj, a->x_stride, 1, i0, i1, ab, acc, j0 == 0); break;
        case 2: group_tile(wg, xj, a->x_stride, 2, i0, i1, ab, acc, j0 == 0); break;
        case 3: group_tile(wg, xj, a->x_stride, 3, i0, i1, ab, acc, j0 == 0); break;
        case 4: group_tile(wg, xj, a->x_stride, 4, i0, i1, ab, acc, j0 == 0); break;
        case 5: group_tile(wg, xj, a->x_stride, 5, i0, i1, ab, acc, j0 == 0); break;
        case 6: group_tile(wg, xj, a->x_stride, 6, i0, i1, ab, acc, j0 == 0); break;
        case 7: group_tile(wg, xj, a->x_stride, 7, i0, i1, ab, acc, j0 == 0); break;
        default: group_tile(wg, xj, a->x_stride, 8, i0, i1, ab, acc, j0 == 0); break;
        }
        for (int j = 0; j < mt; j++) _mm512_storeu_ps(y + (size_t)j * a->y_stride, acc[j]);
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 16 (forward.c chunks by repack_rows). */
void er_avx512vnni_matmul_q6_kx16(const er_matmul_args *a) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * sizeof(blk_q6_kx16);
    const int chunk = er_kq8_row_chunk(group_bytes, 16);
    act_q6 ab[MT][KB];
    for (int i0 = 0; i0 < nb; i0 += KB) {
        const int i1 = nb - i0 < KB ? nb : i0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                prep((const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, i0, i1, ab);
                rows_tile(a, group_bytes, c0, c1, j0, mt, i0, i1, ab);
            }
        }
    }
}

#endif
