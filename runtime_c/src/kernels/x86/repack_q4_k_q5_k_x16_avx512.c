/*
 * repack_q4_k_q5_k_x16_avx512.c — Q4_K and Q5_K matrices in 16-row
 * interleaved super-blocks for the avx512vnni table: one 512-bit VPDPBUSD
 * per group of 4 elements x 16 weight rows, as Q6_K's
 * repack_q6_k_x16_avx512.c; one kernel body, Q5_K adding the fifth bit.
 * Built only with the AVX-512 VL/BW/VNNI flags (ER_X86_VNNI).
 *
 * The sub-blocks go in pairs (a, b): Q4_K's (2p, 2p + 1), the two nibbles
 * of one byte; Q5_K's (k, 4 + k). Each record (per group of 16 weight
 * rows and super-block index i; written at open by
 * er_avx512vnni_repack_q4_k / _q5_k) starts with the same 256 bytes:
 *   f16 d[16], dmin[16]      the 16 rows' scales side by side
 *   u8  sm[4][32]            pair p, byte 2r + 1: sub-block a's scale (bits
 *                            0-5) and the top two bits of its min (6-7);
 *                            byte 2r: the same for b
 *   u8  ml[2][32]            byte 2r + 1 (a) or 2r (b): the low 4 bits of
 *                            pair q's min, and above them pair q + 2's
 * so one VPMOVZXBW of sm[p] holds row r's two sub-blocks in 32-bit lane r
 * (b low, a high): each scale is a shift and an AND away, and the mins,
 * with ml's nibbles bit-selected in, are the int16 pairs that one VPDPWSSD
 * per pair meets with the activation's block sums (prepared as the same
 * pairs): 4 instructions per row instead of 8 multiplies and adds, and
 * per record about 30 shared operations where the 6-bit fields took 130.
 *
 * Q4_K (16 x 144 = 2304 bytes) then has
 *   u8  qs[8][4][64]         group g, pair p, byte 4r + k: the row's file
 *                            byte qs[32p + 4g + k] (a: low nibble, b: high)
 * and per group and pair one load, one AND for a and one for b, whose
 * nibble stays in place: b's bytes are 16 times its quants, its sum 16
 * times b's, and a's scale is taken times 16 to match; the super-block's
 * sum, 16 times generic's (< 2^29), is shifted back exactly at the end.
 * Group-major, so that decode's eight sums (four pairs) are independent
 * chains while the record is still read in address order.
 *
 * Q5_K (16 x 176 = 2816 bytes), group-major:
 *   u8  q[8][5][64]          group g, byte 4r + t of q[g][1 + k]: bits 0-4
 *                            the quant of element 32k + 4g + t (a = k), bits
 *                            5-7 bits 0-2 of element 32(4 + k) + 4g + t
 *                            (b = 4 + k); of q[g][0]: bits 2k, 2k + 1 are
 *                            bits 3-4 of element 32(4 + k) + 4g + t
 * One load of q[g][0] serves the group's four pairs: shifted by 4 once, its
 * bits for k = 1, 3 sit at 6-7 and for k = 0, 2 at 4-5, so b is assembled
 * without moving them, as 8 times its quants (k odd) or 2 times (k even),
 * in a shift, a bit-select and an AND. Scales: a times 8, b times 1 or 4;
 * the sum (8 times generic's, < 2^29) shifted back at the end.
 *
 * Address order pays from DRAM: on Zen 4 (hardware prefetchers alone, see
 * er_x86_decode_prefetch) Q5_K's decode ran at 0.33 of the read rate with
 * its high bits in a block after the quants, 0.62 group-major with them
 * last in each group, 0.8 with them first, the scales read first too.
 * Several activation rows prefetch the records into L2 (er_kq8_prefetch_l2).
 *
 * Measured (Zen 4, one thread, scripts/kernel_stream.c, avx512vnni; before
 * = the 6-bit fields decoded per sub-block, the high nibble shifted down,
 * each vector loaded once per use): 256 x 2048 from L2, m = 1: Q4_K 54.2
 * -> 70.6 GB/s, Q5_K 53.9 -> 62.2; 32768 x 4096 from DRAM, m = 1, ratio
 * to a plain read: Q4_K 0.58-0.82 -> 0.88-0.93, Q5_K 0.31-0.37 ->
 * 0.81-0.89; m = 4 from DRAM: Q4_K 7.4-7.7 -> 3.8-4.2 ms, Q5_K 9.7-10.2 ->
 * 4.3-5.0; m = 4 from L2 about even (Q4_K 13.4 -> 13.1-13.5 us, Q5_K 14.2
 * -> 14.5: the L2 prefetch's cost); m = 64, 768 x 2048: Q4_K 631 -> 602
 * us, Q5_K 650 -> 641. A 110M Llama all Q5_K decodes at 356-402 tok/s
 * where it took 132-146 (edgerun-cli, one thread, --warmup 8).
 *
 * Arithmetic: per row and super-block isum = sum_j sc_j * (q_j . x_j) and
 * imin = sum_j mn_j * (bsums_2j + bsums_2j+1), the same exact int32 as
 * generic's; the float tail is er_kq_accum's statements on 16 lanes, over
 * the super-blocks in order: results are bit-identical to generic.
 */
