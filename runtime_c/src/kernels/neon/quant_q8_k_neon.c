/*
 * quant_q8_k_neon.c — float row -> Q8_K activation blocks, baseline NEON,
 * byte for byte what generic/quant_q8_k.c writes (the K-quant dots are
 * bit-identical across tables only if their activations are). Every K-quant
 * matmul input (Q4_K_M, Q5_K_M, Q6_K files) passes through it once per row;
 * the NEON and SVE tables used the generic loop until this file.
 *
 * Equal to generic because: the largest magnitude skips NaN as generic's
 * `a > amax` does (er_neon_absmax); the signed value taken is the first
 * element of that magnitude (generic's strict > keeps the first); the scale
 * is the same scalar division; iscale * x is one IEEE multiply per lane; FCVTNS rounds
 * to nearest, ties to even, which is generic's nearest_even for |v| < 2^22
 * (|v| <= 127 here), and turns NaN into 0 as generic does; the clamp is the
 * same; bsums are exact integer sums. Under FTZ (the workers' mode) both
 * flush the same denormal inputs: FPCR.FZ governs scalar and vector alike.
 */
#include <math.h>
#include <string.h>

#include "neon.h"

/* the first element of xb whose magnitude is amax (> 0) */
static inline float first_of_magnitude(const float *xb, float amax) {
    const float32x4_t va = vdupq_n_f32(amax);
    for (int k = 0; k < ER_QK_K; k += 4)
        if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(xb + k)), va)))
            for (int l = 0;; l++)
                if (fabsf(xb[k + l]) == amax) return xb[k + l];
    return 0.0f; /* not reached: amax is one of the magnitudes */
}

void er_neon_quantize_row_q8_k(const float *x, void *dst, int n) {
    er_block_q8_k *y = dst;
    for (int i = 0; i < n / ER_QK_K; i++) {
        const float *xb = x + (size_t)i * ER_QK_K;
        const float amax = er_neon_absmax(xb, ER_QK_K);
        const float max = amax != 0.0f ? first_of_magnitude(xb, amax) : 0.0f;
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        /* all zeros, inf (iscale 0) or a denormal-sized largest value
         * (iscale inf): a zero block, as generic writes */
        if (iscale == 0.0f || !isfinite(iscale)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const int16x8_t lo = vdupq_n_s16(-127), hi = vdupq_n_s16(127);
        for (int k = 0; k < ER_QK_K; k += 16) {
            int16x8_t h[2];
            for (int u = 0; u < 2; u++) {
                const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + k + 8 * u), iscale));
                const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + k + 8 * u + 4), iscale));
                h[u] = vminq_s16(vmaxq_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b)), lo), hi);
            }
            /* |sum of 16| <= 16 * 127: an int16 holds it */
            y[i].bsums[k / 16] = (int16_t)(vaddvq_s16(h[0]) + vaddvq_s16(h[1]));
            vst1q_s8(y[i].qs + k, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
        }
        y[i].d = 1.0f / iscale;
    }
}
