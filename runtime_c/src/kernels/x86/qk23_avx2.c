/*
 * qk23_avx2.c — Q2_K, Q3_K and IQ4_XS weights against Q8_K activations,
 * AVX2.
 *
 * As qk_avx2.c: the weights become bytes that one maddubs multiplies with
 * the activations, the sub-block scales are applied in integer by madd, and
 * each super-block ends as exact int32 isum/imin fed to kquant.h's shared
 * float tail, so every result equals generic's bit for bit.
 *  Q2_K: codes 0..3 (32 at a time: one shift and mask of a 32-byte load),
 *        scales per 16 as int16 pairs, mins by one madd with the bsums.
 *  Q3_K: q + 4 unsigned (0..7: the two low bits, 4 where the hmask bit is
 *        set), less 4 Σ scale * bsum, which undoes the offset exactly.
 *  IQ4_XS: the grid by pshufb (signed, |v| <= 127: maddubs of |w| with x
 *        carrying w's sign), one signed 6-bit scale per 32.
 * matmul (m > 1) unpacks each weight super-block once for a tile of 8
 * activation rows (the avx512vnni build also takes VPDPWSSD for madd +
 * add and, for Q2_K, VPDPBUSD alone); decode (m = 1)
 * takes the single-row dot. This file is compiled twice (avx2.h's
 * ER_X86_FN names), once per x86 table.
 */
#include <string.h>

#include "avx2.h"
#include "../kquant.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE __m256i ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The scale vectors madd applies to 32 products: for half h of a
 * super-block (both lanes holding int16 scales 8h..8h+7, from half_scales)
 * and pair j, scale 8h+2j in the low lane and 8h+2j+1 in the high one: one
 * in-lane shuffle, where building each from scalars took eight
 * instructions, most of the Q3_K dot's count. */
static ALWAYS_INLINE __m256i half_scales(__m256i s16, const int h) {
    return h ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
}

static ALWAYS_INLINE __m256i pair_scales(__m256i sh, const int j) {
    const char a = (char)(4 * j), b = (char)(4 * j + 2);
    const __m256i idx = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                         b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
    return _mm256_shuffle_epi8(sh, idx);
}

/* er_q3k_scales with 32-bit word operations (the same bits) */
static ALWAYS_INLINE __m128i q3k_scales(const uint8_t s[12]) {
    uint32_t a[3], o[4];
    memcpy(a, s, 12);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    o[0] = (a[0] & m4) | ((a[2] & m2) << 4);
    o[1] = (a[1] & m4) | (((a[2] >> 2) & m2) << 4);
    o[2] = ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4);
    o[3] = ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4);
    return _mm_sub_epi8(_mm_set_epi32((int)o[3], (int)o[2], (int)o[1], (int)o[0]), _mm_set1_epi8(32));
}

float ER_X86_FN(dot_q2_k)(int n, const void *w_row, const void *x_row) {
    const er_block_q2_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)w[i].scales);
        const __m256i s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, m4));
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld(w[i].qs + 32 * h), sh = half_scales(s16, h);
            const int8_t *xs = x[i].qs + 128 * h;
            for (int j = 0; j < 4; j++) {
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
                const __m256i p16 = _mm256_maddubs_epi16(u, ld(xs + 32 * j));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, pair_scales(sh, j)));
            }
        }
        /* the mins: the high nibbles of the 16 scale bytes, as int16 */
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
        const int32_t imin = er_avx2_hsum_epi32(_mm256_madd_epi16(ld(x[i].bsums), mn));
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), _cvtsh_ss(w[i].dmin), x[i].d, er_avx2_hsum_epi32(acc), imin);
    }
    return sum;
}

