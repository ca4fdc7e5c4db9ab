/*
 * rope.c — rotary position embedding, in place.
 *
 * Frequencies follow transformers (inv_freq_i = 1 / base^(2i/d) in float,
 * angle = pos * inv_freq_i in float) rather than ggml's running product
 * theta *= base^(-2/d), whose error grows with i; the F32 comparison against
 * transformers is what this must pass.
 *
 * er_gen_rope computes each cos/sin pair once and applies it to every head,
 * with no table. The forward pass instead computes a position's pairs once
 * per token (er_rope_angles) and applies them in every layer (er_gen_rope_cs):
 * 2 x n_layer x head_dim/2 powf/cosf/sinf per token were ~1% of a 110M
 * decode step. Both give bit-identical results (same float operations).
 */
#include "generic.h"

#include <math.h>

static inline void angle(int i, int head_dim, int pos, float freq_base, float *c, float *s) {
    const float inv_freq = 1.0f / powf(freq_base, (float)(2 * i) / (float)head_dim);
    const float theta = (float)pos * inv_freq;
    *c = cosf(theta);
    *s = sinf(theta);
}

/* neox pairs (i, i+half) — transformers' rotate_half; otherwise the
 * interleaved pairs (2i, 2i+1) that GGUF llama weights were permuted to */
static inline void rotate(float *x, int n_heads, int head_dim, int i, float c, float s, int neox) {
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + head_dim / 2 : 2 * i + 1;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * (size_t)head_dim;
        const float x0 = v[a], x1 = v[b];
        /* one product per statement: clang (-ffp-contract=on) fuses x0*c - x1*s
         * into an FMA where the target has one (aarch64), which made generic
         * differ between compilers and from the SIMD rope_cs twins */
        const float x0c = x0 * c, x1s = x1 * s, x0s = x0 * s, x1c = x1 * c;
        v[a] = x0c - x1s;
        v[b] = x0s + x1c;
    }
}

void er_gen_rope(float *x, int n_heads, int head_dim, int pos, float freq_base, int neox) {
    for (int i = 0; i < head_dim / 2; i++) {
        float c, s;
        angle(i, head_dim, pos, freq_base, &c, &s);
        rotate(x, n_heads, head_dim, i, c, s, neox);
    }
}

void er_rope_angles(float *cs, int head_dim, int pos, float freq_base) {
    for (int i = 0; i < head_dim / 2; i++) angle(i, head_dim, pos, freq_base, &cs[2 * i], &cs[2 * i + 1]);
}

void er_gen_rope_cs(float *x, int n_heads, int head_dim, const float *cs, int neox) {
    for (int i = 0; i < head_dim / 2; i++) rotate(x, n_heads, head_dim, i, cs[2 * i], cs[2 * i + 1], neox);
}

void er_rope_angles_scaled(float *cs, int n_rot, int pos, float freq_base, float scale, const float *factors) {
    for (int i = 0; i < n_rot / 2; i++) {
        /* the divisions in transformers' order: inv_freq / factor, then
         * position * inv_freq (its linear and llama3 rope types) */
        float inv_freq = 1.0f / powf(freq_base, (float)(2 * i) / (float)n_rot);
        if (scale != 1.0f) inv_freq = inv_freq / scale;
        if (factors) inv_freq = inv_freq / factors[i];
        const float theta = (float)pos * inv_freq;
        cs[2 * i] = cosf(theta);
        cs[2 * i + 1] = sinf(theta);
    }
}
