/*
 * silu_mul.c — the SwiGLU gate: g = silu(g) * u, silu(v) = v / (1 + e^-v).
 * Finite for every finite v: for v < -88, e^-v becomes inf and the quotient
 * is -0, the correct limit, so no clamp is needed.
 */
#include "generic.h"

#include <math.h>

void er_gen_silu_mul(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
