/*
 * gelu_mul.c — the GeGLU gate of Gemma: g = gelu_tanh(g) * u, with the tanh
 * approximation transformers calls gelu_pytorch_tanh:
 * 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))). tanhf saturates to +-1
 * for large |v|, so the result is v * u or -0 * u there, as in torch.
 */
#include "generic.h"

#include <math.h>

void er_gen_gelu_mul(float *g, const float *u, int n) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    for (int i = 0; i < n; i++) {
        const float v = g[i];
        const float inner = c * (v + 0.044715f * (v * v * v));
        g[i] = 0.5f * v * (1.0f + tanhf(inner)) * u[i];
    }
}
