/*
 * qk_avx2.c — Q4_K, Q5_K and Q6_K weights against Q8_K activations, AVX2.
 *
 * Weights are unpacked to unsigned bytes (0..15, 0..31, 0..63) so one
 * maddubs multiplies them with the signed activations; the sub-block scales
 * are applied in integer by madd with the scale broadcast. Everything up to
 * the super-block's isum/imin is exact int32 arithmetic, and the float tail
 * is kquant.h's, so the results equal generic's bit for bit.
 */
#include "avx2.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE __m256i ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

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
        er_kq_scale_min(w[i].scales, sc, mn);
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i q = ld(w[i].qs + 32 * c);
            const __m256i lo = _mm256_and_si256(q, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            acc = _mm256_add_epi32(acc, scaled_dot(lo, ld(x[i].qs + 64 * c), sc[2 * c]));
            acc = _mm256_add_epi32(acc, scaled_dot(hi, ld(x[i].qs + 64 * c + 32), sc[2 * c + 1]));
        }
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), x[i].d, er_avx2_hsum_epi32(acc),
                          er_kq_min_sum(mn, x[i].bsums));
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
        er_kq_scale_min(w[i].scales, sc, mn);
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
                          er_kq_min_sum(mn, x[i].bsums));
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
        const int32_t isum = er_avx2_hsum_epi32(acc) - er_kq6_offset_sum(sc, x[i].bsums);
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), 0.0f, x[i].d, isum, 0);
    }
    return sum;
}

typedef float (*dot_fn)(int n, const void *w_row, const void *x_row);

/* Weight rows in ~128 KiB chunks (kept in L2) against each activation row
 * (in L1): weights stream from memory once however large m is. */
static ALWAYS_INLINE void matmul_with(const er_matmul_args *a, dot_fn dot) {
    const unsigned char *w = a->w, *x = a->x;
    const int chunk = a->w_row_bytes < 131072 ? (int)(131072 / a->w_row_bytes) : 1;
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int b = 0; b < a->m; b++)
            for (int r = c0; r < c1; r++)
                a->y[(size_t)b * a->y_stride + (size_t)r] =
                    dot(a->n, w + (size_t)r * a->w_row_bytes, x + (size_t)b * a->x_stride);
    }
}

void er_avx2_matmul_q4_k(const er_matmul_args *a) { matmul_with(a, er_avx2_dot_q4_k); }
void er_avx2_matmul_q5_k(const er_matmul_args *a) { matmul_with(a, er_avx2_dot_q5_k); }
void er_avx2_matmul_q6_k(const er_matmul_args *a) { matmul_with(a, er_avx2_dot_q6_k); }