#include <string.h>

#include "kq_x8_avx2.h"
#include "kq_regroup_x86.h"
#include "../kquant.h"

#if ER_X86_VNNI

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* the part both records start with */
typedef struct {
    er_f16 d[16];
    er_f16 dmin[16];
    uint8_t sm[4][32];
    uint8_t ml[2][32];
} kx16_scales;

typedef struct {
    kx16_scales s;
    uint8_t qs[8][4][64];
} blk_q4_kx16;

typedef struct {
    kx16_scales s;
    uint8_t q[8][5][64];
} blk_q5_kx16;

_Static_assert(sizeof(blk_q4_kx16) == 16 * sizeof(er_block_q4_k), "Q4_Kx16 must take 16 blocks' bytes");
_Static_assert(sizeof(blk_q5_kx16) == 16 * sizeof(er_block_q5_k), "Q5_Kx16 must take 16 blocks' bytes");

/* pair p's sub-blocks */
static inline int sub_a(int p, int q5) { return q5 ? p : 2 * p; }
static inline int sub_b(int p, int q5) { return q5 ? 4 + p : 2 * p + 1; }

/* ---- repacking (at open) -------------------------------------------------- */

/* Row r's d, dmin and re-encoded scales/mins into a record (ml zeroed). */
static void put_scales(kx16_scales *o, int r, er_f16 d, er_f16 dmin, const uint8_t scales[12], int q5) {
    o->d[r] = d;
    o->dmin[r] = dmin;
    uint8_t sc[8], mn[8];
    er_kq_scale_min(scales, sc, mn);
    for (int p = 0; p < 4; p++)
        for (int h = 0; h < 2; h++) {
            const int j = h ? sub_a(p, q5) : sub_b(p, q5);
            o->sm[p][2 * r + h] = (uint8_t)(sc[j] | (mn[j] >> 4) << 6);
            o->ml[p % 2][2 * r + h] |= (uint8_t)((mn[j] & 15) << (4 * (p / 2)));
        }
}

static const er_block_q4_k *src_q4(const void *src, size_t row_bytes, int row, int i) {
    return (const er_block_q4_k *)(const void *)((const uint8_t *)src + (size_t)row * row_bytes) + i;
}

void er_avx512vnni_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q4_kx16 *out = dst;
    for (int g16 = 0; g16 < n_out / 16; g16++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.ml, 0, sizeof out->s.ml);
            for (int r = 0; r < 16; r++) {
                const er_block_q4_k *in = src_q4(src, row_bytes, 16 * g16 + r, i);
                put_scales(&out->s, r, in->d, in->dmin, in->scales, 0);
                for (int p = 0; p < 4; p++)
                    for (int g = 0; g < 8; g++) memcpy(&out->qs[g][p][4 * r], &in->qs[32 * p + 4 * g], 4);
            }
        }
}

void er_avx512vnni_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q5_kx16 *out = dst;
    for (int g16 = 0; g16 < n_out / 16; g16++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.ml, 0, sizeof out->s.ml);
            for (int r = 0; r < 16; r++) {
                const er_block_q5_k *in =
                    (const er_block_q5_k *)(const void *)((const uint8_t *)src + (size_t)(16 * g16 + r) * row_bytes) + i;
                put_scales(&out->s, r, in->d, in->dmin, in->scales, 1);
                uint8_t q[ER_QK_K];
                er_kq_q5_quants(in, q);
                for (int g = 0; g < 8; g++)
                    for (int t = 0; t < 4; t++) {
                        uint8_t top = 0;
                        for (int k = 0; k < 4; k++) {
                            const uint8_t a = q[32 * k + 4 * g + t], b = q[32 * (4 + k) + 4 * g + t];
                            out->q[g][1 + k][4 * r + t] = (uint8_t)(a | (b & 7) << 5);
                            top |= (uint8_t)((b >> 3) << (2 * k));
                        }
                        out->q[g][0][4 * r + t] = top;
                    }
            }
        }
}

