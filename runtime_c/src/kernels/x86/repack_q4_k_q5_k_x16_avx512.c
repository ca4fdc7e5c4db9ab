/*
 * repack_q4_k_q5_k_x16_avx512.c — Q4_K and Q5_K matrices in 16-row
 * interleaved super-blocks for the avx512vnni table: one 512-bit VPDPBUSD
 * per group of 4 elements x 16 weight rows, as Q6_K's
 * repack_q6_k_x16_avx512.c; one kernel body, Q5_K adding the fifth bit.
 * Built only with the AVX-512 VL/BW/VNNI flags (ER_X86_VNNI).
 *
 * Layout (repack_rows = 16; 16 x 144 = 2304 bytes per record, written at
 * open by er_avx512vnni_repack_q4_k): per group of 16 weight rows and
 * super-block index i, one record
 *   f16 d[16], dmin[16]      the 16 rows' scales side by side
 *   u8  sl[8][16]            sub-block j, row r: sc & 15 | (mn & 15) << 4
 *   u8  sh[4][16]            pair p, row r: the top two bits of sc and mn
 *                            of sub-block 2p (bits 0-1, 2-3) and 2p + 1
 *                            (bits 4-5, 6-7)
 *   u8  qs[4][8][64]         chunk c, group g, byte 4r + k: the row's file
 *                            byte qs[32c + 4g + k] (low nibble: sub-block
 *                            2c, high nibble: 2c + 1)
 * so a 16-byte load and a zero extension give a sub-block's 16 scales (or
 * mins) as int32 lanes, and a 64-byte load two sub-blocks' group of 4
 * elements for all 16 rows. Per group: a load, two ANDs and a shift, two
 * VPDPBUSD with the activation bytes broadcast from memory; per sub-block
 * the scales in a few logic operations and one VPMULLD. The 8-row layout
 * (repack_q4_k_q5_k_avx2.c) spends twice the instructions per weight byte.
 *
 * Q5_K layout (16 x 176 = 2816 bytes): the same scale fields, then the
 * 8-row layout's regrouped 5-bit quants at twice the width:
 *   u8  qv[4][8][64]         k, group g, byte 4r + t for row r: bits 0-4 the
 *                            quant of element 32k + 4g + t (sub-block k),
 *                            bits 5-7 bits 0-2 of element 32(4 + k) + 4g + t
 *   u8  q4[8][64]            group g, byte 4r + t: bits 2k, 2k + 1 are bits
 *                            3-4 of element 32(4 + k) + 4g + t
 * Sub-blocks k and 4 + k come from one qv load (and q4's): an AND for k;
 * for 4 + k a shift of each, one bit-select (VPTERNLOGD) and an AND.
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
    uint8_t sl[8][16];
    uint8_t sh[4][16];
} kx16_scales;

typedef struct {
    kx16_scales s;
    uint8_t qs[4][8][64];
} blk_q4_kx16;

typedef struct {
    kx16_scales s;
    uint8_t qv[4][8][64];
    uint8_t q4[8][64];
} blk_q5_kx16;

_Static_assert(sizeof(blk_q4_kx16) == 16 * sizeof(er_block_q4_k), "Q4_Kx16 must take 16 blocks' bytes");
_Static_assert(sizeof(blk_q5_kx16) == 16 * sizeof(er_block_q5_k), "Q5_Kx16 must take 16 blocks' bytes");

/* ---- repacking (at open) -------------------------------------------------- */

/* Row r's d, dmin and re-encoded scales/mins into a record (sh zeroed). */
static void put_scales(kx16_scales *o, int r, er_f16 d, er_f16 dmin, const uint8_t scales[12]) {
    o->d[r] = d;
    o->dmin[r] = dmin;
    uint8_t sc[8], mn[8];
    er_kq_scale_min(scales, sc, mn);
    for (int j = 0; j < 8; j++) {
        o->sl[j][r] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
        o->sh[j / 2][r] |= (uint8_t)(((sc[j] >> 4) | (mn[j] >> 4) << 2) << (4 * (j % 2)));
    }
}

void er_avx512vnni_repack_q4_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q4_kx16 *out = dst;
    for (int g16 = 0; g16 < n_out / 16; g16++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.sh, 0, sizeof out->s.sh);
            for (int r = 0; r < 16; r++) {
                const er_block_q4_k *in =
                    (const er_block_q4_k *)(const void *)((const uint8_t *)src + (size_t)(16 * g16 + r) * row_bytes) + i;
                put_scales(&out->s, r, in->d, in->dmin, in->scales);
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++) memcpy(&out->qs[c][g][4 * r], &in->qs[32 * c + 4 * g], 4);
            }
        }
}

