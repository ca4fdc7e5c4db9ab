/*
 * qk_avx2.c — Q4_K, Q5_K and Q6_K weights against Q8_K activations, AVX2.
 *
 * Weights are unpacked to unsigned bytes (0..15, 0..31, 0..63) so one
 * maddubs multiplies them with the signed activations; the sub-block scales
 * are applied in integer by madd with the scale broadcast. Everything up to
 * the super-block's isum/imin is exact int32 arithmetic, and the float tail
 * is kquant.h's, so the results equal generic's bit for bit.
 */
#include <string.h>

#include "avx2.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE __m256i ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The per-super-block scalar work, which decode (m = 1) pays once per 256
 * weights and which was ~half the kernel's instructions when written as
 * kquant.h's byte loops: the 6-bit scales and mins of Q4_K/Q5_K unpacked
 * with 32-bit word operations (the same bits as er_kq_scale_min), and the
 * two bsums products as one madd each (the same integers as er_kq_min_sum
 * and er_kq6_offset_sum: exact, so the results stay bit-identical). */
static ALWAYS_INLINE void scale_min8(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8]) {
    uint32_t u[3], o[4];
    memcpy(u, s, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    o[0] = u[0] & m6;                                        /* scales 0-3 */
    o[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);          /* scales 4-7 */
    o[2] = u[1] & m6;                                        /* mins 0-3 */
    o[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);   /* mins 4-7 */
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}

static ALWAYS_INLINE int32_t min_sum8(const uint8_t mn[8], const int16_t bsums[16]) {
    int64_t m;
    memcpy(&m, mn, 8);
    const __m128i m8 = _mm_cvtsi64_si128(m);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* mn[j] twice: bsums 2j, 2j+1 */
    return er_avx2_hsum_epi32(_mm256_madd_epi16(ld(bsums), m16));
}

static ALWAYS_INLINE int32_t q6_offset_sum(const int8_t scales[16], const int16_t bsums[16]) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)scales));
    return 32 * er_avx2_hsum_epi32(_mm256_madd_epi16(ld(bsums), s16));
}

/* Σ scale * (u . x) over 32 elements as eight int32 lanes. */
static ALWAYS_INLINE __m256i scaled_dot(__m256i u, __m256i x, int scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16((short)scale));
}

float er_avx2_dot_q4_k(int n, const void *w_row, const void *x_row) {
    const er_block_q4_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        uint8_t sc[8], mn[8];
        scale_min8(w[i].scales, sc, mn);
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i q = ld(w[i].qs + 32 * c);
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            acc = _mm256_add_epi32(acc, scaled_dot(lo, ld(x[i].qs + 64 * c), sc[2 * c]));
            acc = _mm256_add_epi32(acc, scaled_dot(hi, ld(x[i].qs + 64 * c + 32), sc[2 * c + 1]));
        }
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), x[i].d, er_avx2_hsum_epi32(acc),
                          min_sum8(mn, x[i].bsums));
    }
    return sum;
}

float er_avx2_dot_q5_k(int n, const void *w_row, const void *x_row) {
    const er_block_q5_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        uint8_t sc[8], mn[8];
        scale_min8(w[i].scales, sc, mn);
        const __m256i qh = ld(w[i].qh);
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i q = ld(w[i].qs + 32 * c);
            const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * c)));
            const __m256i bh = _mm256_set1_epi8((char)(1 << (2 * c + 1)));
            /* the fifth bit: 16 where qh has bit 2c (2c+1) set */
            const __m256i hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b16);
            const __m256i hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b16);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), hl);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
            acc = _mm256_add_epi32(acc, scaled_dot(lo, ld(x[i].qs + 64 * c), sc[2 * c]));
            acc = _mm256_add_epi32(acc, scaled_dot(hi, ld(x[i].qs + 64 * c + 32), sc[2 * c + 1]));
        }
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), x[i].d, er_avx2_hsum_epi32(acc),
                          min_sum8(mn, x[i].bsums));
    }
    return sum;
}

/* 32 elements u . x with scale a on the first 16 and b on the last 16. */
static ALWAYS_INLINE __m256i scaled_dot2(__m256i u, __m256i x, int a, int b) {
    const __m256i s = _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), s);
}