/* ---- kernels ---------------------------------------------------------------- */

#define dot4 er_x86_dpbusd512_bcast4

/* One 64-byte load whose register serves every use: without the empty asm
 * the compiler folds the load into each AND and shift that reads it, two
 * or three loads of one vector, and the load ports, not VPDPBUSD, set the
 * pace. */
static ALWAYS_INLINE __m512i ld64(const void *p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v));
    return v;
}

/* b's bytes, and so its sum, are 2^b_times_log2 times its quants' (the
 * bits left where they lie); a's are the quants. The scales make every
 * sub-block's product 2^SHIFT times generic's, which the end shifts back. */
#define Q4_SHIFT 4
#define Q5_SHIFT 3
static ALWAYS_INLINE int b_times_log2(int p, int q5) { return q5 ? (p % 2 ? 3 : 1) : 4; }

/* Pair p's scales, times what makes each sub-block's product 2^SHIFT times
 * generic's, as int32 lanes, and its mins as int16 pairs (b low, a high).
 * VPTERNLOGD 0xe4: the first operand's bits where the third is 1, the
 * second's elsewhere. */
static ALWAYS_INLINE void scale_min(const kx16_scales *w, const int p, const int q5, __m512i *sa, __m512i *sb,
                                    __m512i *mn) {
    const int shift = q5 ? Q5_SHIFT : Q4_SHIFT, lb = shift - b_times_log2(p, q5);
    const __m512i z = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)w->sm[p]));
    const __m512i m6 = _mm512_set1_epi32(0x3f);
    /* a: the lane's high half, its scale moved to bit `shift`; the bits
     * that follow it down are the high byte of b's int16, zero */
    *sa = _mm512_and_si512(_mm512_srli_epi32(z, 16 - shift), _mm512_slli_epi32(m6, shift));
    *sb = lb ? _mm512_and_si512(_mm512_slli_epi32(z, lb), _mm512_slli_epi32(m6, lb)) : _mm512_and_si512(z, m6);
    const __m512i l = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)w->ml[p % 2]));
    const __m512i lo = p < 2 ? l : _mm512_srli_epi16(l, 4);
    /* bits 0-3 from ml, 4-5 the top of sm's byte (z >> 2 is 0 above) */
    *mn = _mm512_ternarylogic_epi32(lo, _mm512_srli_epi16(z, 2), _mm512_set1_epi16(0x0f), 0xe4);
}

/* Group g of pair p as unsigned bytes, row r in lane r: a as its quants, b
 * as 2^b_times_log2 times. Q5_K's t is q[g][0], t4 it shifted left by 4
 * (16-bit shifts of at most 4 move no wanted bit across a byte). */
static ALWAYS_INLINE void unpack_pair(const uint8_t *rec, int g, const int p, const int q5, __m512i t, __m512i t4,
                                      __m512i *ua, __m512i *ub) {
    if (!q5) {
        const __m512i v = ld64(((const blk_q4_kx16 *)(const void *)rec)->qs[g][p]), m4 = _mm512_set1_epi8(0x0f);
        *ua = _mm512_and_si512(v, m4);
        *ub = _mm512_andnot_si512(m4, v);
        return;
    }
    const __m512i v = ld64(((const blk_q5_kx16 *)(const void *)rec)->q[g][1 + p]);
    const __m512i top = p < 2 ? t4 : t;
    *ua = _mm512_and_si512(v, _mm512_set1_epi8(0x1f));
    if (p % 2) /* 8b: bits 0-2 at 3-5, 3-4 at 6-7 */
        *ub = _mm512_and_si512(
            _mm512_ternarylogic_epi32(top, _mm512_srli_epi16(v, 2), _mm512_set1_epi8((char)0xc0), 0xe4),
            _mm512_set1_epi8((char)0xf8));
    else /* 2b: bits 0-2 at 1-3, 3-4 at 4-5 */
        *ub = _mm512_and_si512(_mm512_ternarylogic_epi32(top, _mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x30), 0xe4),
                               _mm512_set1_epi8(0x3e));
}