void er_avx512vnni_repack_q5_k(const void *src, void *dst, size_t row_bytes, int n_in, int n_out) {
    const int nb = n_in / ER_QK_K;
    blk_q5_kx16 *out = dst;
    for (int g16 = 0; g16 < n_out / 16; g16++)
        for (int i = 0; i < nb; i++, out++) {
            memset(out->s.sh, 0, sizeof out->s.sh);
            for (int r = 0; r < 16; r++) {
                const er_block_q5_k *in =
                    (const er_block_q5_k *)(const void *)((const uint8_t *)src + (size_t)(16 * g16 + r) * row_bytes) + i;
                put_scales(&out->s, r, in->d, in->dmin, in->scales);
                uint8_t q[ER_QK_K];
                er_kq_q5_quants(in, q);
                er_kq_q5_put(q, (uint8_t *)out->qv, (uint8_t *)out->q4, 16, r);
            }
        }
}

/* ---- kernels ---------------------------------------------------------------- */

#define dot4 er_x86_dpbusd512_bcast4

static ALWAYS_INLINE __m512i ld64(const void *p) { return _mm512_loadu_si512(p); }
static ALWAYS_INLINE __m512i zx16(const uint8_t *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Sub-block j's 16 scales and mins as int32 lanes (0..63). VPTERNLOGD 0xf8:
 * a | (b & c). */
static ALWAYS_INLINE void scale_min(const kx16_scales *w, const int j, __m512i *sc, __m512i *mn) {
    const __m512i l = zx16(w->sl[j]), h = zx16(w->sh[j / 2]), m30 = _mm512_set1_epi32(0x30);
    const __m512i hs = j % 2 ? h : _mm512_slli_epi32(h, 4);
    const __m512i hm = j % 2 ? _mm512_srli_epi32(h, 2) : _mm512_slli_epi32(h, 2);
    *sc = _mm512_ternarylogic_epi32(_mm512_and_si512(l, _mm512_set1_epi32(0x0f)), hs, m30, 0xf8);
    *mn = _mm512_ternarylogic_epi32(_mm512_srli_epi32(l, 4), hm, m30, 0xf8);
}

/* What the mins meet: bs_j = bsums_2j + bsums_2j+1 per activation row and
 * super-block, prepared once per call and slice. */
typedef struct act_q4 {
    int32_t bs[8];
} act_q4;

#define KB 64 /* activation super-blocks per stack slice (16384 elements) */
#define MT 6  /* activation rows per prefill tile */

static ALWAYS_INLINE void prep(const unsigned char *x, size_t xs, int mt, int i0, int i1, act_q4 a[MT][KB]) {
    for (int j = 0; j < mt; j++) {
        const er_block_q8_k *xb = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs);
        for (int i = i0; i < i1; i++)
            for (int s = 0; s < 8; s++) a[j][i - i0].bs[s] = xb[i].bsums[2 * s] + xb[i].bsums[2 * s + 1];
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

/* Group g of sub-blocks ja and jb (a pair from the same loads: Q4_K's
 * nibbles of chunk ja / 2, Q5_K's k = ja and 4 + k) as unsigned bytes, row
 * r in lane r. Q5_K's 4 + k: bits 0-2 from the top of qv[k], bits 3-4 from
 * q4's pair 2k (16-bit shifts of at most 5 move no wanted bit across a
 * byte); VPTERNLOGD 0xe4 takes the first operand's bits where the mask is
 * 1, the second's elsewhere. */
static ALWAYS_INLINE void unpack_pair(const uint8_t *rec, int g, const int ja, const int q5, __m512i *ua, __m512i *ub) {
    if (!q5) {
        const __m512i v = ld64(((const blk_q4_kx16 *)(const void *)rec)->qs[ja / 2][g]), m4 = _mm512_set1_epi8(0x0f);
        *ua = _mm512_and_si512(v, m4);
        *ub = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        return;
    }
    const blk_q5_kx16 *w = (const blk_q5_kx16 *)(const void *)rec;
    const int k = ja, sh = 3 - 2 * k;
    const __m512i v = ld64(w->qv[k][g]), t = ld64(w->q4[g]);
    const __m512i hi = sh > 0 ? _mm512_slli_epi16(t, sh) : _mm512_srli_epi16(t, -sh);
    *ua = _mm512_and_si512(v, _mm512_set1_epi8(0x1f));
    *ub = _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 5), hi, _mm512_set1_epi8(0x07), 0xe4),
                           _mm512_set1_epi8(0x1f));
}