float er_avx2_dot_q6_k(int n, const void *w_row, const void *x_row) {
    const er_block_q6_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const int8_t *sc = w[i].scales;
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = ld(w[i].ql + 64 * h), l1 = ld(w[i].ql + 64 * h + 32);
            const __m256i qh = ld(w[i].qh + 32 * h);
            /* q = nibble | (2-bit field << 4), unsigned 0..63 */
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            const int8_t *xs = x[i].qs + 128 * h;
            const int8_t *s = sc + 8 * h;
            acc = _mm256_add_epi32(acc, scaled_dot2(q0, ld(xs), s[0], s[1]));
            acc = _mm256_add_epi32(acc, scaled_dot2(q1, ld(xs + 32), s[2], s[3]));
            acc = _mm256_add_epi32(acc, scaled_dot2(q2, ld(xs + 64), s[4], s[5]));
            acc = _mm256_add_epi32(acc, scaled_dot2(q3, ld(xs + 96), s[6], s[7]));
        }
        const int32_t isum = er_avx2_hsum_epi32(acc) - q6_offset_sum(sc, x[i].bsums);
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), 0.0f, x[i].d, isum, 0);
    }
    return sum;
}

/* ---- matmul: one unpacked super-block meets four activation rows ---------- */

/* A weight super-block unpacked once: u[j] holds its elements 32j..32j+31 as
 * unsigned bytes, sc[j] the int16 scale(s) madd applies to them (one per
 * 32 for Q4_K/Q5_K, one per 16-lane half for Q6_K), in the element order of
 * the Q8_K activations (u[j] meets x.qs + 32j). */
typedef struct kq_unpacked {
    __m256i u[8], sc[8];
    uint8_t mn[8];            /* Q4_K/Q5_K sub-block mins */
    float d, dmin;
} kq_unpacked;

enum { KQ4, KQ5, KQ6 };

static ALWAYS_INLINE void unpack(const void *w_row, int i, kq_unpacked *k, const int t) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    if (t == KQ6) {
        const er_block_q6_k *w = (const er_block_q6_k *)w_row + i;
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = ld(w->ql + 64 * h), l1 = ld(w->ql + 64 * h + 32), qh = ld(w->qh + 32 * h);
            k->u[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            k->u[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            k->u[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
            k->u[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        }
        for (int j = 0; j < 8; j++)
            k->sc[j] = _mm256_set_m128i(_mm_set1_epi16(w->scales[2 * j + 1]), _mm_set1_epi16(w->scales[2 * j]));
        k->d = _cvtsh_ss(w->d);
        return;
    }
    uint8_t sc[8];
    const uint8_t *scales, *qs;
    if (t == KQ4) {
        const er_block_q4_k *w = (const er_block_q4_k *)w_row + i;
        scales = w->scales;
        qs = w->qs;
        k->d = _cvtsh_ss(w->d);
        k->dmin = _cvtsh_ss(w->dmin);
    } else {
        const er_block_q5_k *w = (const er_block_q5_k *)w_row + i;
        scales = w->scales;
        qs = w->qs;
        k->d = _cvtsh_ss(w->d);
        k->dmin = _cvtsh_ss(w->dmin);
    }
    scale_min8(scales, sc, k->mn);
    for (int c = 0; c < 4; c++) {
        const __m256i q = ld(qs + 32 * c);
        k->u[2 * c] = _mm256_and_si256(q, m4);
        k->u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    if (t == KQ5) {
        const er_block_q5_k *w = (const er_block_q5_k *)w_row + i;
        const __m256i qh = ld(w->qh), b16 = _mm256_set1_epi8(16);
        for (int j = 0; j < 8; j++) {
            const __m256i bit = _mm256_set1_epi8((char)(1 << j));
            k->u[j] = _mm256_or_si256(k->u[j], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), b16));
        }
    }
    for (int j = 0; j < 8; j++) k->sc[j] = _mm256_set1_epi16((short)sc[j]);
}

/* One activation super-block against an unpacked weight super-block, added
 * to sum through kquant.h's shared float tail (so bit-identical to generic). */
static ALWAYS_INLINE float kq_dot1(const kq_unpacked *k, const er_block_q8_k *x, float sum) {
    __m256i acc = _mm256_madd_epi16(_mm256_maddubs_epi16(k->u[0], ld(x->qs)), k->sc[0]);
    for (int j = 1; j < 8; j++)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(k->u[j], ld(x->qs + 32 * j)), k->sc[j]));
    return er_kq_accum(sum, k->d, k->dmin, x->d, er_avx2_hsum_epi32(acc), min_sum8(k->mn, x->bsums));
}

/* Q6_K: the unsigned q+32 products, less the offset kquant.h undoes. */
static ALWAYS_INLINE float kq6_dot1(const kq_unpacked *k, const int8_t *scales, const er_block_q8_k *x, float sum) {
    __m256i acc = _mm256_madd_epi16(_mm256_maddubs_epi16(k->u[0], ld(x->qs)), k->sc[0]);
    for (int j = 1; j < 8; j++)
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(k->u[j], ld(x->qs + 32 * j)), k->sc[j]));
    const int32_t isum = er_avx2_hsum_epi32(acc) - q6_offset_sum(scales, x->bsums);
    return er_kq_accum(sum, k->d, 0.0f, x->d, isum, 0);
}

