/*
 * ew_neon.c — element-wise kernels, baseline NEON: rmsnorm, softmax,
 * silu-mul, gelu-mul, add, and the Q8_0 activation quantizer (attention:
 * attention_neon.c).
 */
#include "neon.h"
#include "../generic/generic.h"

#include <math.h>

/*
 * e^x to ~2 ulp, the same method as the AVX2 twin: x = n ln2 + r, degree-7
 * Taylor polynomial for e^r, and 2^n applied as 2^(n/2) * 2^(n - n/2) so
 * overflow gives inf and underflow 0 by plain arithmetic. FMAX/FMIN
 * propagate NaN, so a NaN input stays NaN through the clamp.
 */
static inline float32x4_t exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-110.0f)), vdupq_n_f32(100.0f));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

void er_neon_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    if (n <= 0)
        return;
    /* squares in float, sums in double, as generic (another order) */
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t sq = vmulq_f32(v, v);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(sq)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(sq));
    }
    double ss = vaddvq_f64(vaddq_f64(s0, s1));
    for (int j = i; j < n; j++)
        ss += (double)(x[j] * x[j]);
    const float mean = (float)(ss / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

void er_neon_softmax(float *x, int n) {
    if (n <= 0)
        return;
    float mx = x[0];
    int i = 0;
    if (n >= 4) {
        float32x4_t mv = vld1q_f32(x);
        for (i = 4; i + 4 <= n; i += 4)
            mv = vmaxq_f32(mv, vld1q_f32(x + i));
        mx = vmaxvq_f32(mv);
    }
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        for (i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    const float32x4_t m4 = vdupq_n_f32(mx);
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i), m4));
        vst1q_f32(x + i, e);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++)
        x[i] *= inv;
}

void er_neon_silu_mul(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(g + i);
        const float32x4_t e = exp4(vnegq_f32(v));
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), e)), vld1q_f32(u + i)));
    }
    for (; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Gemma's GeGLU gate as v * u / (1 + e^(-2z)): why, and how it relates to
 * generic, at the AVX2 twin (ew_avx2.c). */
void er_neon_gelu_mul(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(g + i);
        const float32x4_t inner = vfmaq_f32(v, vmulq_n_f32(v, 0.044715f), vmulq_f32(v, v));
        const float32x4_t e = exp4(vmulq_n_f32(inner, -2.0f * 0.7978845608028654f));
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), e)), vld1q_f32(u + i)));
    }
    er_gen_gelu_mul(g + i, u + i, n - i);
}

void er_neon_add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* the 32 quants of the block at xb, scaled by id, stored at qs. FCVTAS is
 * generic's roundf (nearest, ties away from zero) and int conversion in one,
 * and turns NaN into 0 as generic does; out-of-range values saturate, then
 * the clamp to [-127, 127] runs on 16-bit lanes, eight at a time. */
static inline void block_quants(const float *xb, float id, int8_t *qs) {
    const int16x8_t lo = vdupq_n_s16(-127), hi = vdupq_n_s16(127);
    for (int k = 0; k < 8; k += 4) {
        int16x8_t h[2];
        for (int u = 0; u < 2; u++) {
            const int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(xb + 4 * (k + 2 * u)), id));
            const int32x4_t b = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(xb + 4 * (k + 2 * u + 1)), id));
            h[u] = vminq_s16(vmaxq_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b)), lo), hi);
        }
        vst1q_s8(qs + 4 * k, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
    }
}

/* Four blocks' scales at a time, as the AVX2 twin takes eight: the divisions
 * d = amax / 127 and 1 / d as vectors and d to half by FCVTN, where one
 * block at a time waited on two dependent scalar divisions and called the
 * portable half conversion. The same IEEE operations, so the same bytes as
 * generic (FCVTN: float_neon.c's er_neon_f32_to_f16), FTZ workers included.
 * Instructions for a 2,048-wide row, counted under qemu (no Arm board to
 * time it on): see PERFORMANCE.md. */
void er_neon_quantize_row_q8_0(const float *x, void *dst, int n) {
    er_block_q8_0 *y = dst;
    const int nb = n / ER_QK8_0;
    int i = 0;
    for (; i + 4 <= nb; i += 4) {
        float am[4], id[4];
        uint16_t d16[4];
        for (int b = 0; b < 4; b++) am[b] = er_neon_absmax(x + (size_t)(i + b) * ER_QK8_0, ER_QK8_0);
        const float32x4_t d = vdivq_f32(vld1q_f32(am), vdupq_n_f32(127.0f));
        const uint32x4_t zero = vceqq_f32(d, vdupq_n_f32(0.0f));
        const float32x4_t inv = vdivq_f32(vdupq_n_f32(1.0f), d);
        vst1q_f32(id, vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(inv), zero)));
        vst1_u16(d16, vreinterpret_u16_f16(vcvt_f16_f32(d)));
        for (int b = 0; b < 4; b++) {
            y[i + b].d = d16[b];
            block_quants(x + (size_t)(i + b) * ER_QK8_0, id[b], y[i + b].qs);
        }
    }
    for (; i < nb; i++) {
        const float d = er_neon_absmax(x + (size_t)i * ER_QK8_0, ER_QK8_0) / 127.0f;
        y[i].d = er_f32_to_f16(d);
        block_quants(x + (size_t)i * ER_QK8_0, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
    }
}

/* kernels.h argmax: the largest value first (four compare-and-select
 * chains; FMAX would let a NaN in), then the first index holding it. */
int32_t er_neon_argmax(const float *x, int n) {
    if (x[0] != x[0]) return 0;
    float32x4_t m[4];
    for (int j = 0; j < 4; j++) m[j] = vdupq_n_f32(x[0]);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 4; j++) {
            const float32x4_t v = vld1q_f32(x + i + 4 * j);
            m[j] = vbslq_f32(vcgtq_f32(v, m[j]), v, m[j]);
        }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        m[0] = vbslq_f32(vcgtq_f32(v, m[0]), v, m[0]);
    }
    /* no NaN in m, so FMAX is exact here */
    float top = vmaxvq_f32(vmaxq_f32(vmaxq_f32(m[0], m[1]), vmaxq_f32(m[2], m[3])));
    for (; i < n; i++)
        if (x[i] > top) top = x[i];
    const float32x4_t vt = vdupq_n_f32(top);
    for (i = 0; i + 4 <= n; i += 4)
        if (vmaxvq_u32(vceqq_f32(vld1q_f32(x + i), vt))) break;
    while (x[i] != top) i++;
    return i;
}
