/*
 * ew_avx2.c — element-wise kernels, AVX2+FMA: rmsnorm, softmax, silu-mul,
 * add, attention, and the Q8_0 activation quantizer.
 */
#include "avx2.h"
#include "edgerun.h" /* ER_KV_F16 */

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

void er_avx2_add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* Attention, the blocked path: measured on 12 layers x 12 heads of 64 at 128
 * cached positions (110M shapes), 0.76 -> 0.33 ms per token against the
 * per-position dot and per-position load/store of out it replaces.
 *
 * Decode reads the KV cache from DRAM (the weights streamed since the last
 * token evicted it), one head's 128 bytes out of every 1536-byte row (F16,
 * 12 heads): a strided walk the hardware prefetchers follow poorly, 7 GB/s
 * where the weights stream at 20-30. Software prefetch fixes most of it:
 * K rows PF_K_ROWS positions ahead, V rows PF_V_ROWS ahead in the weighted
 * sum, and the next heads' K and V columns of each row while this head's
 * K pass runs. Measured (F16, 12 x 12 heads, caches flushed by a 96 MiB
 * read between tokens, min of 30, against no prefetch): n_kv 128 0.62 ->
 * 0.29 ms, n_kv 192 0.88 -> 0.43 ms, n_kv 20 0.11 -> 0.07 ms. The price is
 * paid when K and V are already in cache (prefill, tiny models): 0.12 ->
 * 0.145 ms warm, nothing measurable on the 15M model's tokens/s. Next-head
 * prefetch is most of it (0.65 -> 0.42 alone); adding the head after it
 * gave cold -12% and 110M Q4_K decode at 2 threads +3-4% (heads alternate
 * between the threads there); V rows prefetched during the K pass lost 5%. */
#define PF_K_ROWS 8
#define PF_V_ROWS 16

/* Prefetch the cache lines of [p, p + n) into L1 (t0) or L2 (t1); a
 * prefetch never faults, so an address past the buffer is harmless. Two
 * functions because clang wants the hint a literal constant. */
static inline void prefetch_t0(const char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

static inline void prefetch_t1(const char *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
}

/* Eight positions' rows of head_dim (a multiple of 8) against q: eight
 * independent FMA chains (one per position, so the 4-cycle FMA latency is
 * hidden), reduced together by a transposing hadd tree into one vector of
 * eight scores, instead of a call and a horizontal sum per position. */
static inline __m256 scores8(const unsigned char *kb, size_t row_bytes, const float *q, int head_dim, const int f16) {
    __m256 a[8];
    for (int p = 0; p < 8; p++) a[p] = _mm256_setzero_ps();
    for (int j = 0; j < head_dim; j += 8) {
        const __m256 qv = _mm256_loadu_ps(q + j);
        for (int p = 0; p < 8; p++) {
            const unsigned char *r = kb + (size_t)p * row_bytes;
            const __m256 kv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                                  : _mm256_loadu_ps((const float *)(const void *)r + j);
            a[p] = _mm256_fmadd_ps(kv, qv, a[p]);
        }
    }
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* out[j0 .. j0 + 8 * nv) = sum_t scores[t] v_t, the nv (<= 8) output vectors
 * held in registers across all positions rather than loaded and stored per
 * position (a store-to-load chain through out). */
static inline void weighted_sum(float *out, const unsigned char *vb, size_t row_bytes, const float *scores, int n_kv,
                                int j0, const int nv, const int f16) {
    __m256 o[8];
    for (int i = 0; i < nv; i++) o[i] = _mm256_setzero_ps();
    for (int t = 0; t < n_kv; t++) {
        const __m256 p = _mm256_broadcast_ss(scores + t);
        const unsigned char *r = vb + (size_t)t * row_bytes;
        if (t + PF_V_ROWS < n_kv)
            prefetch_t0((const char *)r + PF_V_ROWS * row_bytes + (size_t)j0 * (f16 ? 2 : 4), (size_t)nv * (f16 ? 16 : 32));
        for (int i = 0; i < nv; i++) {
            const int j = j0 + 8 * i;
            const __m256 vv = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 2 * (size_t)j)))
                                  : _mm256_loadu_ps((const float *)(const void *)r + j);
            o[i] = _mm256_fmadd_ps(p, vv, o[i]);
        }
    }
    for (int i = 0; i < nv; i++) _mm256_storeu_ps(out + j0 + 8 * i, o[i]);
}

