/*
 * q_avx2.c — Q8_0 and Q4_0 weights against Q8_0 activations, AVX2.
 *
 * Each 32-element block gives an exact int32 dot (maddubs on |w| and x
 * carrying w's sign, then madd to int32) that is converted to float and
 * FMA-accumulated with the product of the two block scales — the same
 * integers as generic, summed in a different float order, so results
 * differ from generic by float rounding only.
 *
 * matmul takes four activation rows per pass over a weight row (the weight
 * block is loaded and, for Q4_0, unpacked once and used four times) and
 * walks weight rows in cache-sized chunks: prefill is a blocked matmul, not
 * m matvecs.
 */
#include "../matmul_tiles.h"
#include "avx2.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE float h2f(er_f16 h) { return _cvtsh_ss(h); }

/* One Q4_0 block as 32 signed int8 in element order (q - 8). */
static ALWAYS_INLINE __m256i unpack_q4_0(const er_block_q4_0 *b) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)b->qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

static ALWAYS_INLINE __m256i load_q8_0(const er_block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)(const void *)b->qs);
}

/* One weight block (wq, |wq| in aw, scale dw) against activation block xb,
 * FMA-added into acc. */
static ALWAYS_INLINE __m256 block_fma(__m256i aw, __m256i wq, float dw, const er_block_q8_0 *xb, __m256 acc) {
    const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load_q8_0(xb), wq));
    const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw * h2f(xb->d)), acc);
}

static ALWAYS_INLINE __m256i load_w(const void *w_row, int i, float *dw, const int q4) {
    if (q4) {
        const er_block_q4_0 *wb = (const er_block_q4_0 *)w_row + i;
        *dw = h2f(wb->d);
        return unpack_q4_0(wb);
    }
    const er_block_q8_0 *wb = (const er_block_q8_0 *)w_row + i;
    *dw = h2f(wb->d);
    return load_q8_0(wb);
}

/* Four activation rows (x, x + xs, ...) against one weight row, each weight
 * block unpacked once. Four named accumulators, not an array: GCC keeps an
 * array of vectors in memory and the FMAs then chain through the stack. */
static ALWAYS_INLINE void row4_q(int n, const void *w_row, const unsigned char *x, size_t xs, float *out,
                                 const int q4) {
    const int nb = n / ER_QK8_0;
    const er_block_q8_0 *x0 = (const er_block_q8_0 *)(const void *)x;
    const er_block_q8_0 *x1 = (const er_block_q8_0 *)(const void *)(x + xs);
    const er_block_q8_0 *x2 = (const er_block_q8_0 *)(const void *)(x + 2 * xs);
    const er_block_q8_0 *x3 = (const er_block_q8_0 *)(const void *)(x + 3 * xs);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        float dw;
        const __m256i wq = load_w(w_row, i, &dw, q4);
        const __m256i aw = _mm256_sign_epi8(wq, wq);
        a0 = block_fma(aw, wq, dw, x0 + i, a0);
        a1 = block_fma(aw, wq, dw, x1 + i, a1);
        a2 = block_fma(aw, wq, dw, x2 + i, a2);
        a3 = block_fma(aw, wq, dw, x3 + i, a3);
    }
    out[0] = er_avx2_hsum_ps(a0);
    out[1] = er_avx2_hsum_ps(a1);
    out[2] = er_avx2_hsum_ps(a2);
    out[3] = er_avx2_hsum_ps(a3);
}

/* Single-row dot with two interleaved accumulators, so the 4-cycle FMA
 * latency does not serialise the blocks in decode. */
static ALWAYS_INLINE float dot_q(int n, const void *w_row, const void *x_row, const int q4) {
    const int nb = n / ER_QK8_0;
    const er_block_q8_0 *x = x_row;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 2 <= nb; i += 2) {
        float d0, d1;
        const __m256i w0 = load_w(w_row, i, &d0, q4), w1 = load_w(w_row, i + 1, &d1, q4);
        acc0 = block_fma(_mm256_sign_epi8(w0, w0), w0, d0, x + i, acc0);
        acc1 = block_fma(_mm256_sign_epi8(w1, w1), w1, d1, x + i + 1, acc1);
    }
    if (i < nb) {
        float d0;
        const __m256i w0 = load_w(w_row, i, &d0, q4);
        acc0 = block_fma(_mm256_sign_epi8(w0, w0), w0, d0, x + i, acc0);
    }
    return er_avx2_hsum_ps(_mm256_add_ps(acc0, acc1));
}

float er_avx2_dot_q8_0(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 0); }
float er_avx2_dot_q4_0(int n, const void *w_row, const void *x_row) { return dot_q(n, w_row, x_row, 1); }

/* R weight rows one after another, and matmul_q asks for one: these
 * file-layout kernels only see matrices the repacked layouts do not take
 * (a row count that is not a multiple of the row group) or a run with
 * EDGERUN_REPACK=0, so they were not given a multi-row register tile */
static ALWAYS_INLINE void rows_q(int n, const void *w, size_t rb, const int R, const unsigned char *x, size_t xs,
                                 float *out, const int q4) {
    for (int j = 0; j < R; j++) row4_q(n, (const unsigned char *)w + (size_t)j * rb, x, xs, out + 4 * j, q4);
}

/* chunks of weight rows x tiles of four activation rows (matmul_tiles.h) */
static ALWAYS_INLINE void matmul_q(const er_matmul_args *a, const int q4) { ER_MATMUL_TILES(a, 1, rows_q, dot_q, q4); }

void er_avx2_matmul_q8_0(const er_matmul_args *a) { matmul_q(a, 0); }
void er_avx2_matmul_q4_0(const er_matmul_args *a) { matmul_q(a, 1); }