static ALWAYS_INLINE __m512i ld_top(const uint8_t *rec, int g) {
    return ld64(((const blk_q5_kx16 *)(const void *)rec)->q[g][0]);
}

/* What the mins meet: per activation row and super-block, pair p's block
 * sums bs_j = bsums_2j + bsums_2j+1 (|bs_j| <= 4064) as int16 (b low, a
 * high), prepared once per call and slice. */
typedef struct act_q4 {
    int32_t bs[4];
} act_q4;

#define KB 64 /* activation super-blocks per stack slice (16384 elements) */
#define MT 6  /* activation rows per prefill tile */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int i0, int i1, act_q4 a[MT][KB],
                               const int q5) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs);
        for (int i = i0; i < i1; i++)
            for (int p = 0; p < 4; p++) {
                const int ja = sub_a(p, q5), jb = sub_b(p, q5);
                const int bsa = xb[i].bsums[2 * ja] + xb[i].bsums[2 * ja + 1];
                const int bsb = xb[i].bsums[2 * jb] + xb[i].bsums[2 * jb + 1];
                a[j][i - i0].bs[p] = (int32_t)((uint32_t)(uint16_t)bsb | (uint32_t)(uint16_t)bsa << 16);
            }
    }
}

/* er_kq_accum on 16 lanes, statement for statement */
static ALWAYS_INLINE __m512 accum16(__m512 sum, __m512 dw, __m512 dmw, float dx, __m512i isum, __m512i imin) {
    const __m512 vdx = _mm512_set1_ps(dx);
    const __m512 dd = _mm512_mul_ps(dw, vdx);
    const __m512 dm = _mm512_mul_ps(dmw, vdx);
    const __m512 a = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum));
    const __m512 b = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(imin));
    return _mm512_add_ps(sum, _mm512_sub_ps(a, b));
}

/* One group of 16 weight rows against mt (1..MT) activation rows over
 * super-blocks [i0, i1): acc[j] (lane r = weight row r) += ... The record
 * at wg + i * rec_bytes is a blk_q4_kx16, or a blk_q5_kx16 when q5. */
static ALWAYS_INLINE void group_tile(const uint8_t *wg, const unsigned char *x, size_t xs, const int mt, int i0,
                                     int i1, act_q4 a[MT][KB], __m512 acc[MT], int pf, const int q5) {
    const size_t rec_bytes = q5 ? sizeof(blk_q5_kx16) : sizeof(blk_q4_kx16);
    for (int i = i0; i < i1; i++) {
        const uint8_t *rec = wg + (size_t)i * rec_bytes;
        const kx16_scales *w = (const kx16_scales *)(const void *)rec;
        const er_block_q8_k *xb[MT];
        __m512i isum[MT], imin[MT], sa[MT][4], sb[MT][4], scp[3][4];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = imin[j] = _mm512_setzero_si512();
        }
        if (mt == 1) {
            /* decode: the record in address order, the four pairs' eight
             * sums as independent chains */
            er_kq8_prefetch(rec, rec_bytes);
            for (int p = 0; p < 4; p++) scale_min(w, p, q5, &scp[0][p], &scp[1][p], &scp[2][p]);
            for (int p = 0; p < 4; p++) sa[0][p] = sb[0][p] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const __m512i t = q5 ? ld_top(rec, g) : _mm512_setzero_si512();
                const __m512i t4 = q5 ? _mm512_slli_epi16(t, 4) : t;
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) {
                    __m512i ua, ub;
                    unpack_pair(rec, g, p, q5, t, t4, &ua, &ub);
                    sa[0][p] = dot4(sa[0][p], ua, xb[0]->qs + 32 * sub_a(p, q5) + 4 * g);
                    sb[0][p] = dot4(sb[0][p], ub, xb[0]->qs + 32 * sub_b(p, q5) + 4 * g);
                }
            }
        } else {
            /* pair by pair: each unpacked group serves every activation row */
            /* by the first activation tile only: the later ones find the chunk
             * (er_kq8_row_chunk) in L2 */
            if (pf) er_kq8_prefetch_l2(rec, rec_bytes);
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                for (int j = 0; j < mt; j++) sa[j][p] = sb[j][p] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int g = 0; g < 8; g++) {
                    const __m512i t = q5 ? ld_top(rec, g) : _mm512_setzero_si512();
                    const __m512i t4 = q5 && p < 2 ? _mm512_slli_epi16(t, 4) : t;
                    __m512i ua, ub;
                    unpack_pair(rec, g, p, q5, t, t4, &ua, &ub);
                    for (int j = 0; j < mt; j++) {
                        sa[j][p] = dot4(sa[j][p], ua, xb[j]->qs + 32 * sub_a(p, q5) + 4 * g);
                        sb[j][p] = dot4(sb[j][p], ub, xb[j]->qs + 32 * sub_b(p, q5) + 4 * g);
                    }
                }
            }
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512i sca, scb, mn;
            if (mt == 1) sca = scp[0][p], scb = scp[1][p], mn = scp[2][p];
            else scale_min(w, p, q5, &sca, &scb, &mn);
            for (int j = 0; j < mt; j++) {
                isum[j] = _mm512_add_epi32(isum[j], _mm512_add_epi32(_mm512_mullo_epi32(sa[j][p], sca),
                                                                     _mm512_mullo_epi32(sb[j][p], scb)));
                imin[j] = _mm512_dpwssd_epi32(imin[j], mn, _mm512_set1_epi32(a[j][i - i0].bs[p]));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->d));
        const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->dmin));
        for (int j = 0; j < mt; j++)
            acc[j] = accum16(acc[j], dw, dmw, xb[j]->d, _mm512_srai_epi32(isum[j], q5 ? Q5_SHIFT : Q4_SHIFT), imin[j]);
    }
}
/* Row groups [c0, c1) against activation rows [j0, j0 + mt) over the
 * super-blocks [i0, i1) of the slice prepared in ab; a slice after the
 * first continues each lane's sum from y (generic's float order). */
