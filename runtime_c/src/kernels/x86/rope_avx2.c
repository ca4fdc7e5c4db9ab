/*
 * rope_avx2.c — the RoPE rotation with precomputed (cos, sin) pairs, 8 floats
 * at a time.
 *
 * Bit-identical to er_gen_rope_cs: each output is one rounded product minus
 * (or plus) another, exactly as generic computes it. That rules out
 * _mm256_fmadd_ps/fmsub (one rounding fewer) although this file is built
 * with -mfma, and there is no scalar tail for a compiler to fuse (below).
 * The forward pass relies on this: switching tables must never change
 * logits.
 */
#include "avx2.h"

#include <string.h>

/* 8 neox pairs' cos and sin from 16 interleaved floats (c0,s0,c1,s1,...):
 * per 128-bit lane the shuffles give c0 c1 c4 c5 | c2 c3 c6 c7, and the
 * 64-bit permute (0, 2, 1, 3) puts those pairs of floats back in order. */
static inline void cs_split8(const float *cs, __m256 *c, __m256 *s) {
    const __m256 lo = _mm256_loadu_ps(cs), hi = _mm256_loadu_ps(cs + 8);
    *c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
    *s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
}

/* neox: (a, b) = (a c - b s, a s + b c) for 8 pairs a = pa[0..8), b = pb[0..8) */
static inline void rot8_neox(float *pa, float *pb, __m256 c, __m256 s) {
    const __m256 xa = _mm256_loadu_ps(pa), xb = _mm256_loadu_ps(pb);
    _mm256_storeu_ps(pa, _mm256_sub_ps(_mm256_mul_ps(xa, c), _mm256_mul_ps(xb, s)));
    _mm256_storeu_ps(pb, _mm256_add_ps(_mm256_mul_ps(xa, s), _mm256_mul_ps(xb, c)));
}

/* normal: C = (c0,c0,c1,c1,..) and S' = (-s0,s0,-s1,s1,..) for 4 pairs from
 * their 8 interleaved floats cs4 */
static inline void cs_dup4(const float *cs4, __m256 *c, __m256 *s) {
    const __m256 neg_even = _mm256_castsi256_ps(_mm256_set1_epi64x(0x80000000ll)); /* sign of lanes 0, 2, .. */
    const __m256 t = _mm256_loadu_ps(cs4);
    *c = _mm256_moveldup_ps(t);
    *s = _mm256_xor_ps(_mm256_movehdup_ps(t), neg_even);
}

/* normal: 4 adjacent pairs at p. x*C + swap(x)*S' is (x0 c + x1 (-s),
 * x1 c + x0 s): generic's two roundings, as negation is exact and the sum
 * commutative. (Not addsub, which gcc -O3 may merge with the products into
 * vfmaddsub.) */
static inline void rot4_normal(float *p, __m256 c, __m256 s) {
    const __m256 xv = _mm256_loadu_ps(p);
    _mm256_storeu_ps(p, _mm256_add_ps(_mm256_mul_ps(xv, c), _mm256_mul_ps(_mm256_permute_ps(xv, 0xb1), s)));
}

/*
 * Pairs left over after the full vectors go through the same vector code on
 * zero-padded copies, not through scalar code: gcc -O3 with -mfma turns a
 * scalar x0*c - x1*s / x0*s + x1*c pair into vfmaddsub even with
 * -ffp-contract=off, one rounding fewer than generic.
 */
static void rope_neox(float *x, int n_heads, int head_dim, const float *cs) {
    const int half = head_dim / 2;
    const int i_end = half & ~7;
    __m256 c, s;
    for (int i = 0; i < i_end; i += 8) {
        cs_split8(cs + 2 * i, &c, &s); /* once per 8 pairs, reused by every head */
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            rot8_neox(v + i, v + i + half, c, s);
        }
    }
    const int r = half - i_end;
    if (r == 0) return;
    float cbuf[16] = {0};
    memcpy(cbuf, cs + 2 * i_end, (size_t)r * 2 * sizeof(float));
    cs_split8(cbuf, &c, &s);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        float a[8] = {0}, b[8] = {0};
        memcpy(a, v + i_end, (size_t)r * sizeof(float));
        memcpy(b, v + i_end + half, (size_t)r * sizeof(float));
        rot8_neox(a, b, c, s);
        memcpy(v + i_end, a, (size_t)r * sizeof(float));
        memcpy(v + i_end + half, b, (size_t)r * sizeof(float));
    }
}

static void rope_normal(float *x, int n_heads, int head_dim, const float *cs) {
    const int half = head_dim / 2;
    const int i_end = half & ~3;
    __m256 c, s;
    for (int i = 0; i < i_end; i += 4) {
        cs_dup4(cs + 2 * i, &c, &s); /* once per 4 pairs, reused by every head */
        for (int h = 0; h < n_heads; h++) rot4_normal(x + (size_t)h * (size_t)head_dim + 2 * i, c, s);
    }
    const int r = half - i_end;
    if (r == 0) return;
    float cbuf[8] = {0};
    memcpy(cbuf, cs + 2 * i_end, (size_t)r * 2 * sizeof(float));
    cs_dup4(cbuf, &c, &s);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        float t[8] = {0};
        memcpy(t, v + 2 * i_end, (size_t)r * 2 * sizeof(float));
        rot4_normal(t, c, s);
        memcpy(v + 2 * i_end, t, (size_t)r * 2 * sizeof(float));
    }
}

void er_avx2_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox) {
    if (neox)
        rope_neox(x, n_heads, head_dim, cs);
    else
        rope_normal(x, n_heads, head_dim, cs);
}
