/*
 * rope.c — rotary position embedding, in place.
 *
 * Frequencies follow transformers (inv_freq_i = 1 / base^(2i/d) in float,
 * angle = pos * inv_freq_i in float) rather than ggml's running product
 * theta *= base^(-2/d), whose error grows with i; the F32 comparison against
 * transformers is what this must pass.
 *
 * The loop runs frequency-outermost so each cos/sin pair is computed once and
 * applied to every head — no table, so no scratch memory is needed.
 */
#include "generic.h"

#include <math.h>

void er_gen_rope(float *x, int n_heads, int head_dim, int pos, float freq_base, int neox) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        const float inv_freq = 1.0f / powf(freq_base, (float)(2 * i) / (float)head_dim);
        const float theta = (float)pos * inv_freq;
        const float c = cosf(theta), s = sinf(theta);
        /* neox pairs (i, i+half) — transformers' rotate_half; otherwise the
         * interleaved pairs (2i, 2i+1) that GGUF llama weights were permuted to */
        const int a = neox ? i : 2 * i;
        const int b = neox ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * (size_t)head_dim;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}