float ER_X86_FN(dot_q3_k)(int n, const void *w_row, const void *x_row) {
    const er_block_q3_k *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const __m256i s16 = _mm256_cvtepi8_epi16(q3k_scales(w[i].scales));
        const __m256i hm = ld(w[i].hmask);
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld(w[i].qs + 32 * h), sh = half_scales(s16, h);
            const int8_t *xs = x[i].qs + 128 * h;
            for (int j = 0; j < 4; j++) {
                /* hmask bit 4h+j moved to bit 2 (a 16-bit shift: bit 2 of
                 * each byte comes from within the same byte) */
                const int b = 4 * h + j;
                const __m256i hs = b >= 2 ? _mm256_srli_epi16(hm, b - 2) : _mm256_slli_epi16(hm, 2 - b);
                const __m256i hb = _mm256_and_si256(hs, four);
                const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3), hb);
                const __m256i p16 = _mm256_maddubs_epi16(u, ld(xs + 32 * j));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, pair_scales(sh, j)));
            }
        }
        /* 4 Σ s bsum: the offset of the unsigned q + 4 */
        const int32_t off = er_avx2_hsum_epi32(_mm256_madd_epi16(ld(x[i].bsums), s16));
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), 0.0f, x[i].d, er_avx2_hsum_epi32(acc) - 4 * off, 0);
    }
    return sum;
}

float ER_X86_FN(dot_iq4_xs)(int n, const void *w_row, const void *x_row) {
    const er_block_iq4_xs *w = w_row;
    const er_block_q8_k *x = x_row;
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int i = 0; i < n / ER_QK_K; i++) {
        int8_t ls[8];
        er_iq4xs_scales(&w[i], ls);
        int64_t ls8;
        memcpy(&ls8, ls, 8);
        /* the eight int16 scales in both lanes; pair_scales-like shuffles
         * broadcast scale j */
        const __m256i l16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(ls8)));
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(w[i].qs + 16 * j));
            const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
            const __m256i v = _mm256_shuffle_epi8(grid, nib);
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(ld(x[i].qs + 32 * j), v));
            const __m256i sj = _mm256_shuffle_epi8(l16, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, sj));
        }
        sum = er_kq_accum(sum, _cvtsh_ss(w[i].d), 0.0f, x[i].d, er_avx2_hsum_epi32(acc), 0);
    }
    return sum;
}

/* ---- matmul: one unpacked super-block meets a tile of activation rows ---- */

/* Activation rows per tile: 8, one float tail of 8 lanes per weight
 * super-block. AVX2's 16 ymm registers then spill some unpacked vectors,
 * yet 8 measured 5-10% faster than 4 for Q3_K and IQ4_XS (Q2_K about the same) on
 * Zen 4's AVX2 table; AVX-512VL's 32 registers hold the whole tile. */
enum { MR = 8 };

/* The int32 sums of acc[0..8), in lanes 0..7 (integer, so any order gives
 * the single-row dot's exact value): six hadds and a lane swap where a
 * reduction per row took seven instructions each. */
static ALWAYS_INLINE __m256i hsum_tile(const __m256i acc[MR]) {
    const __m256i b0 = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
    const __m256i b1 = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[4], acc[5]), _mm256_hadd_epi32(acc[6], acc[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

/* er_kq_accum on a tile's rows (one weight super-block), statement for
 * statement: the same IEEE operations per lane give the same bits, and
 * none are fused (kq_x8_avx2.h's er_kq8_accum says why). Lanes past mb
 * are never stored. */
static ALWAYS_INLINE __m256 accum_tile(__m256 sum, float dw, float dmw, __m256 dx, __m256i isum, __m256i imin) {
    const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(dw), dx);
    const __m256 dm = _mm256_mul_ps(_mm256_set1_ps(dmw), dx);
    const __m256 a = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(isum));
    const __m256 b = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(imin));
    return _mm256_add_ps(sum, _mm256_sub_ps(a, b));
}

/* the activation rows' d, 0 past mb */
static ALWAYS_INLINE __m256 row_d(const er_block_q8_k *const *x, const int mb) {
    float d[8] = {0};
    for (int r = 0; r < mb; r++) d[r] = x[r]->d;
    return _mm256_loadu_ps(d);
}

/* acc + madd(p16, sc): VPDPWSSD in the VNNI build (the same exact int32
 * sums, one instruction where AVX2 takes two; its 4-cycle chain is hidden
 * behind the tile's other rows, which the single-row dot could not do). */
