/*
 * ew_avx2.c — element-wise kernels, AVX2+FMA: rmsnorm, softmax, silu-mul, gelu-mul,
 * add, and the Q8_0 activation quantizer (attention: attention_avx2.c).
 */
#include "avx2.h"
#include "../generic/generic.h"

#include <math.h>

/*
 * e^x to ~2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7
 * Taylor polynomial (remainder < 6e-9 relative), times 2^n applied as two
 * factors 2^(n/2) * 2^(n - n/2) so results that overflow become inf and
 * results that underflow become 0 (or denormal) by plain float arithmetic,
 * with no range special cases. The clamp only keeps n a sane integer; NaN
 * passes through (max/min return their second operand on NaN).
 */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(100.0f), _mm256_max_ps(_mm256_set1_ps(-110.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

void er_avx2_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    if (n <= 0)
        return;
    /* squares in float, sums in double: generic's arithmetic in another
     * order, so the mean (rounded to float) almost always matches exactly */
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 sq = _mm256_mul_ps(v, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(s0, s1));
    double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (int j = i; j < n; j++)
        ss += (double)(x[j] * x[j]);
    const float mean = (float)(ss / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 sv = _mm256_set1_ps(scale);
    i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

void er_avx2_softmax(float *x, int n) {
    if (n <= 0)
        return;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv);
    float lanes[8];
    _mm256_storeu_ps(lanes, mv);
    float mx = lanes[0];
    for (int k = 1; k < 8; k++)
        mx = lanes[k] > mx ? lanes[k] : mx;
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) {
        for (i = 0; i < n; i++)
            x[i] = 0.0f;
        return;
    }
    const __m256 m8 = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m8));
        _mm256_storeu_ps(x + i, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double dl[4];
    _mm256_storeu_pd(dl, _mm256_add_pd(s0, s1));
    double sum = (dl[0] + dl[1]) + (dl[2] + dl[3]);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    const __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
    for (; i < n; i++)
        x[i] *= inv;
}

void er_avx2_silu_mul(float *g, const float *u, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(g + i);
        const __m256 e = exp8(_mm256_xor_ps(v, neg));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/*
 * Gemma's GeGLU gate, g = gelu_tanh(g) * u, written as v * u / (1 + e^(-2z))
 * with z = sqrt(2/pi) (v + 0.044715 v^3): the same function as the generic
 * 0.5 v (1 + tanh z), since 1 + tanh z = 2 / (1 + e^(-2z)). It differs from
 * generic (libm's tanhf) by float rounding, and is the more accurate of the
 * two where v is very negative (1 + tanhf cancels there). Large |v| saturates
 * as in generic: e^(-2z) overflows to inf (v * u / inf = -0) or underflows to 0.
 */
void er_avx2_gelu_mul(float *g, const float *u, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), c2 = _mm256_set1_ps(-2.0f * 0.7978845608028654f),
                 k = _mm256_set1_ps(0.044715f);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(g + i);
        const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(k, v), _mm256_mul_ps(v, v), v);
        const __m256 e = exp8(_mm256_mul_ps(c2, inner));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    er_gen_gelu_mul(g + i, u + i, n - i);
}

void er_avx2_add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* roundf (half away from zero) built from truncation: exact for |v| < 2^23. */
static inline __m256 round_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 bump = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
    return _mm256_add_ps(t, bump);
}

/* |x| max of one block of 32, NaN elements left out (as generic's
 * `a > amax ? a : amax`: max_ps keeps its second operand on NaN) */
static inline float block_amax(const float *xb) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 am = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) am = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), absmask), am);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* the 32 quants of the block at xb, scaled by id, stored at qs */
static inline void block_quants(const float *xb, float id, int8_t *qs) {
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        __m256 r = round_away(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), _mm256_set1_ps(id)));
        r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN -> 0 */
        r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        q[k] = _mm256_cvttps_epi32(r);
    }
    /* packs interleave the 128-bit lanes; the permute restores order */
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ord = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)qs, ord);
}

/* Eight blocks' scales at a time: the divisions d = amax / 127 and 1 / d as
 * vectors, and d to half by F16C (round to nearest even, as
 * er_f32_to_f16), where one block at a time waited on two scalar
 * divisions and a call per block: 1,240 -> 590 ns for a 2,048-wide row
 * (ffn_down's input, which the caller quantizes while the workers wait),
 * 460 -> 230 ns for 768 (Zen 4, min of 2,000). The same IEEE operations,
 * so the same bytes as generic, with FTZ/DAZ set too (F16C keeps half
 * subnormals, which small activations' scales are: checked over scales
 * down to 1e-21). */
void er_avx2_quantize_row_q8_0(const float *x, void *dst, int n) {
    er_block_q8_0 *y = dst;
    const int nb = n / ER_QK8_0;
    int i = 0;
    for (; i + 8 <= nb; i += 8) {
        float am[8], id[8];
        uint16_t d16[8];
        for (int b = 0; b < 8; b++) am[b] = block_amax(x + (size_t)(i + b) * ER_QK8_0);
        const __m256 d = _mm256_div_ps(_mm256_loadu_ps(am), _mm256_set1_ps(127.0f));
        const __m256 nz = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_OQ);
        _mm256_storeu_ps(id, _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), d), nz));
        _mm_storeu_si128((__m128i *)(void *)d16, _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (int b = 0; b < 8; b++) {
            y[i + b].d = d16[b];
            block_quants(x + (size_t)(i + b) * ER_QK8_0, id[b], y[i + b].qs);
        }
    }
    for (; i < nb; i++) {
        const float d = block_amax(x + (size_t)i * ER_QK8_0) / 127.0f;
        y[i].d = er_f32_to_f16(d);
        block_quants(x + (size_t)i * ER_QK8_0, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
    }
}

/* kernels.h argmax: the largest value first (four MAX chains: maxps(x, m)
 * is `x > m ? x : m`, so a NaN never enters and the order does not
 * matter), then the first index holding it: 32,000 logits ~3 us against
 * generic's ~11. */
int32_t er_avx2_argmax(const float *x, int n) {
    if (x[0] != x[0]) return 0;
    __m256 m[4];
    for (int j = 0; j < 4; j++) m[j] = _mm256_set1_ps(x[0]);
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++) m[j] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * j), m[j]);
    for (; i + 8 <= n; i += 8) m[0] = _mm256_max_ps(_mm256_loadu_ps(x + i), m[0]);
    const __m256 m8 = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float top = _mm_cvtss_f32(m4);
    for (; i < n; i++)
        if (x[i] > top) top = x[i];
    const __m256 vt = _mm256_set1_ps(top);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vt, _CMP_EQ_OQ));
        if (hit) return i + __builtin_ctz((unsigned)hit);
    }
    while (x[i] != top) i++;
    return i;
}
