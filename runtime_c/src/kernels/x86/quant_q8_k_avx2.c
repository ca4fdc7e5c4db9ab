/*
 * quant_q8_k_avx2.c — float row -> Q8_K activation blocks, AVX2, byte for
 * byte what generic/quant_q8_k.c writes (the K-quant dots are bit-identical
 * across tables only if their activations are).
 *
 * Every K-quant matmul input passes through this once per row; in decode
 * the generic loop was ~3% of a Q4_K token once the dots got fast.
 *
 * Equal to generic because: the largest magnitude is a max over |x| that
 * skips NaN as generic's `a > amax` does, and the signed value taken is the
 * first element of that magnitude (generic's strict > keeps the first); the
 * scale is the same scalar division; iscale * x is one IEEE multiply per
 * lane; cvtps_epi32 rounds to nearest even under the default MXCSR mode,
 * which is generic's nearest_even for |v| < 2^22 (|v| <= 127 here); NaN
 * lanes become 0 and the clamp is the same; bsums are exact int sums.
 */
#include <math.h>
#include <string.h>

#include "avx2.h"

/* Sums of each of the 8 vectors' lanes, as one vector (lane i = sum of v[i]). */
static inline __m256i hsum8_epi32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

void er_avx2_quantize_row_q8_k(const float *x, void *dst, int n) {
    er_block_q8_k *y = dst;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int i = 0; i < n / ER_QK_K; i++) {
        const float *xb = x + (size_t)i * ER_QK_K;
        __m256 am = _mm256_setzero_ps();
        for (int k = 0; k < ER_QK_K; k += 8) am = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + k), absmask), am);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        float max = 0.0f;
        if (amax != 0.0f) {
            const __m256 va = _mm256_set1_ps(amax);
            for (int k = 0; k < ER_QK_K; k += 8) {
                const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + k), absmask), va,
                                                                 _CMP_EQ_OQ));
                if (hit) {
                    max = xb[k + __builtin_ctz((unsigned)hit)];
                    break;
                }
            }
        }
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        if (iscale == 0.0f || !isfinite(iscale)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
        __m256i pair[16]; /* each 16 quants' sum spread over 8 lanes */
        for (int k = 0; k < ER_QK_K; k += 32) {
            __m256i q[4];
            for (int c = 0; c < 4; c++) {
                const __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(xb + k + 8 * c));
                const __m256i r = _mm256_and_si256(_mm256_cvtps_epi32(v), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_ORD_Q)));
                q[c] = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
            }
            pair[k / 32 * 2] = _mm256_add_epi32(q[0], q[1]);
            pair[k / 32 * 2 + 1] = _mm256_add_epi32(q[2], q[3]);
            /* packs interleave the 128-bit lanes; the permute restores order */
            const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(void *)(y[i].qs + k),
                                _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        const __m256i s0 = hsum8_epi32(pair), s1 = hsum8_epi32(pair + 8);
        /* |bsum| <= 16 * 127: packs never saturates */
        const __m256i b16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(s0, s1), 0xd8);
        _mm256_storeu_si256((__m256i *)(void *)y[i].bsums, b16);
        y[i].d = 1.0f / iscale;
    }
}