static ALWAYS_INLINE __m256i madd_acc(__m256i acc, __m256i p16, __m256i sc) {
#if ER_X86_VNNI
    return _mm256_dpwssd_epi32(acc, p16, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, sc));
#endif
}

/* Each *_rows function takes super-block w against the same super-block of
 * mb activation rows x[0..mb), unpacking the weight vectors (u, the pair
 * scales) once per 32 elements and applying them to every row, each with
 * its own accumulator; each row's isum/imin are the integers the single-row
 * dot computes and lane r of s advances through er_kq_accum's operations,
 * so the results keep generic's bits. mb is a constant MR in the main
 * tiles, which keeps the row loops unrolled and the accumulators in
 * registers; rows past mb keep zero accumulators. */
static ALWAYS_INLINE __m256 q2_k_rows(const er_block_q2_k *w, const er_block_q8_k *const *x, const int mb, __m256 s) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)w->scales);
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, m4));
    __m256i acc[MR], mins[MR];
    for (int r = 0; r < MR; r++) acc[r] = mins[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = ld(w->qs + 32 * h), sh = half_scales(s16, h);
        for (int j = 0; j < 4; j++) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3), ps = pair_scales(sh, j);
#if ER_X86_VNNI
            /* u * scale per byte (<= 3 * 15: no carry crosses a byte of
             * the 16-bit product), so VPDPBUSD alone multiplies, scales
             * and accumulates: the same exact int32 sums */
            const __m256i us = _mm256_mullo_epi16(u, ps);
            for (int r = 0; r < mb; r++) acc[r] = _mm256_dpbusd_epi32(acc[r], us, ld(x[r]->qs + 128 * h + 32 * j));
#else
            for (int r = 0; r < mb; r++)
                acc[r] = madd_acc(acc[r], _mm256_maddubs_epi16(u, ld(x[r]->qs + 128 * h + 32 * j)), ps);
#endif
        }
    }
    const __m256i mn = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
    for (int r = 0; r < mb; r++) mins[r] = _mm256_madd_epi16(ld(x[r]->bsums), mn);
    return accum_tile(s, _cvtsh_ss(w->d), _cvtsh_ss(w->dmin), row_d(x, mb), hsum_tile(acc), hsum_tile(mins));
}

static ALWAYS_INLINE __m256 q3_k_rows(const er_block_q3_k *w, const er_block_q8_k *const *x, const int mb, __m256 s) {
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m256i s16 = _mm256_cvtepi8_epi16(q3k_scales(w->scales));
    const __m256i hm = ld(w->hmask);
    __m256i acc[MR];
    /* starts at -4 Σ s bsum, the offset of the unsigned q + 4 */
    for (int r = 0; r < MR; r++)
        acc[r] = r < mb ? _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_slli_epi32(_mm256_madd_epi16(ld(x[r]->bsums), s16), 2))
                        : _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = ld(w->qs + 32 * h), sh = half_scales(s16, h);
        for (int j = 0; j < 4; j++) {
            const int b = 4 * h + j;
            const __m256i hs = b >= 2 ? _mm256_srli_epi16(hm, b - 2) : _mm256_slli_epi16(hm, 2 - b);
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3),
                                              _mm256_and_si256(hs, four));
            const __m256i ps = pair_scales(sh, j);
            for (int r = 0; r < mb; r++)
                acc[r] = madd_acc(acc[r], _mm256_maddubs_epi16(u, ld(x[r]->qs + 128 * h + 32 * j)), ps);
        }
    }
    return accum_tile(s, _cvtsh_ss(w->d), 0.0f, row_d(x, mb), hsum_tile(acc), _mm256_setzero_si256());
}