/* One group of 16 weight rows against mt (1..MT) activation rows over
 * super-blocks [i0, i1): acc[j] (lane r = weight row r) += ... The record
 * at wg + i * rec_bytes is a blk_q4_kx16, or a blk_q5_kx16 when q5. */
static ALWAYS_INLINE void group_tile(const uint8_t *wg, const unsigned char *x, size_t xs, const int mt, int i0,
                                     int i1, act_q4 a[MT][KB], __m512 acc[MT], const int q5) {
    const size_t rec_bytes = q5 ? sizeof(blk_q5_kx16) : sizeof(blk_q4_kx16);
    for (int i = i0; i < i1; i++) {
        const uint8_t *rec = wg + (size_t)i * rec_bytes;
        const kx16_scales *w = (const kx16_scales *)(const void *)rec;
        if (mt == 1) er_kq8_prefetch(rec, rec_bytes);
        const er_block_q8_k *xb[MT];
        __m512i isum[MT], imin[MT];
        for (int j = 0; j < mt; j++) {
            xb[j] = (const er_block_q8_k *)(const void *)(x + (size_t)j * xs) + i;
            isum[j] = _mm512_setzero_si512();
        }
        /* pair by pair, the record in address order */
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const int ja = q5 ? p : 2 * p, jb = q5 ? 4 + p : 2 * p + 1;
            __m512i sa[MT], sb[MT];
            for (int j = 0; j < mt; j++) sa[j] = sb[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m512i ua, ub;
                unpack_pair(rec, g, ja, q5, &ua, &ub);
                for (int j = 0; j < mt; j++) {
                    sa[j] = dot4(sa[j], ua, xb[j]->qs + 32 * ja + 4 * g);
                    sb[j] = dot4(sb[j], ub, xb[j]->qs + 32 * jb + 4 * g);
                }
            }
            __m512i sca, scb, unused;
            scale_min(w, ja, &sca, &unused);
            scale_min(w, jb, &scb, &unused);
            for (int j = 0; j < mt; j++)
                isum[j] = _mm512_add_epi32(isum[j], _mm512_add_epi32(_mm512_mullo_epi32(sa[j], sca),
                                                                     _mm512_mullo_epi32(sb[j], scb)));
        }
        /* the mins after the quants, when their sums no longer hold registers */
        for (int j = 0; j < mt; j++) imin[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int jj = 0; jj < 8; jj++) {
            __m512i unused, mn;
            scale_min(w, jj, &unused, &mn);
            for (int j = 0; j < mt; j++)
                imin[j] = _mm512_add_epi32(imin[j], _mm512_mullo_epi32(mn, _mm512_set1_epi32(a[j][i - i0].bs[jj])));
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->d));
        const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w->dmin));
        for (int j = 0; j < mt; j++) acc[j] = accum16(acc[j], dw, dmw, xb[j]->d, isum[j], imin[j]);
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
        case 1: group_tile(wg, xj, a->x_stride, 1, i0, i1, ab, acc, q5); break;
        case 2: group_tile(wg, xj, a->x_stride, 2, i0, i1, ab, acc, q5); break;
        case 3: group_tile(wg, xj, a->x_stride, 3, i0, i1, ab, acc, q5); break;
        case 4: group_tile(wg, xj, a->x_stride, 4, i0, i1, ab, acc, q5); break;
        case 5: group_tile(wg, xj, a->x_stride, 5, i0, i1, ab, acc, q5); break;
        default: group_tile(wg, xj, a->x_stride, 6, i0, i1, ab, acc, q5); break;
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
                prep((const unsigned char *)a->x + (size_t)j0 * a->x_stride, a->x_stride, mt, i0, i1, ab);
                rows_tile(a, group_bytes, c0, c1, j0, mt, i0, i1, ab, q5);
            }
        }
    }
}

void er_avx512vnni_matmul_q4_kx16(const er_matmul_args *a) { matmul_kx16(a, 0); }
void er_avx512vnni_matmul_q5_kx16(const er_matmul_args *a) { matmul_kx16(a, 1); }

#endif
