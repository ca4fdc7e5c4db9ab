/*
 * rope_neon.c — the RoPE rotation with precomputed (cos, sin) pairs, 4 pairs
 * at a time. Baseline NEON, shared by every Arm table (sve included).
 *
 * Bit-identical to er_gen_rope_cs: each output is one rounded product minus
 * (or plus) another, as generic computes it, so no vfmaq/vfmsq (one rounding
 * fewer), and no scalar tail (below). The forward pass relies on this:
 * switching tables must never change logits.
 */
#include "neon.h"

#include <string.h>

/* a*c - b*s and a*s + b*c, each product rounded on its own */
static inline float32x4_t rot_a(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t s) {
    return vsubq_f32(vmulq_f32(a, c), vmulq_f32(b, s));
}
static inline float32x4_t rot_b(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t s) {
    return vaddq_f32(vmulq_f32(a, s), vmulq_f32(b, c));
}

/* 4 pairs: neox a = pa[0..4), b = pb[0..4); normal (a, b) interleaved at pa
 * (pb unused); cs4 their 8 interleaved (cos, sin) floats */
static inline void rot4(float *pa, float *pb, const float *cs4, int neox) {
    const float32x4x2_t t = vld2q_f32(cs4);
    if (neox) {
        const float32x4_t xa = vld1q_f32(pa), xb = vld1q_f32(pb);
        vst1q_f32(pa, rot_a(xa, xb, t.val[0], t.val[1]));
        vst1q_f32(pb, rot_b(xa, xb, t.val[0], t.val[1]));
    } else {
        const float32x4x2_t p = vld2q_f32(pa);
        float32x4x2_t r;
        r.val[0] = rot_a(p.val[0], p.val[1], t.val[0], t.val[1]);
        r.val[1] = rot_b(p.val[0], p.val[1], t.val[0], t.val[1]);
        vst2q_f32(pa, r);
    }
}

/*
 * vld2q splits interleaved (c, s) into a cos and a sin vector and, in the
 * normal layout, the (x0, x1) pairs likewise (vst2q interleaves them back),
 * so both layouts are plain element-wise code. Pairs left over after the
 * full vectors go through the same code on zero-padded copies rather than
 * through scalar code a compiler might fuse (clang contracts x0*c - x1*s).
 */
void er_neon_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox) {
    const int half = head_dim / 2;
    const int i_end = half & ~3;
    const int r = half - i_end;
    float cbuf[8] = {0};
    if (r) memcpy(cbuf, cs + 2 * i_end, (size_t)r * 2 * sizeof(float));
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        for (int i = 0; i < i_end; i += 4) rot4(neox ? v + i : v + 2 * i, v + i + half, cs + 2 * i, neox);
        if (r == 0) continue;
        float a[8] = {0}, b[4] = {0};
        if (neox) {
            memcpy(a, v + i_end, (size_t)r * sizeof(float));
            memcpy(b, v + i_end + half, (size_t)r * sizeof(float));
            rot4(a, b, cbuf, 1);
            memcpy(v + i_end, a, (size_t)r * sizeof(float));
            memcpy(v + i_end + half, b, (size_t)r * sizeof(float));
        } else {
            memcpy(a, v + 2 * i_end, (size_t)r * 2 * sizeof(float));
            rot4(a, b, cbuf, 0);
            memcpy(v + 2 * i_end, a, (size_t)r * 2 * sizeof(float));
        }
    }
}