static ALWAYS_INLINE void rows_tile(const er_matmul_args *a, size_t group_bytes, int c0, int c1, int j0, int mt, int i0,
                                    int i1, act_q4 ab[MT][KB], const int q5) {
    const unsigned char *xj = (const unsigned char *)a->x + (size_t)j0 * a->x_stride;
    for (int r = c0; r < c1; r += 16) {
        const uint8_t *wg = (const uint8_t *)a->w + (size_t)(r / 16) * group_bytes;
        float *y = a->y + (size_t)j0 * a->y_stride + (size_t)r;
        __m512 acc[MT];
        for (int j = 0; j < mt; j++) acc[j] = i0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(y + (size_t)j * a->y_stride);
        switch (mt) {
        case 1: group_tile(wg, xj, a->x_stride, 1, i0, i1, ab, acc, j0 == 0, q5); break;
        case 2: group_tile(wg, xj, a->x_stride, 2, i0, i1, ab, acc, j0 == 0, q5); break;
        case 3: group_tile(wg, xj, a->x_stride, 3, i0, i1, ab, acc, j0 == 0, q5); break;
        case 4: group_tile(wg, xj, a->x_stride, 4, i0, i1, ab, acc, j0 == 0, q5); break;
        case 5: group_tile(wg, xj, a->x_stride, 5, i0, i1, ab, acc, j0 == 0, q5); break;
        default: group_tile(wg, xj, a->x_stride, 6, i0, i1, ab, acc, j0 == 0, q5); break;
        }
        for (int j = 0; j < mt; j++) _mm512_storeu_ps(y + (size_t)j * a->y_stride, acc[j]);
    }
}

/* a->w: the repacked matrix; rows [r0, r1) with r0 and r1 - r0 multiples of
 * 16 (forward.c chunks by repack_rows). */
static ALWAYS_INLINE void matmul_kx16(const er_matmul_args *a, const int q5) {
    const int nb = a->n / ER_QK_K;
    const size_t group_bytes = (size_t)nb * (q5 ? sizeof(blk_q5_kx16) : sizeof(blk_q4_kx16));
    const int chunk = er_kq8_row_chunk(group_bytes, 16);
    act_q4 ab[MT][KB];
    for (int i0 = 0; i0 < nb; i0 += KB) {
        const int i1 = nb - i0 < KB ? nb : i0 + KB;
        for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
            const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
            for (int j0 = 0; j0 < a->m; j0 += MT) {
                const int mt = a->m - j0 < MT ? a->m - j0 : MT;
                prep((const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, i0, i1, ab, q5);
                rows_tile(a, group_bytes, c0, c1, j0, mt, i0, i1, ab, q5);
            }
        }
    }
}

void er_avx512vnni_matmul_q4_kx16(const er_matmul_args *a) { matmul_kx16(a, 0); }
void er_avx512vnni_matmul_q5_kx16(const er_matmul_args *a) { matmul_kx16(a, 1); }

#endif
