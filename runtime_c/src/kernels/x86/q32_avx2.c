/*
 * q32_avx2.c — Q4_1, Q5_0, Q5_1 and IQ4_NL weights against Q8_0
 * activations, AVX2: the 32-element fallback types of llama.cpp's K-quant
 * mixes (rows of 576, 640, 960 ... cannot hold super-blocks of 256).
 *
 * Each block becomes 32 int8 weights in element order (the nibbles as
 * Q4_0's unpack_q4_0, the fifth bit of Q5_0/Q5_1 spread from qh, IQ4_NL's
 * grid looked up with one pshufb), then an exact int32 dot as q_avx2.c
 * takes it, and an FMA of its float with the product of the scales. Q5_0
 * and IQ4_NL are signed (q - 16, grid values -127..113: maddubs of |w| with
 * x carrying w's sign, no saturation since |w| <= 127); Q4_1 and Q5_1 are
 * unsigned codes meeting x directly, plus the block's min times Σ x, that
 * sum taken from the same activation quants (kernels/generic/dot_q4_1_q5.c).
 * The same integers as generic, summed in another float order.
 *
 * matmul: ER_MATMUL_TILES with each weight block unpacked once for four
 * activation rows, as q_avx2.c.
 *
 * Compiled twice like the repacked kernels (avx2.h): the ER_X86_VNNI build,
 * for the "avx512vnni" table, takes each block's products with VPDPBUSD in
 * place of maddubs + madd (er_x86_dot4_acc: the same exact int32 sums, so
 * the two tables return the same bits).
 */
#include "../matmul_tiles.h"
#include "avx2.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

enum { T_Q4_1, T_Q5_0, T_Q5_1, T_IQ4_NL };

static ALWAYS_INLINE float h2f(er_f16 h) { return _cvtsh_ss(h); }

/* 16 bytes of nibbles as 32 bytes 0..15 in element order */
static ALWAYS_INLINE __m256i nibbles(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

/* bit j of the 32-bit little-endian qh as 16 in byte j, 0 elsewhere */
static ALWAYS_INLINE __m256i fifth_bits(const uint8_t qh[4]) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                         3, 3, 3, 3, 3);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), idx);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

/* Block i of a weight row as 32 int8 in element order, its scale in *dw
 * and (Q4_1/Q5_1) its min in *mw. */
static ALWAYS_INLINE __m256i load_w(const void *w_row, int i, float *dw, float *mw, const int t) {
    if (t == T_Q4_1) {
        const er_block_q4_1 *b = (const er_block_q4_1 *)w_row + i;
        *dw = h2f(b->d);
        *mw = h2f(b->m);
        return nibbles(b->qs);
    }
    if (t == T_Q5_1) {
        const er_block_q5_1 *b = (const er_block_q5_1 *)w_row + i;
        *dw = h2f(b->d);
        *mw = h2f(b->m);
        return _mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh));
    }
    if (t == T_Q5_0) {
        const er_block_q5_0 *b = (const er_block_q5_0 *)w_row + i;
        *dw = h2f(b->d);
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)), _mm256_set1_epi8(16));
    }
    const er_block_iq4_nl *b = (const er_block_iq4_nl *)w_row + i;
    *dw = h2f(b->d);
    const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)er_iq4nl_values));
    return _mm256_shuffle_epi8(grid, nibbles(b->qs));
}

static ALWAYS_INLINE int has_min(const int t) { return t == T_Q4_1 || t == T_Q5_1; }

/* One weight block against activation block xb, added into acc (and the
 * min's term into accm). aw: |w| for the signed types, w itself else. */
static ALWAYS_INLINE void block_fma(__m256i aw, __m256i wq, float dw, float mw, const er_block_q8_0 *xb, __m256 *acc,
                                    __m256 *accm, const int t) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)xb->qs);
    const __m256i zero = _mm256_setzero_si256();
    const float dx = h2f(xb->d);
    if (has_min(t)) {
        const __m256i p32 = er_x86_dot4_acc(zero, aw, x);
        const __m256i s32 = er_x86_dot4_acc(zero, _mm256_set1_epi8(1), x);
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw * dx), *acc);
        *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_set1_ps(mw * dx), *accm);
    } else {
        const __m256i p32 = er_x86_dot4_acc(zero, aw, _mm256_sign_epi8(x, wq));
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw * dx), *acc);
    }
}

static ALWAYS_INLINE __m256i abs_w(__m256i wq, const int t) { return has_min(t) ? wq : _mm256_sign_epi8(wq, wq); }

/* R weight rows x four activation rows (x, x + xs, ...), each weight block
 * unpacked once; out[4j + k] = row j . activation k */
static ALWAYS_INLINE void rows_q(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int t) {
    const int nb = n / ER_QK8_0;
    for (int j = 0; j < R; j++) {
        const void *wr = (const unsigned char *)w + (size_t)j * rb;
        __m256 a[4], am[4];
        for (int k = 0; k < 4; k++) a[k] = am[k] = _mm256_setzero_ps();
        for (int i = 0; i < nb; i++) {
            float dw, mw = 0.0f;
            const __m256i wq = load_w(wr, i, &dw, &mw, t);
            const __m256i aw = abs_w(wq, t);
            for (int k = 0; k < 4; k++) {
                const er_block_q8_0 *xb = (const er_block_q8_0 *)(const void *)(x + (size_t)k * xs) + i;
                block_fma(aw, wq, dw, mw, xb, &a[k], &am[k], t);
            }
        }
        for (int k = 0; k < 4; k++) out[4 * j + k] = er_avx2_hsum_ps(_mm256_add_ps(a[k], am[k]));
    }
}

/* Single-row dot, two interleaved chains so FMA latency does not
 * serialise the blocks in decode. */
static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int t) {
    const int nb = n / ER_QK8_0;
    const er_block_q8_0 *x = x_row;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        float d0, d1, n0 = 0.0f, n1 = 0.0f;
        const __m256i w0 = load_w(w_row, i, &d0, &n0, t), w1 = load_w(w_row, i + 1, &d1, &n1, t);
        block_fma(abs_w(w0, t), w0, d0, n0, x + i, &a0, &m0, t);
        block_fma(abs_w(w1, t), w1, d1, n1, x + i + 1, &a1, &m1, t);
    }
    if (i < nb) {
        float d0, n0 = 0.0f;
        const __m256i w0 = load_w(w_row, i, &d0, &n0, t);
        block_fma(abs_w(w0, t), w0, d0, n0, x + i, &a0, &m0, t);
    }
    return er_avx2_hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(m0, m1)));
}

float ER_X86_FN(dot_q4_1)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q4_1); }
float ER_X86_FN(dot_q5_0)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_0); }
float ER_X86_FN(dot_q5_1)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_Q5_1); }
float ER_X86_FN(dot_iq4_nl)(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, T_IQ4_NL); }

void ER_X86_FN(matmul_q4_1)(const er_matmul_args *a) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, T_Q4_1); }
void ER_X86_FN(matmul_q5_0)(const er_matmul_args *a) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, T_Q5_0); }
void ER_X86_FN(matmul_q5_1)(const er_matmul_args *a) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, T_Q5_1); }
void ER_X86_FN(matmul_iq4_nl)(const er_matmul_args *a) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, T_IQ4_NL); }