/* Weight rows in ~128 KiB chunks (kept in L2); within a chunk each weight
 * super-block is unpacked once and used for four activation rows, so the
 * unpacking cost no longer scales with m. */
static ALWAYS_INLINE void matmul_kq(const er_matmul_args *a, const int t) {
    const unsigned char *w = a->w, *x = a->x;
    const int nb = a->n / ER_QK_K;
    const int chunk = a->w_row_bytes < 131072 ? (int)(131072 / a->w_row_bytes) : 1;
    kq_unpacked k;
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int b = 0; b < a->m; b += 4) {
            const int mb = a->m - b < 4 ? a->m - b : 4;
            const unsigned char *xb = x + (size_t)b * a->x_stride;
            for (int r = c0; r < c1; r++) {
                const unsigned char *wr = w + (size_t)r * a->w_row_bytes;
                float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int i = 0; i < nb; i++) {
                    unpack(wr, i, &k, t);
                    const int8_t *sc6 = t == KQ6 ? ((const er_block_q6_k *)(const void *)wr)[i].scales : NULL;
                    for (int j = 0; j < mb; j++) {
                        const er_block_q8_k *xj = (const er_block_q8_k *)(const void *)(xb + (size_t)j * a->x_stride) + i;
                        s[j] = t == KQ6 ? kq6_dot1(&k, sc6, xj, s[j]) : kq_dot1(&k, xj, s[j]);
                    }
                }
                for (int j = 0; j < mb; j++) a->y[(size_t)(b + j) * a->y_stride + (size_t)r] = s[j];
            }
        }
    }
}

/* Decode (m == 1), and the rows of a batched step that decode alone
 * (m_one), keep the single-row dots, which interleave unpacking and
 * multiplying instead of materialising the unpacked block. */
void er_avx2_matmul_q4_k(const er_matmul_args *a) {
    const int m_kq = a->m == 1 ? 0 : a->m - a->m_one;
    for (int b = m_kq; b < a->m; b++) {
        const unsigned char *x = (const unsigned char *)a->x + (size_t)b * a->x_stride;
        for (int r = a->r0; r < a->r1; r++)
            a->y[(size_t)b * a->y_stride + (size_t)r] =
                er_avx2_dot_q4_k(a->n, (const unsigned char *)a->w + (size_t)r * a->w_row_bytes, x);
    }
    if (m_kq) matmul_kq(&(er_matmul_args){.w = a->w, .w_row_bytes = a->w_row_bytes, .x = a->x, .x_stride = a->x_stride,
                                           .y = a->y, .y_stride = a->y_stride, .n = a->n, .m = m_kq, .r0 = a->r0,
                                           .r1 = a->r1}, KQ4);
}
void er_avx2_matmul_q5_k(const er_matmul_args *a) {
    const int m_kq = a->m == 1 ? 0 : a->m - a->m_one;
    for (int b = m_kq; b < a->m; b++) {
        const unsigned char *x = (const unsigned char *)a->x + (size_t)b * a->x_stride;
        for (int r = a->r0; r < a->r1; r++)
            a->y[(size_t)b * a->y_stride + (size_t)r] =
                er_avx2_dot_q5_k(a->n, (const unsigned char *)a->w + (size_t)r * a->w_row_bytes, x);
    }
    if (m_kq) matmul_kq(&(er_matmul_args){.w = a->w, .w_row_bytes = a->w_row_bytes, .x = a->x, .x_stride = a->x_stride,
                                           .y = a->y, .y_stride = a->y_stride, .n = a->n, .m = m_kq, .r0 = a->r0,
                                           .r1 = a->r1}, KQ5);
}
void er_avx2_matmul_q6_k(const er_matmul_args *a) {
    const int m_kq = a->m == 1 ? 0 : a->m - a->m_one;
    for (int b = m_kq; b < a->m; b++) {
        const unsigned char *x = (const unsigned char *)a->x + (size_t)b * a->x_stride;
        for (int r = a->r0; r < a->r1; r++)
            a->y[(size_t)b * a->y_stride + (size_t)r] =
                er_avx2_dot_q6_k(a->n, (const unsigned char *)a->w + (size_t)r * a->w_row_bytes, x);
    }
    if (m_kq) matmul_kq(&(er_matmul_args){.w = a->w, .w_row_bytes = a->w_row_bytes, .x = a->x, .x_stride = a->x_stride,
                                           .y = a->y, .y_stride = a->y_stride, .n = a->n, .m = m_kq, .r0 = a->r0,
                                           .r1 = a->r1}, KQ6);
}