static inline void attention_x8(float *out, const float *q, const unsigned char *kb, const unsigned char *vb,
                                size_t row_bytes, int n_kv, int head_dim, float scale, float *scores, const int f16) {
    const __m256 sv = _mm256_set1_ps(scale);
    int t = 0;
    const size_t hb = (size_t)head_dim * (f16 ? 2 : 4); /* one head's bytes in a K or V row */
    for (; t + 8 <= n_kv; t += 8) {
        for (int p = 0; p < 8; p++) {
            const char *kr = (const char *)kb + (size_t)(t + p) * row_bytes;
            if (t + p + PF_K_ROWS < n_kv) prefetch_t0(kr + PF_K_ROWS * row_bytes, hb);
            /* the next two heads' K and V columns of the same row (L2):
             * the caller walks heads in order, one thread taking every head
             * or two alternating; past the last head this reads ahead into
             * the next row, also ours */
            const char *vr = (const char *)vb + (size_t)(t + p) * row_bytes;
            prefetch_t1(kr + hb, 2 * hb);
            prefetch_t1(vr + hb, 2 * hb);
        }
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(sv, scores8(kb + (size_t)t * row_bytes, row_bytes, q, head_dim, f16)));
    }
    for (; t < n_kv; t++) {
        const void *kr = kb + (size_t)t * row_bytes;
        scores[t] = scale * (f16 ? er_avx2_dot_f16(head_dim, kr, q) : er_avx2_dot_f32(head_dim, kr, q));
    }
    er_avx2_softmax(scores, n_kv);
    int j = 0;
    for (; j + 64 <= head_dim; j += 64) weighted_sum(out, vb, row_bytes, scores, n_kv, j, 8, f16);
    switch ((head_dim - j) / 8) {
    case 7: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 7, f16); break;
    case 6: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 6, f16); break;
    case 5: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 5, f16); break;
    case 4: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 4, f16); break;
    case 3: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 3, f16); break;
    case 2: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 2, f16); break;
    case 1: weighted_sum(out, vb, row_bytes, scores, n_kv, j, 1, f16); break;
    default: break;
    }
}

void er_avx2_attention(float *out, const float *q, const void *k, const void *v, int kv_type, size_t kv_stride,
                       int n_kv, int head_dim, float scale, float *scores) {
    const int f16 = kv_type == ER_KV_F16;
    const size_t esz = f16 ? 2 : 4;
    const unsigned char *kb = k, *vb = v;
    /* every head size the supported models use (64, 128, ...): the blocked
     * path; anything else the plain loops below */
    if (head_dim > 0 && head_dim % 8 == 0) {
        if (f16)
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 1);
        else
            attention_x8(out, q, kb, vb, kv_stride * esz, n_kv, head_dim, scale, scores, 0);
        return;
    }
    for (int t = 0; t < n_kv; t++) {
        const void *kr = kb + (size_t)t * kv_stride * esz;
        scores[t] = scale * (f16 ? er_avx2_dot_f16(head_dim, kr, q) : er_avx2_dot_f32(head_dim, kr, q));
    }
    er_avx2_softmax(scores, n_kv);
    if (head_dim <= 0)
        return;
    for (int j = 0; j < head_dim; j++)
        out[j] = 0.0f;
    for (int t = 0; t < n_kv; t++) {
        const __m256 p = _mm256_set1_ps(scores[t]);
        const unsigned char *vr = vb + (size_t)t * kv_stride * esz;
        int j = 0;
        if (f16) {
            const er_f16 *h = (const er_f16 *)(const void *)vr;
            for (; j + 8 <= head_dim; j += 8) {
                const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + j)));
                _mm256_storeu_ps(out + j, _mm256_fmadd_ps(p, vv, _mm256_loadu_ps(out + j)));
            }
            for (; j < head_dim; j++)
                out[j] += scores[t] * _cvtsh_ss(h[j]);
        } else {
            const float *f = (const float *)(const void *)vr;
            for (; j + 8 <= head_dim; j += 8)
                _mm256_storeu_ps(out + j, _mm256_fmadd_ps(p, _mm256_loadu_ps(f + j), _mm256_loadu_ps(out + j)));
            for (; j < head_dim; j++)
                out[j] += scores[t] * f[j];
        }
    }
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

void er_avx2_quantize_row_q8_0(const float *x, void *dst, int n) {
    er_block_q8_0 *y = dst;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int i = 0; i < n / ER_QK8_0; i++) {
        const float *xb = x + (size_t)i * ER_QK8_0;
        __m256 v[4], am = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            /* (new, acc): a NaN element leaves the running max alone, like
             * generic's `a > amax ? a : amax` */
            am = _mm256_max_ps(_mm256_and_ps(v[k], absmask), am);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = er_f32_to_f16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            __m256 r = round_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id)));
            r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN -> 0 */
            r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
            q[k] = _mm256_cvttps_epi32(r);
        }
        /* packs interleave the 128-bit lanes; the permute restores order */
        const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        const __m256i ord = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)y[i].qs, ord);
    }
}