static ALWAYS_INLINE __m256 iq4_xs_rows(const er_block_iq4_xs *w, const er_block_q8_k *const *x, const int mb,
                                        __m256 s) {
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    int8_t ls[8];
    er_iq4xs_scales(w, ls);
    int64_t ls8;
    memcpy(&ls8, ls, 8);
    const __m256i l16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(ls8)));
    __m256i acc[MR];
    for (int r = 0; r < MR; r++) acc[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(w->qs + 16 * j));
        const __m256i v = _mm256_shuffle_epi8(grid, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
        const __m256i av = _mm256_sign_epi8(v, v);
        const __m256i sj = _mm256_shuffle_epi8(l16, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
        for (int r = 0; r < mb; r++)
            acc[r] = madd_acc(acc[r], _mm256_maddubs_epi16(av, _mm256_sign_epi8(ld(x[r]->qs + 32 * j), v)), sj);
    }
    return accum_tile(s, _cvtsh_ss(w->d), 0.0f, row_d(x, mb), hsum_tile(acc), _mm256_setzero_si256());
}

enum { KQ2, KQ3, IQ4XS };

static ALWAYS_INLINE __m256 rows_t(const void *w_row, int i, const er_block_q8_k *const *x, const int mb, __m256 s,
                                   const int t) {
    if (t == KQ2) return q2_k_rows((const er_block_q2_k *)w_row + i, x, mb, s);
    if (t == KQ3) return q3_k_rows((const er_block_q3_k *)w_row + i, x, mb, s);
    return iq4_xs_rows((const er_block_iq4_xs *)w_row + i, x, mb, s);
}

/* Weight rows in ~128 KiB chunks, kept in L2 across the activation tiles
 * (as qk_avx2.c's matmul); m == 1 (decode) keeps the single-row dot, whose
 * unpacking interleaves with its multiplies. Rows never depend on one
 * another here, so m_one needs nothing. */
static ALWAYS_INLINE void matmul_rows(const er_matmul_args *a, const int t) {
    const unsigned char *w = a->w, *x = a->x;
    const int nb = a->n / ER_QK_K;
    const int chunk = a->w_row_bytes < 131072 ? (int)(131072 / a->w_row_bytes) : 1;
    for (int c0 = a->r0; c0 < a->r1; c0 += chunk) {
        const int c1 = a->r1 - c0 < chunk ? a->r1 : c0 + chunk;
        for (int b = 0; b < a->m; b += MR) {
            const int mb = a->m - b < MR ? a->m - b : MR;
            for (int r = c0; r < c1; r++) {
                const void *wr = w + (size_t)r * a->w_row_bytes;
                __m256 s = _mm256_setzero_ps();
                for (int i = 0; i < nb; i++) {
                    const er_block_q8_k *xi[MR];
                    for (int j = 0; j < mb; j++)
                        xi[j] = (const er_block_q8_k *)(const void *)(x + (size_t)(b + j) * a->x_stride) + i;
                    s = mb == MR ? rows_t(wr, i, xi, MR, s, t) : rows_t(wr, i, xi, mb, s, t);
                }
                float sv[8];
                _mm256_storeu_ps(sv, s);
                for (int j = 0; j < mb; j++) a->y[(size_t)(b + j) * a->y_stride + (size_t)r] = sv[j];
            }
        }
    }
}

typedef float (*dot_fn)(int n, const void *w_row, const void *x_row);

static ALWAYS_INLINE void matmul_t(const er_matmul_args *a, dot_fn dot, const int t) {
    if (a->m > 1) {
        matmul_rows(a, t);
        return;
    }
    for (int r = a->r0; r < a->r1; r++)
        a->y[r] = dot(a->n, (const unsigned char *)a->w + (size_t)r * a->w_row_bytes, a->x);
}

void ER_X86_FN(matmul_q2_k)(const er_matmul_args *a) { matmul_t(a, ER_X86_FN(dot_q2_k), KQ2); }
void ER_X86_FN(matmul_q3_k)(const er_matmul_args *a) { matmul_t(a, ER_X86_FN(dot_q3_k), KQ3); }
void ER_X86_FN(matmul_iq4_xs)(const er_matmul_args *a) { matmul_t(a, ER_X86_FN(dot_iq4_xs), IQ4XS); }
